//! What a VXLAN port counts: frames each way, and every drop by reason.
//!
//! Single-writer counters (the receive half writes the rx side, the transmit half the tx
//! side), readable from any thread through the `Arc`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a received datagram was dropped before reaching the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecapDrop {
    /// Shorter than a VXLAN header.
    Truncated,
    /// The I flag is clear: the VNI means nothing.
    BadFlags,
    /// A reserved bit is set and the port is strict about it.
    ReservedBits,
    /// The VNI is not this port's.
    UnknownVni,
    /// Sent from an endpoint that is not a configured remote (and learning is off).
    UnknownRemote,
    /// The inner frame is shorter than an Ethernet header.
    InnerTooShort,
    /// The inner frame exceeds the port's largest frame (MTU + 22).
    InnerTooBig,
    /// The inner frame's source MAC is multicast, broadcast or zero: no station sends that.
    InnerBadSource,
    /// The kernel's UDP GRO control message could not be read (cut, malformed, or a segment
    /// size of zero or above 65535): the buffer cannot be cut into datagrams.
    BadGro,
}

impl DecapDrop {
    /// Every reason, in counter order.
    pub const ALL: [DecapDrop; 9] = [
        DecapDrop::Truncated,
        DecapDrop::BadFlags,
        DecapDrop::ReservedBits,
        DecapDrop::UnknownVni,
        DecapDrop::UnknownRemote,
        DecapDrop::InnerTooShort,
        DecapDrop::InnerTooBig,
        DecapDrop::InnerBadSource,
        DecapDrop::BadGro,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Counters of one VXLAN port.
#[derive(Debug, Default)]
pub struct OverlayStats {
    rx_frames: AtomicU64,
    rx_errors: AtomicU64,
    rx_socket_overflow: AtomicU64,
    rx_drops: [AtomicU64; DecapDrop::ALL.len()],
    tx_frames: AtomicU64,
    tx_datagrams: AtomicU64,
    tx_errors: AtomicU64,
    tx_no_remote: AtomicU64,
    learned: AtomicU64,
    learn_refused: AtomicU64,
    rx_coalesced: AtomicU64,
    rx_merged: AtomicU64,
    tx_super_frames: AtomicU64,
    tx_gso_sends: AtomicU64,
    too_big: AtomicU64,
    too_big_answered: AtomicU64,
    tx_raw_sends: AtomicU64,
    tx_small_gso_sends: AtomicU64,
    tx_small_gso_datagrams: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OverlayStatsSnapshot {
    /// Inner frames handed to the switch.
    pub rx_frames: u64,
    /// Receive calls that failed (other than "nothing to read").
    pub rx_errors: u64,
    /// Datagrams the kernel dropped before the port read them: the underlay socket's receive
    /// buffer was full (`SO_RXQ_OVFL`).
    pub rx_socket_overflow: u64,
    /// Datagrams dropped, by [`DecapDrop`] index.
    pub rx_drops: [u64; DecapDrop::ALL.len()],
    /// Frames the port accepted for sending.
    pub tx_frames: u64,
    /// Datagrams sent (a replicated frame is several).
    pub tx_datagrams: u64,
    /// Datagrams the kernel refused (socket buffer full, no route...).
    pub tx_errors: u64,
    /// Frames with nowhere to go (no remote endpoint configured).
    pub tx_no_remote: u64,
    /// Remote MACs learned or moved.
    pub learned: u64,
    /// Remote MACs not learned because the FDB was full.
    pub learn_refused: u64,
    /// Received buffers that held several datagrams (UDP GRO).
    pub rx_coalesced: u64,
    /// Coalesced buffers merged back into one TCP or UDP super-frame for the switch (inner
    /// GRO).
    pub rx_merged: u64,
    /// TCP and UDP super-frames (TSO, USO) the port segmented and sent itself.
    pub tx_super_frames: u64,
    /// `sendmsg` calls with UDP segmentation offload (one per ≤ 64 datagrams).
    pub tx_gso_sends: u64,
    /// Frames whose L3 packet exceeds the inner MTU (not sent): those the switch refused and
    /// handed to the port's `too_big` hook (the switch counts them too, as `frame_too_big`),
    /// and any given straight to `transmit`.
    pub too_big: u64,
    /// Of those, how many were answered with ICMP "fragmentation needed" / "packet too big"
    /// (the others: not DF, an ICMP error, rate limited...).
    pub too_big_answered: u64,
    /// `sendmmsg` calls on the raw socket (one per burst of up to 256 datagrams).
    pub tx_raw_sends: u64,
    /// `sendmsg` calls with UDP segmentation offload that carried a run of ordinary frames
    /// (equal-length frames to one remote, one datagram each; see `tx_small_gso`).
    pub tx_small_gso_sends: u64,
    /// Datagrams those calls carried.
    pub tx_small_gso_datagrams: u64,
}

impl OverlayStatsSnapshot {
    /// Datagrams dropped for `reason`.
    pub fn drops(&self, reason: DecapDrop) -> u64 {
        self.rx_drops[reason.index()]
    }
    /// Datagrams dropped for any reason.
    pub fn total_drops(&self) -> u64 {
        self.rx_drops.iter().sum()
    }
}

fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a load and a store are enough and cheaper than a locked add.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl OverlayStats {
    pub(crate) fn rx_drop(&self, reason: DecapDrop) {
        bump(&self.rx_drops[reason.index()], 1);
    }
    pub(crate) fn rx_frames(&self, n: u64) {
        bump(&self.rx_frames, n);
    }
    pub(crate) fn rx_error(&self) {
        bump(&self.rx_errors, 1);
    }
    pub(crate) fn rx_socket_overflow(&self, n: u64) {
        bump(&self.rx_socket_overflow, n);
    }
    pub(crate) fn tx(&self, frames: u64, datagrams: u64) {
        bump(&self.tx_frames, frames);
        bump(&self.tx_datagrams, datagrams);
    }
    pub(crate) fn tx_error(&self, n: u64) {
        bump(&self.tx_errors, n);
    }
    pub(crate) fn tx_no_remote(&self) {
        bump(&self.tx_no_remote, 1);
    }
    pub(crate) fn learn(&self, outcome: crate::vxlan::remote_fdb::LearnOutcome) {
        match outcome {
            crate::vxlan::remote_fdb::LearnOutcome::Learned => self.learned(),
            crate::vxlan::remote_fdb::LearnOutcome::Full => self.learn_refused(),
            crate::vxlan::remote_fdb::LearnOutcome::Unchanged => {}
        }
    }
    pub(crate) fn too_big(&self) {
        bump(&self.too_big, 1);
    }
    pub(crate) fn too_big_answered(&self) {
        bump(&self.too_big_answered, 1);
    }
    pub(crate) fn rx_merged(&self) {
        bump(&self.rx_merged, 1);
    }
    pub(crate) fn learned(&self) {
        bump(&self.learned, 1);
    }
    pub(crate) fn learn_refused(&self) {
        bump(&self.learn_refused, 1);
    }
    pub(crate) fn rx_coalesced(&self) {
        bump(&self.rx_coalesced, 1);
    }
    pub(crate) fn tx_raw_send(&self) {
        bump(&self.tx_raw_sends, 1);
    }
    pub(crate) fn tx_small_gso(&self, datagrams: u64) {
        bump(&self.tx_small_gso_sends, 1);
        bump(&self.tx_small_gso_datagrams, datagrams);
    }
    pub(crate) fn tx_super_frame(&self, gso_sends: u64) {
        bump(&self.tx_super_frames, 1);
        bump(&self.tx_gso_sends, gso_sends);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> OverlayStatsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        OverlayStatsSnapshot {
            rx_frames: r(&self.rx_frames),
            rx_errors: r(&self.rx_errors),
            rx_socket_overflow: r(&self.rx_socket_overflow),
            rx_drops: std::array::from_fn(|i| r(&self.rx_drops[i])),
            tx_frames: r(&self.tx_frames),
            tx_datagrams: r(&self.tx_datagrams),
            tx_errors: r(&self.tx_errors),
            tx_no_remote: r(&self.tx_no_remote),
            learned: r(&self.learned),
            learn_refused: r(&self.learn_refused),
            rx_coalesced: r(&self.rx_coalesced),
            rx_merged: r(&self.rx_merged),
            tx_super_frames: r(&self.tx_super_frames),
            tx_gso_sends: r(&self.tx_gso_sends),
            too_big: r(&self.too_big),
            too_big_answered: r(&self.too_big_answered),
            tx_raw_sends: r(&self.tx_raw_sends),
            tx_small_gso_sends: r(&self.tx_small_gso_sends),
            tx_small_gso_datagrams: r(&self.tx_small_gso_datagrams),
        }
    }
}
