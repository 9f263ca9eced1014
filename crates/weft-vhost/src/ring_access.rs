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

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use virtio_queue::desc::split::Descriptor;
use virtio_queue::{Queue, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    MemoryRegionAddress, VolatileSlice,
};

use crate::counters::QueueFault;

/// Bytes of one descriptor.
const DESC_LEN: usize = 16;
/// Bytes of one used element.
const USED_ELEM_LEN: usize = 8;
/// How many chains ahead a burst's buffers are prefetched (descriptors twice as far).
pub(crate) const PREFETCH_DISTANCE: u16 = 8;
/// Most bytes of a receive buffer prefetched for writing: a 1514-byte frame and its header.
/// Every line is asked for, since the hardware prefetcher does not take lines for writing
/// ahead of a copy (a 1514 B run gained 16 % over asking for the first and last line only);
/// a bigger frame's later chains are prefetched in their turn. (That was for buffers asked
/// for one at a time, 8 chains ahead; a group asks for all of its buffers at once, and
/// for fewer bytes of each: `tx/plain_group.rs`.)
const PREFETCH_WRITE_MAX: usize = 2048;

/// Guest memory as one burst sees it: translations that remember the last region hit.
pub(crate) struct GuestView<'m> {
    mem: &'m GuestMemoryMmap,
    last: Cell<Option<LastRegion>>,
}

/// The region the last translation hit, as plain numbers: a hit is then two comparisons
/// and an addition (a `GuestRegionMmap` lookup costs a search and several checked steps).
#[derive(Clone, Copy)]
struct LastRegion {
    /// Guest address of its first byte.
    start: u64,
    /// Its length in bytes.
    len: usize,
    /// Where its first byte is mapped.
    host: *mut u8,
}

impl<'m> GuestView<'m> {
    pub(crate) fn new(mem: &'m GuestMemoryMmap) -> Self {
        GuestView {
            mem,
            last: Cell::new(None),
        }
    }

    /// Where `addr` is mapped, if it lies in the region the last translation hit: an address
    /// for cache hints only (no search, no length; never to be read through).
    #[inline]
    pub(crate) fn host_address_hint(&self, addr: GuestAddress) -> Option<*const u8> {
        let last = self.last.get()?;
        let offset = usize::try_from(addr.0.wrapping_sub(last.start)).ok()?;
        (offset < last.len).then(|| last.host.wrapping_add(offset).cast_const())
    }

    /// The memory map itself (for the general, slower paths).
    pub(crate) fn mem(&self) -> &'m GuestMemoryMmap {
        self.mem
    }

    /// Where the `len` bytes at `addr` are mapped, when they lie inside one region (`None`
    /// otherwise: outside guest memory, past the end of the address space, or spanning two
    /// regions). The pointer is valid for `len` bytes for as long as the view's memory map
    /// is borrowed (`'m`): the map holds its regions' mappings.
    #[inline]
    pub(crate) fn host_range(&self, addr: GuestAddress, len: usize) -> Option<*mut u8> {
        if let Some(last) = self.last.get() {
            if let Some(ptr) = last.range(addr, len) {
                return Some(ptr);
            }
        }
        self.host_range_in_new_region(addr, len)
    }

    #[inline(never)]
    fn host_range_in_new_region(&self, addr: GuestAddress, len: usize) -> Option<*mut u8> {
        let region = self.mem.find_region(addr)?;
        let last = LastRegion {
            start: region.start_addr().0,
            len: usize::try_from(region.len()).ok()?,
            host: region.get_host_address(MemoryRegionAddress(0)).ok()?,
        };
        self.last.set(Some(last));
        last.range(addr, len)
    }

    /// The `len` bytes at `addr` for the fast paths' raw copies, when they lie inside one
    /// region (see [`GuestView::host_range`]).
    #[inline]
    pub(crate) fn bytes(&self, addr: GuestAddress, len: usize) -> Option<GuestBytes<'m>> {
        let ptr = self.host_range(addr, len)?;
        Some(GuestBytes {
            ptr,
            len,
            _memory: PhantomData,
        })
    }

    /// The `len` bytes at `addr`, when they lie inside one region (see
    /// [`GuestView::host_range`]).
    #[inline]
    pub(crate) fn slice(&self, addr: GuestAddress, len: usize) -> Option<VolatileSlice<'m>> {
        let ptr = self.host_range(addr, len)?;
        // SAFETY: `host_range` gave a range of `len` bytes inside one region of the memory
        // map borrowed for `'m`, which keeps the region mapped for that long.
        Some(unsafe { VolatileSlice::new(ptr, len) })
    }
}

