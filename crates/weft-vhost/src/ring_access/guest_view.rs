//! Guest memory as one burst sees it: [`GuestView`] translates guest addresses, remembering
//! the region the last one hit, and [`GuestBytes`] is a buffer inside one mapped region,
//! read and written with one bounds check per access.

use std::cell::Cell;
use std::marker::PhantomData;

use vm_memory::{
    GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, MemoryRegionAddress,
    VolatileSlice,
};

use weft_switch::SharedTail;

use super::prefetch::{prefetch_ends, prefetch_receive_buffer};
use super::volatile::{read_guest, write_guest};

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

/// Whether `a_len` bytes at `a` and `b_len` bytes at `b` share an address.
#[inline(always)]
pub(crate) fn spans_overlap(a: *const u8, a_len: usize, b: *const u8, b_len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    a_len != 0 && b_len != 0 && a < b.wrapping_add(b_len) && b < a.wrapping_add(a_len)
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

    /// Hints the caches toward the first `span` bytes (clamped to the bytes), a receive
    /// buffer whose first `header` bytes are its virtio-net header: to be written soon,
    /// the header's line to be read (see [`prefetch_receive_buffer`]).
    #[inline(always)]
    pub(crate) fn prefetch_receive(&self, header: usize, span: usize, has_prefetchw: bool) {
        prefetch_receive_buffer(self.ptr, header, span.min(self.len), has_prefetchw);
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
        spans_overlap(src.as_ptr(), src.len(), self.ptr, self.len)
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

    /// Copies `src` (bytes of some guest's memory, as a frame's tail) to `offset`. False
    /// (nothing written) when it does not fit or overlaps these bytes.
    #[inline]
    pub(crate) fn write_shared(&self, offset: usize, src: &SharedTail<'_>) -> bool {
        let (from, len) = (src.as_ptr(), src.len());
        let fits = offset <= self.len && len <= self.len - offset;
        if !fits || spans_overlap(from, len, self.ptr, self.len) {
            return false;
        }
        // SAFETY: `ptr` is valid for `len` bytes (`GuestView::bytes`) and `offset + len` is
        // within them (checked above); `from` is valid for reading `len` bytes for the
        // tail's lifetime (a `VolatileSlice` over mapped memory), and the two ranges do not
        // overlap (checked above). A raw copy, no reference formed: the source guest may
        // write its bytes meanwhile, which changes only what this frame carries.
        unsafe {
            core::ptr::copy_nonoverlapping(from, self.ptr.add(offset), len);
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
