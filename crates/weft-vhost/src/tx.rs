//! The port's transmit half: frames from the switch, copied once — straight from where the
//! switch found them (usually another guest's memory) into this guest's receive buffers
//! (Hyper-Switch's single copy).
//!
//! Per frame: enough receive chains for header and frame (several with mergeable buffers,
//! `num_buffers` set), the header written from the frame's offload state, the frame's head
//! and body copied. The used ring is updated once per burst (with the optimistic policy,
//! once after the first frame and once at the end) and the guest notified as the port's
//! notification policy says (`notify.rs`), never when its `used_event` (EVENT_IDX) or
//! NO_INTERRUPT flag says it need not be. With no buffer left the burst stops: `transmit`
//! returns what was accepted and never waits.
//!
//! Several queue pairs (`VIRTIO_NET_F_MQ`): each frame goes to one of the receive queues
//! being served, picked by its flow hash (`flow_hash.rs`), so a flow keeps its queue (and
//! its order) while the set of served queues stays the same. Each queue has its own burst,
//! used-ring update and notifications. A queue that runs out of buffers or breaks ends the
//! burst at the first frame for it (the caller drops the rest, as with one queue). A switch
//! run as several lanes gives each lane a half that fills only its own pairs (`p % lanes`);
//! a lane none of whose pairs the guest uses fills one of another lane's, under its lock.
//!
//! A frame needing an offload the guest did not negotiate (a partial checksum, a TCP
//! super-frame) has it done here in software — checksum completed, or segmented to the
//! port's MTU — at the price of a second copy. The switch normally does this itself from
//! [`PortTx::caps`]; the fallback keeps the port correct when the guest renegotiated fewer
//! offloads than the switch last read.

use arrayvec::ArrayVec;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use virtio_queue::QueueT;
use vm_memory::{GuestAddress, GuestMemoryMmap};
use weft_switch::{PortCaps, PortTx, TxFrame};

use crate::chain::TableRef;
use crate::config::{MAX_FRAME_LEN, MAX_QUEUE_PAIRS};
use crate::counters::{FrameDrop, QueueFault};
use crate::device::{DeviceShared, LaneShare};
use crate::flow_hash::flow_hash;
use crate::memory::GuardedMemory;
use crate::ring_access::{GuestView, SplitRing};
use crate::vring::{Vring, VringState};

mod budget;
mod dirty;
mod plain_group;
mod ring_writer;

#[cfg(any(test, fuzzing))]
pub(crate) use budget::allowance as transmit_allowance;
use ring_writer::{Put, RingWriter, SoftwareOffload};

/// Receive queues a burst can use at most.
const PAIRS: usize = MAX_QUEUE_PAIRS as usize;

/// The transmit half of a vhost-user port (see the module documentation).
pub struct VhostPortTx {
    dev: Arc<DeviceShared>,
    /// The receive queues this half fills (all, or its lane's share).
    lane: LaneShare,
    /// Per queue pair: chains filled this burst, with the bytes written into each.
    used: Vec<Vec<(u16, u32)>>,
    software: SoftwareOffload,
    /// Descriptors the port may still read (`tx/budget.rs`): below zero, a debt.
    credit: isize,
}

impl std::fmt::Debug for VhostPortTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostPortTx")
            .field("caps", &self.dev.caps())
            .finish()
    }
}

impl VhostPortTx {
    pub(crate) fn new(dev: Arc<DeviceShared>, lane: LaneShare) -> Self {
        let capacity = usize::from(dev.config.max_queue_size);
        let pairs = dev.queue_pairs();
        for pair in 0..pairs {
            if let Some(v) = dev.rx_vring_of(pair) {
                v.set_notify_policy(dev.config.notify);
            }
        }
        crate::ab::start();
        VhostPortTx {
            dev,
            lane,
            used: (0..pairs).map(|_| Vec::with_capacity(capacity)).collect(),
            software: SoftwareOffload::default(),
            credit: 0,
        }
    }
}

impl PortTx for VhostPortTx {
    fn caps(&self) -> PortCaps {
        self.dev.caps()
    }