/// Bytes of guest memory inside one mapped region, written with one bounds check per
/// write and a plain copy (what `VolatileSlice::copy_from` does for more than eight bytes,
/// without its chain of checked sub-slices).
#[derive(Clone, Copy)]
pub(crate) struct GuestBytes<'m> {
    /// Valid for writing `len` bytes while the memory map is borrowed (`'m`).
    ptr: *mut u8,
    len: usize,
    _memory: PhantomData<&'m GuestMemoryMmap>,
}

impl GuestBytes<'_> {
    /// No bytes (a placeholder in a group's array: every access to it fails its bounds
    /// check).
    pub(crate) const EMPTY: Self = GuestBytes {
        ptr: core::ptr::null_mut(),
        len: 0,
        _memory: PhantomData,
    };

    /// How many bytes.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Hints the caches toward the line holding byte `offset` and the one holding byte
    /// `offset + span - 1` (both clamped to the bytes), to be read soon.
    #[inline(always)]
    pub(crate) fn prefetch_read_at(&self, offset: usize, span: usize) {
        let offset = offset.min(self.len);
        prefetch_ends(self.ptr.wrapping_add(offset), span.min(self.len - offset));
    }

    /// Hints the caches toward every line of the first `span` bytes (clamped to the bytes
    /// and to [`PREFETCH_WRITE_MAX`]), to be written soon (see
    /// [`SplitRing::prefetch_ahead`]).
    #[inline(always)]
    pub(crate) fn prefetch_write(&self, span: usize, has_prefetchw: bool) {
        prefetch_lines_for_write(self.ptr, span.min(self.len), has_prefetchw);
    }

    /// The first `N` bytes, if there are as many (a volatile read: the guest may change
    /// them at any time, so this is a private copy).
    #[inline(always)]
    pub(crate) fn read_array<const N: usize>(&self) -> Option<[u8; N]> {
        // SAFETY: `ptr` is valid for `len >= N` bytes (checked), and any bits are a valid
        // `[u8; N]`.
        (self.len >= N).then(|| unsafe { read_guest::<[u8; N]>(self.ptr) })
    }

    /// Whether any byte of `src` lies in these bytes (a frame lent from guest memory can
    /// lie under a receive buffer of the same memory: copying it there must not happen).
    #[inline]
    pub(crate) fn overlaps(&self, src: &[u8]) -> bool {
        let (s, d) = (src.as_ptr() as usize, self.ptr as usize);
        !src.is_empty() && self.len != 0 && s < d.wrapping_add(self.len) && d < s + src.len()
    }

    /// Copies `src` to `offset`. False (nothing written) when it does not fit or overlaps
    /// these bytes.
    #[inline]
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> bool {
        let fits = offset <= self.len && src.len() <= self.len - offset;
        if !fits || self.overlaps(src) {
            return false;
        }
        // SAFETY: `ptr` is valid for `len` bytes (`GuestView::bytes`), `offset + src.len()`
        // is within them (checked above), and `src` does not overlap them (checked above).
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len());
        }
        true
    }

    /// The little-endian `u16` at `offset`, if it lies inside (a volatile read: the guest
    /// may change it at any time).
    #[inline]
    pub(crate) fn read_u16_le(&self, offset: usize) -> Option<u16> {
        let fits = offset <= self.len && 2 <= self.len - offset;
        // SAFETY: `ptr` is valid for `len` bytes and `offset + 2` is within them.
        fits.then(|| u16::from_le(unsafe { read_guest::<u16>(self.ptr.add(offset)) }))
    }

    /// The bytes after the first `offset`, as their host address and length (for lending
    /// them): none, at the end, when there are no more than `offset`.
    #[inline(always)]
    pub(crate) fn after(&self, offset: usize) -> (*const u8, usize) {
        let offset = offset.min(self.len);
        (
            self.ptr.wrapping_add(offset).cast_const(),
            self.len - offset,
        )
    }

    /// Stores the 12-byte virtio-net header made of `words` (as
    /// [`weft_packet::virtio_net::header_words`] builds them) at the start, each of its two
    /// words only where the buffer does not hold it already. False (nothing written) when
    /// the bytes are shorter.
    ///
    /// Why compare first: a driver that keeps its headers apart from its frames (DPDK's
    /// virtio-user puts the header at the end of an mbuf's headroom, alone in its line)
    /// gets back the buffer with the header it last read, and writes no header of its own
    /// when it sends from it with no offload (DPDK's `virtqueue_clear_net_hdr` stores only
    /// fields that differ). A line neither side writes stays in both cores' caches: no
    /// transfer between them per frame. DPDK's vhost library writes its headers the same way
    /// (`ASSIGN_UNLESS_EQUAL`). Measured with `scripts/ab-vhost` against storing always:
    /// 1.047 and 1.053 at 64 B (31 and 32 of 42 phases higher), 1.002 at 1514 B. A driver
    /// changing these bytes while the buffer is the device's harms only its own frame.
    #[inline]
    pub(crate) fn store_header(&self, (low, high): (u64, u32)) -> bool {
        if self.len < 12 {
            return false;
        }
        // SAFETY: `ptr` is valid for reading and writing `len >= 12` bytes
        // (`GuestView::bytes`, checked above); any bits are a valid `u64` or `u32`.
        unsafe {
            if read_guest::<u64>(self.ptr) != low.to_le() {
                write_guest(self.ptr, low.to_le());
            }
            let high_at = self.ptr.add(8);
            if read_guest::<u32>(high_at) != high.to_le() {
                write_guest(high_at, high.to_le());
            }
        }
        true
    }
}

