//! The driver side of a split virtqueue (virtio 1.x §2.7), written by hand.
//!
//! Why not `virtio-queue`: it implements the *device* side (it pops available chains and
//! adds used elements). A driver does the mirror image — fills descriptors, publishes the
//! available index, reaps the used ring, decides when to kick — which `virtio-queue` only
//! offers as a test mock (`MockSplitQueue`, no event-index logic, no reaping, panics on
//! bad input). The driver side is small: the code below is it.
//!
//! Trust: the backend can write anything into the shared rings. Everything this side relies
//! on (which descriptors are out, where each buffer is) is kept in private memory; from the
//! shared rings it only reads the used index and used elements, and validates both.

use std::sync::atomic::{fence, Ordering};

use crate::memory::SharedMemory;
use crate::stats::{RingFault, RingStats};

/// `VRING_DESC_F_WRITE`: the device writes this buffer.
pub(crate) const DESC_F_WRITE: u16 = 2;
/// `VRING_AVAIL_F_NO_INTERRUPT`.
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VRING_USED_F_NO_NOTIFY`.
const USED_F_NO_NOTIFY: u16 = 1;

/// Byte offsets of a split ring's three parts, for `size` entries, starting at `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingLayout {
    pub(crate) size: u16,
    pub(crate) desc: u64,
    pub(crate) avail: u64,
    pub(crate) used: u64,
}

impl RingLayout {
    /// Descriptor table first (16-byte entries), then the available ring (flags, idx,
    /// `size` entries, `used_event`), then the used ring 4-aligned (flags, idx, `size`
    /// 8-byte elements, `avail_event`).
    pub(crate) fn new(base: u64, size: u16) -> RingLayout {
        let n = u64::from(size);
        let desc = base;
        let avail = desc + 16 * n;
        let used = (avail + 6 + 2 * n).next_multiple_of(4);
        RingLayout {
            size,
            desc,
            avail,
            used,
        }
    }

    /// Bytes from `base` to the end of the used ring.
    pub(crate) fn len(&self) -> u64 {
        self.used + 6 + 8 * u64::from(self.size) - self.desc
    }

    fn avail_entry(&self, slot: u16) -> u64 {
        self.avail + 4 + 2 * u64::from(slot % self.size)
    }
    fn used_event(&self) -> u64 {
        self.avail + 4 + 2 * u64::from(self.size)
    }
    fn used_entry(&self, slot: u16) -> u64 {
        self.used + 4 + 8 * u64::from(slot % self.size)
    }
    fn avail_event(&self) -> u64 {
        self.used + 4 + 8 * u64::from(self.size)
    }
}

/// virtio's `vring_need_event`: with event index `event`, must moving an index from `old`
/// to `new` notify? True when `event` lies in `[old, new)`, modulo 2^16.
pub(crate) fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// A used element, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Used {
    pub(crate) id: u16,
    pub(crate) len: u32,
}

/// One ring, driver side. Descriptor `i` always describes buffer `i` (fixed at setup), so
/// the descriptor table is written once per buffer and never read back.
#[derive(Debug)]
pub(crate) struct DriverRing {
    pub(crate) layout: RingLayout,
    event_idx: bool,
    /// Next available slot to fill (free-running).
    next_avail: u16,
    /// The available index the backend last saw (published).
    published: u16,
    /// Next used slot to read (free-running).
    last_used: u16,
    /// Which descriptors the backend holds.
    in_flight: Vec<bool>,
    /// Descriptors we hold, ready to go out.
    free: Vec<u16>,
    /// Broken by the backend: nothing more is read from it.
    broken: bool,
    /// Counters.
    pub(crate) stats: RingStats,
}

impl DriverRing {
    pub(crate) fn new(layout: RingLayout, event_idx: bool) -> DriverRing {
        let n = layout.size;
        DriverRing {
            layout,
            event_idx,
            next_avail: 0,
            published: 0,
            last_used: 0,
            in_flight: vec![false; usize::from(n)],
            free: (0..n).rev().collect(),
            broken: false,
            stats: RingStats::default(),
        }
    }

    /// Writes descriptor `id` once: buffer at guest address `addr`, `len` bytes.
    pub(crate) fn write_desc(
        &self,
        mem: &SharedMemory,
        id: u16,
        addr: u64,
        len: u32,
        flags: u16,
    ) -> Result<(), crate::ClientError> {
        let at = self.layout.desc + 16 * u64::from(id);
        mem.store_u64(at, addr)?;
        mem.store_u32(at + 8, len)?;
        mem.store_u16(at + 12, flags, Ordering::Relaxed)?;
        mem.store_u16(at + 14, 0, Ordering::Relaxed)
    }

    /// Descriptors we hold.
    pub(crate) fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Takes a free descriptor.
    pub(crate) fn take_free(&mut self) -> Option<u16> {
        self.free.pop()
    }

    /// Puts descriptor `id` (which we hold) in the next available slot; visible to the
    /// backend after [`publish`](Self::publish).
    pub(crate) fn push_avail(
        &mut self,
        mem: &SharedMemory,
        id: u16,
    ) -> Result<(), crate::ClientError> {
        mem.store_u16(
            self.layout.avail_entry(self.next_avail),
            id,
            Ordering::Relaxed,
        )?;
        self.next_avail = self.next_avail.wrapping_add(1);
        if let Some(f) = self.in_flight.get_mut(usize::from(id)) {
            *f = true;
        }
        Ok(())
    }