    /// Changes whenever a frontend negotiates features or goes away: the switch then reads
    /// the caps again.
    fn caps_generation(&self) -> u64 {
        self.dev.caps_generation()
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let dev = Arc::clone(&self.dev);
        // A debt is carried; credit left over is not (`tx/budget.rs`).
        self.credit = self.credit.min(0);
        // Every receive queue of this half being served, locked for the burst; one the
        // control thread holds sits this burst out. With lanes, a lane sharing one of
        // these (below) holds only that one and waits for no other, so waiting for it
        // here cannot deadlock.
        // One slot per pair the device has (usually one), not per pair it could have: these
        // are set up at every call.
        let pairs = dev.queue_pairs().min(PAIRS);
        let mut rings: ArrayVec<Option<(MutexGuard<'_, VringState>, Arc<GuardedMemory>)>, PAIRS> =
            (0..pairs).map(|_| None).collect();
        let mut serving = [0usize; PAIRS];
        let mut count = 0;
        for (pair, slot) in rings.iter_mut().enumerate() {
            if !self.lane.owns(pair) {
                continue;
            }
            let Some(vring) = dev.rx_vring_of(pair) else {
                continue;
            };
            // With several lanes another one may be sharing this queue: wait for its burst.
            let locked = if self.lane.lanes > 1 {
                vring.lock_briefly()
            } else {
                vring.try_lock()
            };
            let Some(ring) = ready_ring(vring, locked, pair) else {
                continue;
            };
            *slot = Some(ring);
            if let Some(s) = serving.get_mut(count) {
                *s = pair;
                count += 1;
            }
        }
        if count == 0 && self.lane.lanes > 1 {
            // None of this lane's queues is in use (the guest uses fewer pairs than the
            // switch has lanes): share another lane's, waiting a moment for its lock. Only
            // one, and only here, so two lanes never wait for each other's.
            let pairs = dev.queue_pairs();
            let found = (0..pairs)
                .map(|k| (self.lane.index + k) % pairs)
                .filter(|pair| !self.lane.owns(*pair))
                .find_map(|pair| {
                    let vring = dev.rx_vring_of(pair)?;
                    ready_ring(vring, vring.lock_briefly(), pair).map(|ring| (pair, ring))
                });
            if let Some((pair, ring)) = found {
                if let (Some(slot), Some(s)) = (rings.get_mut(pair), serving.get_mut(0)) {
                    *slot = Some(ring);
                    *s = pair;
                    count = 1;
                }
            }
        }
        let Some(serving) = serving.get(..count).filter(|s| !s.is_empty()) else {
            return 0;
        };
        let pick = |f: &TxFrame<'_>| match serving {
            [only] => *only,
            _ => serving
                .get(usize::try_from(flow_hash(f)).unwrap_or(0) % serving.len())
                .copied()
                .unwrap_or(0),
        };
        let now = Instant::now();
        let mut bursts: ArrayVec<Burst, PAIRS> = (0..pairs).map(|_| Burst::default()).collect();
        let mut next = 0;
        let mut pair = frames.first().map_or(0, pick);
        while next < frames.len() {
            // A run of consecutive frames for the same queue goes in with one walk.
            let mut end = next + 1;
            let mut following = pair;
            while let Some(f) = frames.get(end) {
                following = pick(f);
                if following != pair {
                    break;
                }
                end += 1;
            }
            let (Some(Some((st, mem))), Some(burst), Some(run)) = (
                rings.get_mut(pair),
                bursts.get_mut(pair),
                frames.get(next..end),
            ) else {
                break;
            };
            let taken = self.put_run(pair, st, mem, run, burst, now);
            next += taken;
            if taken < run.len() {
                break;
            }
            pair = following;
        }
        for (pair, (ring, burst)) in rings.iter_mut().zip(&mut bursts).enumerate() {
            if let Some((st, mem)) = ring {
                self.end_burst(pair, st, mem, burst, now);
            }
        }
        next
    }
}

