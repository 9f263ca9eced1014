//! A split virtqueue as one burst reads and writes it: the three rings resolved once into
//! mapped slices, guest buffers translated through the region the last one lay in, and the
//! descriptor walk done over those slices.
//!
//! Why not `virtio-queue`'s `AvailIter` and `DescriptorChain`: they translate every access
//! (each available-ring entry, each descriptor, each used element) through the guest
//! memory map, a region search per access. In the vhost benchmark's profile that search
//! alone took 15 % of a busy worker, the iterators another 10 %. Here a burst makes three
//! searches for the rings and, for buffers, one only when a buffer lies outside the region
//! the previous one was in. The checks are the same as `virtio-queue`'s (and the walk ends
//! the same way, silently, so `chain::diagnose` names the reason): a chain is bounded by its
//! table size, indexes are checked against it, indirect tables are sized in whole
//! descriptors and never nested, and a chain's total length fits in 32 bits. Ring entries
//! are read and written with volatile accesses through host pointers whose ranges are
//! checked once (the rings' when the burst starts, a buffer's when it is translated); the
//! `unsafe` blocks are those accesses, the copies into checked buffers and prefetch hints,
//! each with the reason its range is valid.
//!
//! Here: the rings ([`SplitRing`]), the available-ring cursor and the descriptor walk.
//! `guest_view.rs`: guest addresses translated ([`GuestView`]) and one buffer's bytes
//! ([`GuestBytes`]); `volatile.rs`: unaligned reads and writes through checked pointers;
//! `prefetch.rs`: the cache hints.

use std::sync::atomic::Ordering;

use virtio_queue::desc::split::Descriptor;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, VolatileSlice};

use crate::counters::QueueFault;

mod guest_view;
mod prefetch;
mod volatile;

pub(crate) use guest_view::{spans_overlap, GuestBytes, GuestView};
use prefetch::{
    evict_line, has_clflushopt, has_prefetchw, prefetch, prefetch_ends, prefetch_receive_buffer,
};
use volatile::{read_guest, write_guest};

/// Bytes of one descriptor.
const DESC_LEN: usize = 16;
/// Bytes of one used element.
const USED_ELEM_LEN: usize = 8;
/// How many chains ahead a burst's buffers are prefetched (descriptors twice as far).
pub(crate) const PREFETCH_DISTANCE: u16 = 8;

/// The most buffers (descriptors other than the one naming an indirect table) one chain
/// may have, direct or indirect, zero-length ones included: what Linux's vhost takes
/// (`UIO_MAXIOV`). Without it an indirect table of 65535 descriptors, or a direct chain as
/// long as a 32768-entry ring, would be walked whole for one frame. Real drivers stay far
/// below (a Linux guest's largest chain is about 20 descriptors, DPDK's a few); a longer
/// chain ends the walk and breaks the queue (`QueueFault::TooManyDescriptors`), as it does
/// in Linux.
pub(crate) const MAX_CHAIN_DESCRIPTORS: u16 = 1024;

/// The three rings of a split virtqueue, mapped for one burst.
///
/// Entries are read and written through the rings' host addresses, at positions masked
/// into the ring and indexes checked against its size: the bounds were checked once, when
/// the rings were mapped, rather than again at each access through `vm-memory`'s checked
/// accessors (which cost ~20 instructions each).
pub(crate) struct SplitRing<'m> {
    avail: VolatileSlice<'m>,
    used: VolatileSlice<'m>,
    /// The descriptor table and the two rings as host addresses, valid for `16 × size`
    /// bytes and for `avail`'s and `used`'s lengths. (A `PtrGuard` only matters for Xen
    /// grant mappings, which weft does not use: a plain mapping's address stays valid.)
    desc_ptr: *const u8,
    avail_ptr: *const u8,
    used_ptr: *mut u8,
    size: u16,
    /// Whether the CPU has `prefetchw` (asked once per burst, not per line).
    prefetchw: bool,
    /// Whether the CPU has `clflushopt` (likewise).
    clflushopt: bool,
    /// `size - 1`: ring positions wrap with a mask, not a division (`size` is a power of two).
    mask: u16,
}