impl LastRegion {
    /// Where `len` bytes at `addr` are mapped, if they lie wholly inside this region.
    #[inline(always)]
    fn range(&self, addr: GuestAddress, len: usize) -> Option<*mut u8> {
        let offset = usize::try_from(addr.0.wrapping_sub(self.start)).ok()?;
        // `offset <= len` first, so the subtraction cannot wrap; an address below the
        // region wraps to a huge offset and fails it.
        let fits = offset <= self.len && len <= self.len - offset;
        fits.then(|| self.host.wrapping_add(offset))
    }
}

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
            head,
        }
    }

    /// Hints the caches toward the chains a burst will reach soon, so that their misses
    /// overlap instead of stalling one after the other (the rings and buffers were last
    /// written by the guest's core). Two stages, as DPDK's vhost does: the descriptor of the
    /// chain `2 × distance` ahead of `cursor`, and the buffer of the chain `distance` ahead,
    /// whose descriptor the previous stage brought in, for its first `span` bytes. Read
    /// (`for_write` false): the line `span` starts in and the one it ends in (a frame often
    /// starts a line after its virtio-net header; the hardware prefetcher follows a longer
    /// copy). Written (`for_write`, receive chains): every line of the first `span` bytes,
    /// up to the descriptor's length and [`PREFETCH_WRITE_MAX`], asked for with intent to
    /// write: taken from the guest's core in one step rather than shared, then upgraded.
    /// Only reads and hints: a bad entry or address is left for the real walk to judge.
    pub(crate) fn prefetch_ahead(
        &self,
        view: &GuestView<'m>,
        cursor: &AvailCursor,
        distance: u16,
        span: usize,
        for_write: bool,
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
        if for_write {
            let span = span.min(usize::try_from(desc.len()).unwrap_or(0));
            prefetch_lines_for_write(buffer, span, self.prefetchw);
        } else {
            prefetch_ends(buffer, span);
        }
    }

    /// Whether the CPU has `prefetchw` (for [`GuestBytes::prefetch_write`]).
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

