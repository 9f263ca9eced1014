//! The transmit half's descriptor budget: how many descriptors of the guest's receive
//! chains one `transmit` may read, so that a guest posting long chains of tiny or empty
//! buffers cannot make the worker filling them (the one polling some other port) read
//! without end.
//!
//! Two bounds. A frame may take at most `MAX_CHAIN_DESCRIPTORS` descriptors over all its
//! chains (as Linux's vhost allows one packet `UIO_MAXIOV`); more and it is dropped
//! (`too_many_descriptors`), its chains given back. And a burst may read
//! [`DESCRIPTORS_PER_FRAME`] per frame it was handed: when that is spent the burst stops
//! (its chains given back, the frames left refused to the caller, which drops them, and
//! the cut counted). Unlike the receive half's budget there is no debt to carry: a frame
//! refused now is not offered again, so the budget is sized never to bind on buffers a
//! real driver posts.

use crate::ring_access::MAX_CHAIN_DESCRIPTORS;

/// Descriptors a burst may read per frame: a 64 KB frame in 1 KB mergeable buffers (Linux
/// posts 1.5 KB and more, DPDK 2 KB mbufs; one descriptor each).
pub(super) const DESCRIPTORS_PER_FRAME: usize = 64;

/// The budget of a burst of `frames` frames: at least what one frame may take, so that any
/// frame within the per-frame bound goes in when it comes first.
pub(super) fn for_burst(frames: usize) -> usize {
    frames
        .saturating_mul(DESCRIPTORS_PER_FRAME)
        .max(usize::from(MAX_CHAIN_DESCRIPTORS))
}