impl<'m> SplitRing<'m> {
    /// Maps the rings `queue` was started with. `None` when one of them is not wholly inside
    /// one memory region (a ring outside memory was refused when it started; one spanning
    /// two regions is not served — no frontend here lays rings out that way), or when the
    /// size is not a power of two (refused when the frontend set it; checked again here
    /// because the positions wrap by mask).
    pub(crate) fn new(view: &GuestView<'m>, queue: &Queue) -> Option<Self> {
        let size = queue.size();
        if !size.is_power_of_two() {
            return None;
        }
        let n = usize::from(size);
        let desc = view.slice(GuestAddress(queue.desc_table()), DESC_LEN * n)?;
        let avail = view.slice(GuestAddress(queue.avail_ring()), 4 + 2 * n)?;
        let used = view.slice(GuestAddress(queue.used_ring()), 4 + USED_ELEM_LEN * n)?;
        Some(SplitRing {
            desc_ptr: desc.ptr_guard().as_ptr(),
            avail_ptr: avail.ptr_guard().as_ptr(),
            used_ptr: used.ptr_guard_mut().as_ptr(),
            avail,
            used,
            size,
            prefetchw: has_prefetchw(),
            clflushopt: has_clflushopt(),
            mask: size - 1,
        })
    }

    /// The guest's available index (Acquire: the entries it covers are visible after).
    fn avail_idx(&self) -> Option<u16> {
        self.avail
            .load::<u16>(2, Ordering::Acquire)
            .ok()
            .map(u16::from_le)
    }

    /// The head index at available-ring position `pos`.
    #[inline(always)]
    fn avail_head(&self, pos: u16) -> u16 {
        let slot = 4 + 2 * usize::from(pos & self.mask);
        // SAFETY: `avail_ptr` is valid for `4 + 2 × size` bytes (`new`), and the masked
        // position keeps the entry's two bytes inside them.
        u16::from_le(unsafe { read_guest::<u16>(self.avail_ptr.wrapping_add(slot)) })
    }

    /// Descriptor `index` of the ring's own table, if `index` is inside it.
    #[inline(always)]
    pub(crate) fn descriptor(&self, index: u16) -> Option<Descriptor> {
        (index < self.size).then(|| {
            // SAFETY: `desc_ptr` is valid for `16 × size` bytes (`new`) and `index < size`.
            unsafe {
                read_guest::<Descriptor>(self.desc_ptr.wrapping_add(DESC_LEN * usize::from(index)))
            }
        })
    }

    /// Done with descriptor `index`: when it is the last of its cache line (`index % 4 ==
    /// 3`), that line leaves every cache. The driver writes each descriptor again a lap
    /// later; a line this core keeps must be taken back from it at the driver's first store,
    /// and in the DPDK generator's profile those stores were its costliest beside weft. It
    /// pays off when the host puts the two CPUs far apart (a cache line's round trip near
    /// 300 ns): `scripts/ab-vhost`, 64 B, +9.7 % and +9.5 % in the two runs wholly in that
    /// placement (36 and 29 of 39 phases above 1); in the near one 0.98 to 1.09, never worse
    /// than 0.98 in 17 runs (docs/performance-history.md, "Near and far rounds, and
    /// descriptor lines let go again"). With a driver that hands descriptors out in order
    /// (any with `IN_ORDER`, and DPDK's PMD also without it) the line is done with by then;
    /// one that reuses them in another order may see a line go before its other descriptors
    /// are read: a miss for the switch, never a wrong value.
    #[inline(always)]
    pub(crate) fn release_descriptor_line(&self, index: u16) {
        if index < self.size && index % 4 == 3 {
            // SAFETY: `desc_ptr` is valid for `16 × size` bytes (`new`) and `index < size`.
            unsafe {
                evict_line(
                    self.desc_ptr.wrapping_add(DESC_LEN * usize::from(index)),
                    self.clflushopt,
                );
            }
        }
    }

    /// Starts taking chains at available position `next`.
    pub(crate) fn cursor(&self, next: u16) -> Result<AvailCursor, QueueFault> {
        let end = self.avail_idx().ok_or(QueueFault::RingInaccessible)?;
        if end.wrapping_sub(next) > self.size {
            return Err(QueueFault::AvailIndexOutOfRange);
        }
        Ok(AvailCursor { next, end })
    }