/// A value as it lies in guest memory: read and written with no alignment assumed (the
/// spec aligns the rings, but a frontend's word is not trusted), as `vm-memory` does.
#[repr(C, packed)]
struct Unaligned<T>(T);

/// Reads a `T` at `at`, volatile (the guest may change it at any time).
///
/// # Safety
///
/// `at` must be valid for reading `size_of::<T>()` bytes, and `T` valid for any bits.
#[inline(always)]
unsafe fn read_guest<T: Copy>(at: *const u8) -> T {
    // SAFETY: the caller's contract; the packed wrapper makes any address aligned.
    unsafe { core::ptr::read_volatile(at.cast::<Unaligned<T>>()).0 }
}

/// Writes `value` at `at`, unaligned. Not volatile, like the frames' copies: the memory is
/// shared with the guest, so the compiler can neither drop these stores nor move them past
/// the used index's Release store that publishes them, and a volatile unaligned store makes
/// it go through the stack.
///
/// # Safety
///
/// `at` must be valid for writing `size_of::<T>()` bytes.
#[inline(always)]
unsafe fn write_guest<T: Copy>(at: *mut u8, value: T) {
    // SAFETY: the caller's contract; `write_unaligned` assumes no alignment.
    unsafe { at.cast::<T>().write_unaligned(value) }
}

/// Starts loading the cache line `at` is in: a hint that never faults, whatever the
/// address.
#[inline(always)]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it loads nothing into the program, never faults
    // whatever the address, and SSE (its target feature) is part of every x86_64 target.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
}

/// Whether the CPU has `prefetchw` (CPUID 8000_0001h, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let max_extended = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max_extended >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn has_prefetchw() -> bool {
    false
}

/// Starts taking the cache line `at` is in for writing (`prefetchw` when `has_prefetchw`
/// says the CPU has it; a plain prefetch otherwise): a hint that never faults, whatever
/// the address.
#[inline(always)]
fn prefetch_for_write(at: *const u8, has_prefetchw: bool) {
    #[cfg(target_arch = "x86_64")]
    if has_prefetchw {
        // SAFETY: `prefetchw` is a hint: it loads nothing into the program, writes nothing
        // and never faults whatever the address; it runs only on CPUs that have it.
        unsafe {
            core::arch::asm!("prefetchw [{0}]", in(reg) at, options(nostack, preserves_flags, readonly));
        }
        return;
    }
    prefetch(at);
}

/// Hints the caches toward the line holding the first of the `span` bytes at `at` and the
/// one holding the last (a frame often starts a line after its virtio-net header; the
/// hardware prefetcher follows a longer read). Hints only: never faults, whatever the address.
#[inline(always)]
fn prefetch_ends(at: *const u8, span: usize) {
    prefetch(at);
    prefetch(at.wrapping_add(span.saturating_sub(1)));
}

/// Hints the caches toward every line of the `span` bytes at `at` (at most
/// [`PREFETCH_WRITE_MAX`]), to be written soon: from the line holding the first byte, since
/// a buffer that does not start on a line boundary ends one line further on. Hints only:
/// never faults, whatever the address.
#[inline(always)]
fn prefetch_lines_for_write(at: *const u8, span: usize, has_prefetchw: bool) {
    let end = (at as usize).saturating_add(span.min(PREFETCH_WRITE_MAX));
    let mut line = at as usize & !63;
    while line < end {
        prefetch_for_write(line as *const u8, has_prefetchw);
        line += 64;
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
        if self.indirect || len % 16 != 0 {
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
            let desc = self.read(self.next)?;
            if desc.refers_to_indirect_table() {
                self.enter_indirect(&desc)?;
                continue;
            }
            self.yielded = self.yielded.checked_add(desc.len())?;
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
