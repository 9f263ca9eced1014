//! One ring as one burst sees it: its header and descriptors resolved once into a mapped
//! slice, and buffers found through the region the last one lay in.
//!
//! Why: going through [`SharedMemory`] for every index, descriptor and buffer searched the
//! region map and walked vm-memory's generic accessors each time (in the memif benchmark's
//! profile the descriptor reads alone took 19 % of a busy worker). Here a burst makes one
//! search for the ring and one per buffer region; after that each access is one bounds
//! check on a slice. Still only vm-memory's volatile and atomic accessors: no reference
//! to peer-writable memory is formed, and no `unsafe`.

use std::sync::atomic::Ordering;

use vm_memory::{Bytes, VolatileSlice};

use super::{RingFault, RingPlace};
use crate::layout::{
    ring_bytes, Desc, DESC_BYTES, RING_FLAGS_AT, RING_FLAG_MASK_INT, RING_HEADER_BYTES,
};
use crate::memory::SharedMemory;

/// A ring mapped for one burst.
#[derive(Debug)]
pub struct RingView<'m> {
    mem: &'m SharedMemory,
    /// The ring's header and descriptors.
    ring: VolatileSlice<'m>,
    /// `size - 1`: slots wrap with a mask.
    mask: u16,
    /// The region the last buffer lay in, whole.
    last: Option<(u16, VolatileSlice<'m>)>,
}

impl<'m> RingView<'m> {
    /// Maps `place` in `mem` (it was checked to fit when it was placed).
    pub fn new(place: &RingPlace, mem: &'m SharedMemory) -> Result<Self, RingFault> {
        let len = usize::try_from(ring_bytes(place.log2)).map_err(|_| RingFault::Unreadable)?;
        let ring = mem
            .slice(place.region, place.offset, len)
            .ok_or(RingFault::Unreadable)?;
        Ok(RingView {
            mem,
            ring,
            mask: place.size() - 1,
            last: None,
        })
    }

    /// Loads the ring index at `at` (Acquire: what it covers is visible after).
    #[inline]
    pub(super) fn load(&self, at: u64) -> Result<u16, RingFault> {
        let at = usize::try_from(at).map_err(|_| RingFault::Unreadable)?;
        self.ring
            .load::<u16>(at, Ordering::Acquire)
            .map_err(|_| RingFault::Unreadable)
    }

    /// Stores the ring index at `at` (Release: what it covers is visible first).
    #[inline]
    pub(super) fn store(&self, at: u64, value: u16) -> Result<(), RingFault> {
        let at = usize::try_from(at).map_err(|_| RingFault::Unreadable)?;
        self.ring
            .store(value, at, Ordering::Release)
            .map_err(|_| RingFault::Unreadable)
    }

    /// True when the consumer asked not to be signalled.
    pub fn masked(&self) -> bool {
        self.load(RING_FLAGS_AT)
            .is_ok_and(|f| f & RING_FLAG_MASK_INT != 0)
    }

    fn desc_at(&self, slot: u16) -> usize {
        // Slots are masked into the ring: no overflow.
        RING_HEADER_BYTES + DESC_BYTES * usize::from(slot & self.mask)
    }

    /// Reads `slot`'s descriptor once: two 8-byte loads (descriptors are 16-byte aligned).
    #[inline]
    pub(super) fn desc(&self, slot: u16) -> Result<Desc, RingFault> {
        let at = self.desc_at(slot);
        let word = |at| {
            self.ring
                .load::<u64>(at, Ordering::Relaxed)
                .map_err(|_| RingFault::Unreadable)
        };
        let (low, high) = (word(at)?, word(at + 8)?);
        let mut b = [0u8; DESC_BYTES];
        b[..8].copy_from_slice(&low.to_ne_bytes());
        b[8..].copy_from_slice(&high.to_ne_bytes());
        Ok(Desc::from_bytes(b))
    }

    /// Writes `slot`'s descriptor (published later by an index store with Release).
    #[inline]
    pub(super) fn write_desc(&self, slot: u16, desc: Desc) -> Result<(), RingFault> {
        let at = self.desc_at(slot);
        let b = desc.to_bytes();
        let mut low = [0u8; 8];
        let mut high = [0u8; 8];
        low.copy_from_slice(&b[..8]);
        high.copy_from_slice(&b[8..]);
        let word = |at, w: [u8; 8]| {
            self.ring
                .store(u64::from_ne_bytes(w), at, Ordering::Relaxed)
                .map_err(|_| RingFault::Unreadable)
        };
        word(at, low)?;
        word(at + 8, high)
    }

    /// The `len` bytes at `offset` of `region`, when all of them lie inside it.
    #[inline]
    pub(super) fn buffer(
        &mut self,
        region: u16,
        offset: u64,
        len: usize,
    ) -> Option<VolatileSlice<'m>> {
        let whole = match self.last {
            Some((r, s)) if r == region => s,
            _ => self.region(region)?,
        };
        whole.subslice(usize::try_from(offset).ok()?, len).ok()
    }

    #[inline(never)]
    fn region(&mut self, region: u16) -> Option<VolatileSlice<'m>> {
        let size = usize::try_from(self.mem.region_size(region)?).ok()?;
        let whole = self.mem.slice(region, 0, size)?;
        self.last = Some((region, whole));
        Some(whole)
    }
}
