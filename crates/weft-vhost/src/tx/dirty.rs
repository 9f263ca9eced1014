//! Dirty logging of the receive buffers a burst wrote, during a live migration: before the
//! chains go to the used ring, each one's written bytes (its used length, from its first
//! descriptor on) are marked in the frontend's log.
//!
//! The chains are walked again rather than marked while written, so the usual burst's
//! writing code is the same with logging on or off. The walk is the one that wrote them,
//! over chains still the device's (the driver may not touch a chain it made available
//! until it is used), so it finds the same buffers; a driver that rewrites its descriptors
//! meanwhile can only leave its own pages unlogged.

use virtio_queue::Queue;
use vm_memory::GuestMemoryMmap;

use crate::memory::RingLog;
use crate::ring_access::{GuestView, SplitRing};

/// Marks the bytes written into each chain of `used` (head, bytes written) dirty.
pub(super) fn log_receive_buffers(
    mem: &GuestMemoryMmap,
    queue: &Queue,
    used: &[(u16, u32)],
    log: &RingLog,
) {
    let view = GuestView::new(mem);
    let Some(ring) = SplitRing::new(&view, queue) else {
        return;
    };
    for &(head, len) in used {
        let mut left = u64::from(len);
        for desc in ring.chain(&view, head) {
            if left == 0 {
                break;
            }
            let n = left.min(u64::from(desc.len()));
            log.written(desc.addr().0, n);
            left -= n;
        }
    }
}