    /// Publishes the available index and says whether the backend wants a kick for it
    /// (its `avail_event` with `EVENT_IDX`, else its `NO_NOTIFY` flag).
    pub(crate) fn publish(&mut self, mem: &SharedMemory) -> Result<bool, crate::ClientError> {
        let old = self.published;
        let new = self.next_avail;
        if old == new {
            return Ok(false);
        }
        // Release: the entries and descriptors are visible before the index.
        mem.store_u16(self.layout.avail + 2, new, Ordering::Release)?;
        self.published = new;
        // The index store must be visible before we read the backend's suppression state,
        // or both sides could decide the other will look (virtio's "mb()" here).
        fence(Ordering::SeqCst);
        let kick = if self.event_idx {
            let event = mem.load_u16(self.layout.avail_event(), Ordering::Relaxed)?;
            need_event(event, new, old)
        } else {
            mem.load_u16(self.layout.used, Ordering::Relaxed)? & USED_F_NO_NOTIFY == 0
        };
        if kick {
            self.stats.kicks += 1;
        } else {
            self.stats.kicks_suppressed += 1;
        }
        Ok(kick)
    }

    /// How many used elements the backend has published that we have not read. A used
    /// index more than a ring ahead breaks the ring (counted; then always 0).
    pub(crate) fn used_pending(&mut self, mem: &SharedMemory) -> Result<u16, crate::ClientError> {
        if self.broken {
            return Ok(0);
        }
        let idx = mem.load_u16(self.layout.used + 2, Ordering::Acquire)?;
        let pending = idx.wrapping_sub(self.last_used);
        if pending > self.layout.size {
            self.stats.fault(RingFault::UsedIndexRunaway);
            self.broken = true;
            return Ok(0);
        }
        Ok(pending)
    }

    /// True once the backend broke the ring.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// Reads the next used element (call only `used_pending` times). `Ok(None)`: the element
    /// named a descriptor out of range or not in flight — counted and skipped.
    pub(crate) fn next_used(
        &mut self,
        mem: &SharedMemory,
    ) -> Result<Option<Used>, crate::ClientError> {
        let at = self.layout.used_entry(self.last_used);
        self.last_used = self.last_used.wrapping_add(1);
        let raw_id = mem.load_u32(at)?;
        let len = mem.load_u32(at + 4)?;
        let Some(slot) = usize::try_from(raw_id)
            .ok()
            .and_then(|i| self.in_flight.get_mut(i))
        else {
            self.stats.fault(RingFault::UsedIdOutOfRange);
            return Ok(None);
        };
        if !*slot {
            self.stats.fault(RingFault::UsedIdNotInFlight);
            return Ok(None);
        }
        *slot = false;
        let id = u16::try_from(raw_id).unwrap_or(0); // < size <= 32768: always fits
        Ok(Some(Used { id, len }))
    }

    /// The next used element as the backend wrote it, without taking it: `(id, len)` when
    /// the id names a descriptor the backend holds.
    pub(crate) fn peek_used(&self, mem: &SharedMemory) -> Result<Option<Used>, crate::ClientError> {
        let at = self.layout.used_entry(self.last_used);
        let raw_id = mem.load_u32(at)?;
        let len = mem.load_u32(at + 4)?;
        let held = usize::try_from(raw_id)
            .ok()
            .and_then(|i| self.in_flight.get(i))
            .copied();
        Ok(match (held, u16::try_from(raw_id)) {
            (Some(true), Ok(id)) => Some(Used { id, len }),
            _ => None,
        })
    }

    /// Gives descriptor `id` back to the free list (after its used element was read).
    pub(crate) fn release(&mut self, id: u16) {
        self.free.push(id);
    }

    /// Asks for a call when the backend uses anything beyond what we have read (`enable`),
    /// or for no calls. With `EVENT_IDX` "no calls" puts the event index just behind us,
    /// where the backend reaches it only after 2^16 more elements (at worst one spurious
    /// call per 2^16 elements: harmless, the call is only a hint).
    pub(crate) fn set_interrupts(
        &mut self,
        mem: &SharedMemory,
        enable: bool,
    ) -> Result<(), crate::ClientError> {
        self.arm(mem, enable.then_some(1))
    }

    /// Asks for a call once `after` more elements are used (with `EVENT_IDX`; without it,
    /// on the next one), or for no calls (`None`). Waiting for several at once means fewer
    /// wake-ups while the backend drains a full ring (Linux's `enable_cb_delayed`).
    pub(crate) fn arm(
        &mut self,
        mem: &SharedMemory,
        after: Option<u16>,
    ) -> Result<(), crate::ClientError> {
        let enable = after.is_some();
        if self.event_idx {
            let event = match after {
                Some(n) => self
                    .last_used
                    .wrapping_add(n.clamp(1, self.layout.size))
                    .wrapping_sub(1),
                None => self.last_used.wrapping_sub(1),
            };
            mem.store_u16(self.layout.used_event(), event, Ordering::Relaxed)?;
        } else {
            let flags = if enable { 0 } else { AVAIL_F_NO_INTERRUPT };
            mem.store_u16(self.layout.avail, flags, Ordering::Relaxed)?;
        }
        if enable {
            // Our "call me" must be visible before we look at the used index again.
            fence(Ordering::SeqCst);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
