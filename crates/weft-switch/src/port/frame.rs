//! A received frame's bytes as a port lends them: a head in weft's own memory, which is
//! everything the switch reads to decide, and possibly a tail that stays where the frame
//! arrived — a guest's buffer, which the guest can still write.
//!
//! The tail is only ever moved, never read to decide: it is a [`vm_memory::VolatileSlice`],
//! so no `&[u8]` is formed over memory another party may change while weft holds it.
//! Copying it is a volatile copy (or, for a kernel socket, an iovec the kernel copies
//! from). A guest racing its own buffer then changes only bytes the switch did not look
//! at, as if it had sent another payload: the addresses, tags and headers the rules and
//! checks saw are the ones delivered.

use vm_memory::VolatileSlice;

/// Bytes at the end of a frame that stay in shared memory (see the module documentation).
/// Empty for ports whose frames are wholly in weft's memory.
#[derive(Debug, Clone, Copy)]
pub struct SharedTail<'a>(VolatileSlice<'a>);

impl Default for SharedTail<'_> {
    fn default() -> Self {
        // An empty slice: no memory behind it is ever touched.
        SharedTail(VolatileSlice::from(<&mut [u8]>::default()))
    }
}

impl<'a> SharedTail<'a> {
    /// The tail at `slice`.
    #[inline]
    pub fn new(slice: VolatileSlice<'a>) -> Self {
        SharedTail(slice)
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no tail.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The memory, for a volatile copy into another shared buffer.
    #[inline]
    pub fn as_volatile(&self) -> VolatileSlice<'a> {
        self.0
    }

    /// Copies the first `out.len()` bytes (or all, if fewer) into `out`; returns how many.
    #[inline]
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        self.0.copy_to(out)
    }

    /// Where the bytes lie, for an iovec a system call copies from. The address stays valid
    /// as long as the frame does (`'a`); the bytes may change under the reader.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.0.ptr_guard().as_ptr()
    }
}

/// One received frame: `head` (weft's memory; everything the switch reads) then `tail`
/// (shared memory, moved but never read to decide). Most ports have no tail.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxFrame<'a> {
    /// The frame's first bytes, or all of them.
    pub head: &'a [u8],
    /// The rest, where it arrived.
    pub tail: SharedTail<'a>,
}

impl<'a> RxFrame<'a> {
    /// A frame wholly in weft's memory.
    #[inline]
    pub fn local(bytes: &'a [u8]) -> Self {
        RxFrame {
            head: bytes,
            tail: SharedTail::default(),
        }
    }

    /// A frame whose first bytes were copied into `head` and whose rest stays at `tail`.
    #[inline]
    pub fn split(head: &'a [u8], tail: SharedTail<'a>) -> Self {
        RxFrame { head, tail }
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// True for an empty frame (what a port gives for an unknown handle).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the frame's first `out.len()` bytes (or all, if fewer) into `out`; returns
    /// how many.
    pub fn copy_prefix(&self, out: &mut [u8]) -> usize {
        let n = self.head.len().min(out.len());
        out[..n].copy_from_slice(&self.head[..n]);
        n + self.tail.copy_to(&mut out[n..])
    }

    /// The whole frame as a vector (tests, control-plane copies).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        let n = self.copy_prefix(&mut v);
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_frame_copies_head_then_tail() {
        let mut shared = [7u8; 5];
        let frame = RxFrame::split(
            &[1, 2, 3],
            SharedTail::new(VolatileSlice::from(&mut shared[..])),
        );
        assert_eq!(frame.len(), 8);
        assert_eq!(frame.to_vec(), [1, 2, 3, 7, 7, 7, 7, 7]);
        let mut four = [0u8; 4];
        assert_eq!(frame.copy_prefix(&mut four), 4);
        assert_eq!(four, [1, 2, 3, 7]);
    }

    #[test]
    fn a_local_frame_has_no_tail() {
        let frame = RxFrame::local(&[1, 2]);
        assert!(frame.tail.is_empty());
        assert_eq!(frame.to_vec(), [1, 2]);
        assert!(RxFrame::default().is_empty());
    }
}