    /// The chain starting at descriptor `head`.
    pub(crate) fn chain<'a>(&self, view: &'a GuestView<'m>, head: u16) -> DescChain<'a, 'm> {
        DescChain {
            view,
            table: self.desc_ptr,
            size: self.size,
            next: head,
            ttl: self.size,
            indirect: false,
            yielded: 0,
            buffers: 0,
            over_cap: false,
            head,
        }
    }

    /// Hints the caches toward the chains a burst will reach soon, so that their misses
    /// overlap instead of stalling one after the other (the rings and buffers were last
    /// written by the guest's core). Two stages, as DPDK's vhost does: the descriptor of the
    /// chain `2 × distance` ahead of `cursor`, and the buffer of the chain `distance` ahead,
    /// whose descriptor the previous stage brought in, for its first `span` bytes. To be
    /// read (`receive_header` `None`): the line `span` starts in and the one it ends in (a
    /// frame often starts a line after its virtio-net header; the hardware prefetcher
    /// follows a longer copy). A receive chain (`receive_header` the bytes of its header
    /// kept at its start, 0 for a frame's later chains): every line of the first `span`
    /// bytes, up to the descriptor's length and
    /// [`PREFETCH_WRITE_MAX`](prefetch::PREFETCH_WRITE_MAX), asked for with intent to
    /// write — taken from the guest's core in one step rather than shared, then upgraded —
    /// but the header's, only to be read ([`prefetch_receive_buffer`]).
    /// Only reads and hints: a bad entry or address is left for the real walk to judge.
    pub(crate) fn prefetch_ahead(
        &self,
        view: &GuestView<'m>,
        cursor: &AvailCursor,
        distance: u16,
        span: usize,
        receive_header: Option<usize>,
    ) {
        let far = cursor.next.wrapping_add(distance.wrapping_mul(2));
        if cursor.covers(far) {
            let head = self.avail_head(far);
            if head < self.size {
                prefetch(self.desc_ptr.wrapping_add(DESC_LEN * usize::from(head)));
            }
        }
        let near = cursor.next.wrapping_add(distance);
        if !cursor.covers(near) {
            return;
        }
        let Some(desc) = self.descriptor(self.avail_head(near)) else {
            return;
        };
        let Some(buffer) = view.host_address_hint(desc.addr()) else {
            return;
        };
        match receive_header {
            Some(header) => {
                let span = span.min(usize::try_from(desc.len()).unwrap_or(0));
                prefetch_receive_buffer(buffer, header, span, self.prefetchw);
            }
            None => prefetch_ends(buffer, span),
        }
    }

    /// Whether the CPU has `prefetchw` (for [`GuestBytes::prefetch_receive`]).
    pub(crate) fn has_prefetchw(&self) -> bool {
        self.prefetchw
    }

    /// Writes used element `(head, len)` at used position `pos` (not yet visible).
    #[inline(always)]
    pub(crate) fn write_used(&self, pos: u16, head: u16, len: u32) -> bool {
        let slot = 4 + USED_ELEM_LEN * usize::from(pos & self.mask);
        let elem = u64::from(head) | (u64::from(len) << 32);
        // SAFETY: `used_ptr` is valid for `4 + 8 × size` bytes (`new`), and the masked
        // position keeps the element's eight bytes inside them. One volatile store (a byte
        // copy through `write_obj` costs a `memcpy` call).
        unsafe { write_guest(self.used_ptr.wrapping_add(slot), elem.to_le()) };
        true
    }

    /// Makes every used element before `idx` visible (Release: the elements first).
    pub(crate) fn store_used_idx(&self, idx: u16) -> bool {
        self.used.store(idx.to_le(), 2, Ordering::Release).is_ok()
    }
}

/// A position in the available ring and the index it may go up to (read once, as
/// `virtio-queue`'s `AvailIter` does).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AvailCursor {
    next: u16,
    end: u16,
}

impl AvailCursor {
    /// The next chain's head index, `None` when the ring is empty or unreadable (an
    /// unreadable entry cannot happen in a mapped ring).
    pub(crate) fn next_head(&mut self, ring: &SplitRing<'_>) -> Option<u16> {
        if self.next == self.end {
            return None;
        }
        let head = ring.avail_head(self.next);
        self.next = self.next.wrapping_add(1);
        Some(head)
    }

    /// Whether available position `pos` is one this cursor has still to take.
    fn covers(&self, pos: u16) -> bool {
        pos.wrapping_sub(self.next) < self.end.wrapping_sub(self.next)
    }