/// A locked receive queue the port may fill now: serving, and (beyond the first pair) one
/// the guest uses.
fn ready_ring<'v>(
    vring: &Vring,
    st: Option<MutexGuard<'v, VringState>>,
    pair: usize,
) -> Option<(MutexGuard<'v, VringState>, Arc<GuardedMemory>)> {
    let mut st = st?;
    st.check_memory(&vring.counters, vring.name);
    if !st.serving() {
        return None;
    }
    let mem = st.mem.clone()?;
    if pair > 0 && !st.guest_has_given_buffers(&mem) {
        // A pair the guest does not use (see `guest_has_given_buffers`).
        return None;
    }
    Some((st, mem))
}

impl VhostPortTx {
    /// Fills pair `pair`'s receive queue with `run`; returns the frames taken.
    fn put_run(
        &mut self,
        pair: usize,
        st: &mut VringState,
        mem: &GuestMemoryMmap,
        run: &[TxFrame<'_>],
        burst: &mut Burst,
        now: Instant,
    ) -> usize {
        burst.touched = true;
        if burst.stopped() {
            return 0;
        }
        let mut next = 0;
        if !burst.early_asked && st.notifier.early() {
            // Optimistic: the queue's first frame goes in alone and is made visible at once,
            // so the guest's handler can start while the rest is copied.
            burst.early_asked = true;
            next = self.fill(pair, st, mem, run, Some(1), burst);
            if self.publish(pair, st, mem, burst) > 0 {
                if let Some(vring) = self.dev.rx_vring_of(pair) {
                    vring.first_visible(st, now);
                }
            }
            burst.early_frames = burst.delivered;
            burst.early_bytes = burst.bytes;
        }
        if let Some(rest) = run.get(next..) {
            if !rest.is_empty() && !burst.stopped() {
                next += self.fill(pair, st, mem, rest, None, burst);
            }
        }
        next
    }

    /// Publishes what pair `pair`'s queue was given this burst, notifies and counts.
    fn end_burst(
        &mut self,
        pair: usize,
        st: &mut VringState,
        mem: &GuestMemoryMmap,
        burst: &mut Burst,
        now: Instant,
    ) {
        let dev = Arc::clone(&self.dev);
        let Some(vring) = dev.rx_vring_of(pair) else {
            return;
        };
        if self.used.get(pair).is_some_and(|u| !u.is_empty()) {
            self.publish(pair, st, mem, burst);
        }
        if burst.touched {
            vring.burst_done(
                st,
                now,
                burst.delivered - burst.early_frames,
                burst.bytes - burst.early_bytes,
            );
        }
        let counters = &vring.counters;
        crate::ab::delivered(burst.delivered);
        counters.add_descriptors(burst.descriptors);
        if burst.budget_cut {
            counters.budget_cut();
        }
        counters.add_frames(burst.delivered, burst.bytes);
        counters.batch(burst.delivered);
        counters.add_software_offloads(burst.software);
        if burst.no_buffers {
            counters.no_buffers();
        }
        if let Some(reason) = burst.last_drop {
            st.log_drop(reason, vring.name);
        }
        if let Some(fault) = burst.fault {
            st.fault(fault, counters, vring.name);
        }
    }
}

/// What one `transmit` call did so far.
#[derive(Debug, Default)]
struct Burst {
    delivered: u64,
    bytes: u64,
    software: u64,
    no_buffers: bool,
    /// The burst's descriptor budget ran out (`tx/budget.rs`).
    budget_cut: bool,
    /// Descriptors read.
    descriptors: u64,
    fault: Option<QueueFault>,
    last_drop: Option<FrameDrop>,
    /// The burst had frames for this queue.
    touched: bool,
    /// The optimistic policy's early look was done (whether or not a frame went in).
    early_asked: bool,
    /// Frames and bytes made visible before the early ask.
    early_frames: u64,
    early_bytes: u64,
}

impl Burst {
    /// The burst cannot go on.
    fn stopped(&self) -> bool {
        self.no_buffers || self.budget_cut || self.fault.is_some()
    }
}

impl VhostPortTx {
    /// Writes frames into the guest's buffers (not yet in the used ring) until they are all
    /// in, `until_delivered` are delivered, or the ring stops the burst; returns the frames
    /// taken (delivered or dropped).
    fn fill(
        &mut self,
        pair: usize,
        st: &mut VringState,
        mem: &GuestMemoryMmap,
        frames: &[TxFrame<'_>],
        until_delivered: Option<u64>,
        burst: &mut Burst,
    ) -> usize {
        let dev = Arc::clone(&self.dev);
        let Some(counters) = dev.rx_vring_of(pair).map(|v| &v.counters) else {
            return 0;
        };
        let Some(used) = self.used.get_mut(pair) else {
            return 0;
        };
        let features = st.features;
        let max_frame_len = self.dev.caps().max_frame_len;
        let table = TableRef {
            desc_table: GuestAddress(st.queue.desc_table()),
            size: st.queue.size(),
        };
        let view = GuestView::new(mem);
        let ring = SplitRing::new(&view, &st.queue).ok_or(QueueFault::RingInaccessible);
        let (ring, cursor) = match ring.and_then(|r| Ok((r.cursor(st.queue.next_avail())?, r))) {
            Ok((cursor, ring)) => (ring, cursor),
            Err(fault) => {
                burst.fault = Some(fault);
                return 0;
            }
        };
        let mut w = RingWriter {
            ring,
            cursor,
            view: &view,
            table,
            features,
            hdr_len: features.header_len(),
            used,
            delivered: 0,
            bytes: 0,
            credit: self.credit,
            descriptors: 0,
        };
        let mut taken = 0;
        let mut rest = frames;
        loop {
            // As many as go in a group, then one (if any is left) the general way.
            let room = until_delivered.map_or(plain_group::GROUP, |n| {
                usize::try_from(n.saturating_sub(w.delivered)).unwrap_or(usize::MAX)
            });
            let put = w.put_plain_group(rest.get(..room.min(rest.len())).unwrap_or_default());
            taken += put;
            rest = rest.get(put..).unwrap_or_default();
            let Some((f, after)) = rest.split_first() else {
                break;
            };
            rest = after;
            if until_delivered.is_some_and(|n| w.delivered >= n) {
                break;
            }
            let outcome = if f.len() < weft_packet::ethernet::HEADER_LEN {
                Put::Dropped(FrameDrop::FrameTooShort)
            } else if f.len() > MAX_FRAME_LEN {
                Put::Dropped(FrameDrop::FrameTooLong)
            } else if features.guest_may_receive(&f.offload) {
                w.credit = w.credit.saturating_add(budget::allowance(f.len()));
                w.put(f)
            } else {
                // The frame's allowance covers all its segments.
                w.credit = w.credit.saturating_add(budget::allowance(f.len()));
                burst.software += 1;
                self.software.put(&mut w, f, max_frame_len)
            };
            match outcome {
                Put::Done => taken += 1,
                Put::Dropped(reason) => {
                    counters.dropped(reason);
                    burst.last_drop = Some(reason);
                    taken += 1;
                }
                Put::NoBuffers => {
                    burst.no_buffers = true;
                    break;
                }
                Put::Fault(f) => {
                    burst.fault = Some(f);
                    break;
                }
                Put::OutOfBudget => {
                    burst.budget_cut = true;
                    break;
                }
            }
        }
        self.credit = w.credit;
        burst.descriptors += w.descriptors as u64;
        st.queue.set_next_avail(w.cursor.position());
        burst.delivered += w.delivered;
        burst.bytes += w.bytes;
        taken
    }

    /// Puts the chains filled so far in the used ring; returns how many.
    fn publish(
        &mut self,
        pair: usize,
        st: &mut VringState,
        mem: &GuestMemoryMmap,
        burst: &mut Burst,
    ) -> usize {
        let Some(used) = self.used.get_mut(pair) else {
            return 0;
        };
        if let Some(log) = &st.dirty {
            dirty::log_receive_buffers(mem, &st.queue, used, log);
        }
        let added = st
            .publish_used(mem, used.iter().copied())
            .unwrap_or_else(|written| {
                burst.fault.get_or_insert(QueueFault::RingInaccessible);
                written
            });
        used.clear();
        added
    }
}

#[cfg(test)]
mod tests;
