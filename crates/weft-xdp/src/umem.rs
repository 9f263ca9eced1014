//! The UMEM: one anonymous mapping the kernel reads and writes frames in, chunk by chunk.
//!
//! Which bytes may be touched by whom is decided by chunk ownership (`chunks.rs`), not by
//! this type: the accessors are `unsafe` and each caller states which chunk it holds.

use std::io;
use std::ptr::NonNull;

/// An anonymous, page-aligned mapping, unmapped on drop. The kernel pins its pages when
/// the UMEM is registered and keeps them until the last socket using it closes, so the
/// kernel never writes unmapped memory whatever the order of drops.
pub(crate) struct UmemArea {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; it is never moved or remapped.
// Access to its bytes goes through the `unsafe` accessors, whose callers hold the chunk they
// touch (the receive half its held receive chunks, the transmit half its free transmit
// chunks), so two threads never touch the same bytes at once.
unsafe impl Send for UmemArea {}
// SAFETY: as for `Send`: `&UmemArea` gives access only through the `unsafe` accessors.
unsafe impl Sync for UmemArea {}

impl UmemArea {
    /// Maps `len` bytes (a multiple of the page size), zeroed and populated.
    pub(crate) fn new(len: usize) -> io::Result<UmemArea> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: a fresh anonymous private mapping: no existing memory is affected, and the
        // result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(UmemArea { ptr, len })
    }

    /// The whole area, for registering it with the kernel.
    pub(crate) fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    /// The bytes `start..start + len`, or `None` when they are not all inside the area.
    ///
    /// # Safety
    ///
    /// Nobody may write these bytes while the slice lives: the caller holds the receive
    /// chunk they lie in (taken from the rx ring and not yet put back in the fill ring — the
    /// kernel writes a receive chunk only while it sits in the fill ring).
    pub(crate) unsafe fn bytes(&self, start: usize, len: usize) -> Option<&[u8]> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `start..end` is inside the mapping (checked above), which lives as long as
        // `self`; the caller guarantees nobody writes it meanwhile.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) })
    }

    /// The bytes `start..start + len` to write, or `None` when they are not all inside the
    /// area.
    ///
    /// # Safety
    ///
    /// Nobody else may read or write these bytes while the slice lives: the caller holds the
    /// free transmit chunk they lie in (not in the tx ring, not awaiting completion), and
    /// takes no other slice over it meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, start: usize, len: usize) -> Option<&mut [u8]> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: inside the mapping (checked above); the caller guarantees exclusive access
        // to these bytes for the slice's life. The pointer comes from `mmap`, not from a
        // shared reference, so writing through it is allowed.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) })
    }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice over it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_refuse_ranges_outside_the_area() {
        let area = UmemArea::new(8192).unwrap();
        // SAFETY: this test is the only user of the area.
        unsafe {
            assert_eq!(area.bytes(0, 8192).map(<[u8]>::len), Some(8192));
            assert!(area.bytes(8000, 193).is_none());
            assert!(area.bytes(usize::MAX, 2).is_none());
            let w = area.bytes_mut(4096, 4).unwrap();
            w.copy_from_slice(&[1, 2, 3, 4]);
            assert_eq!(area.bytes(4096, 4), Some(&[1u8, 2, 3, 4][..]));
            assert!(area.bytes_mut(8192, 1).is_none());
        }
        assert!(UmemArea::new(0).is_err());
    }
}
