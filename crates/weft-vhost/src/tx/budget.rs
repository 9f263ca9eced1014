//! The transmit half's descriptor budget: how many descriptors of the guest's receive
//! chains one `transmit` may read, so that a guest posting long chains of tiny or empty
//! buffers cannot make the worker filling them (the one polling some other port) read
//! without end.
//!
//! Two bounds. A frame may take at most `MAX_CHAIN_DESCRIPTORS` descriptors over all its
//! chains (as Linux's vhost allows one packet `UIO_MAXIOV`); more and it is dropped
//! (`too_many_descriptors`), its chains given back. And each frame the general walk
//! (`RingWriter::put`) writes brings an [`allowance`] of descriptors, more than any real
//! driver's buffers take for a frame of its length, into the port's credit; chains are
//! taken while the credit is positive (one is never cut in the middle). When it is spent
//! the burst stops: the frame's chains go back, the frames left are refused to the caller,
//! which drops them, and the cut is counted. A debt the last chain left is carried to the
//! next `transmit` (credit left over is not), as on the receive side (`rx/budget.rs`), so
//! that a guest whose buffers always cost more than their frames' allowance gets, on
//! average, no more than that; a guest whose buffers fit never owes anything, and its
//! frames are never refused for the budget.
//!
//! The usual frame, one that goes whole into a chain of one buffer (`plain_group.rs`),
//! neither brings nor pays anything: it reads one descriptor, less than any allowance, and
//! the group path does no budget work at all.

/// Bytes of frame per descriptor of allowance, beyond [`BASE_ALLOWANCE`]: one a cache line.
/// Drivers post far larger buffers (Linux's mergeable buffers hold at least a 1518-byte
/// frame, DPDK's mbufs 2 KB, Linux's big-packet chains 4 KB pages), so the budget never
/// binds on them; a guest of tiny buffers costs at most one descriptor's walk (some
/// 50 ns) per 64 bytes sent to it, and a 64 KB frame's allowance is about the cap.
pub(super) const BYTES_PER_DESCRIPTOR: usize = 64;

/// Descriptors every frame may take, whatever its length: a header and a frame in two
/// buffers.
pub(super) const BASE_ALLOWANCE: usize = 2;

/// The descriptors a frame of `len` bytes brings into the credit.
#[inline(always)]
pub(crate) fn allowance(len: usize) -> isize {
    isize::try_from(BASE_ALLOWANCE + len / BYTES_PER_DESCRIPTOR).unwrap_or(isize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_brings_two_descriptors_and_one_per_64_bytes() {
        assert_eq!(allowance(60), 2);
        assert_eq!(allowance(1514), 25);
        assert_eq!(allowance(65_557), 1026);
    }
}