    /// Whether chains are left to take.
    pub(crate) fn has_more(&self) -> bool {
        self.next != self.end
    }

    /// Gives the last chain taken back.
    pub(crate) fn back(&mut self) {
        self.next = self.next.wrapping_sub(1);
    }

    /// The next available position (to store back into the queue).
    pub(crate) fn position(&self) -> u16 {
        self.next
    }
}

/// The descriptors of one chain (see the module documentation for its bounds).
pub(crate) struct DescChain<'a, 'm> {
    view: &'a GuestView<'m>,
    /// The table being walked (the ring's, or an indirect one): host address valid for
    /// `16 × size` bytes.
    table: *const u8,
    size: u16,
    next: u16,
    ttl: u16,
    indirect: bool,
    yielded: u32,
    /// Buffers yielded so far (at most [`MAX_CHAIN_DESCRIPTORS`]).
    buffers: u16,
    /// The walk ended because the chain has more than [`MAX_CHAIN_DESCRIPTORS`] buffers.
    over_cap: bool,
    head: u16,
}

impl<'a, 'm> DescChain<'a, 'm> {
    /// The chain's head index (what goes back in the used ring).
    pub(crate) fn head_index(&self) -> u16 {
        self.head
    }

    /// The memory view the chain's buffers are translated through.
    pub(crate) fn view(&self) -> &'a GuestView<'m> {
        self.view
    }

    /// Descriptors read so far: the buffers yielded and the one naming an indirect table;
    /// at least one (every chain taken reads its head, also when [`DescChain::single`]
    /// served it without the walk).
    pub(crate) fn descriptors_read(&self) -> usize {
        (usize::from(self.buffers) + usize::from(self.indirect)).max(1)
    }

    /// Whether the walk ended because the chain has more than [`MAX_CHAIN_DESCRIPTORS`]
    /// buffers (nothing past the cap was read).
    pub(crate) fn over_cap(&self) -> bool {
        self.over_cap
    }

    /// The head descriptor, when a chain not yet walked is that descriptor alone (no NEXT,
    /// not indirect): the common case, served without the general walk.
    pub(crate) fn single(&self) -> Option<Descriptor> {
        if self.indirect || self.ttl == 0 || self.next != self.head {
            return None;
        }
        let desc = self.read(self.next)?;
        (!desc.refers_to_indirect_table() && !desc.has_next()).then_some(desc)
    }

    /// Descriptor `index` of the table being walked, if `index` is inside it.
    #[inline(always)]
    fn read(&self, index: u16) -> Option<Descriptor> {
        (index < self.size).then(|| {
            // SAFETY: `table` is valid for `16 × size` bytes (the ring's table as mapped by
            // `SplitRing::new`, or an indirect one as `enter_indirect` mapped it) and
            // `index < size`.
            unsafe {
                read_guest::<Descriptor>(self.table.wrapping_add(DESC_LEN * usize::from(index)))
            }
        })
    }

    /// Switches to the indirect table `desc` names; `None` if it is not a valid one.
    fn enter_indirect(&mut self, desc: &Descriptor) -> Option<()> {
        let len = desc.len();
        if self.indirect || !len.is_multiple_of(16) {
            return None;
        }
        let size = u16::try_from(len / 16).ok()?;
        self.table = self
            .view
            .host_range(desc.addr(), usize::try_from(len).ok()?)?
            .cast_const();
        self.size = size;
        self.next = 0;
        self.ttl = size;
        self.indirect = true;
        Some(())
    }
}

impl Iterator for DescChain<'_, '_> {
    type Item = Descriptor;

    fn next(&mut self) -> Option<Descriptor> {
        loop {
            if self.ttl == 0 {
                return None;
            }
            if self.buffers >= MAX_CHAIN_DESCRIPTORS {
                // One more would pass the cap: the chain is refused unread beyond it.
                self.over_cap = true;
                return None;
            }
            let desc = self.read(self.next)?;
            if desc.refers_to_indirect_table() {
                self.enter_indirect(&desc)?;
                continue;
            }
            self.yielded = self.yielded.checked_add(desc.len())?;
            self.buffers += 1;
            if desc.has_next() {
                self.next = desc.next();
                self.ttl -= 1;
            } else {
                self.ttl = 0;
            }
            return Some(desc);
        }
    }
}

#[cfg(test)]
mod tests;
