//! What a port counts itself: frames it drops before the switch sees them (or after the
//! switch handed them over), by reason, and how many frames carried offloads.
//!
//! The switch counts its own drops per port ([`weft_switch::PortCounters`]); these are the
//! port's. Receive counters are written only by the receive half and transmit counters only
//! by the transmit half (single writer each), readable from any thread through the
//! `Arc<PortStats>` every port hands out.

use weft_switch::counters::Counter;

/// Why a port dropped a frame itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortDrop {
    /// The virtio-net header was inconsistent (unknown flags or GSO type, GSO without a
    /// partial checksum, checksum offsets outside the frame...).
    BadVnetHeader,
    /// Shorter than a virtio-net header plus an Ethernet header, or cut short by the kernel
    /// (an AF_PACKET ring slot smaller than the frame).
    Truncated,
    /// Larger than the port's MTU without being a GSO frame (or a GSO frame larger than
    /// the largest super-frame).
    Oversize,
    /// Reading from the port failed for another reason than "nothing to read".
    RxError,
    /// The kernel refused a frame the switch handed over (`EINVAL`, `ENOBUFS`...).
    TxError,
    /// The kernel had a frame for an AF_PACKET port while every block of its receive ring
    /// still waited to be read (`tp_drops` of `PACKET_STATISTICS`, which also holds the rare
    /// frame the kernel could not describe in the ring). Read when the ring runs dry and at
    /// least once per turn of the ring, so it lags the kernel by that much.
    RingFull,
}

impl PortDrop {
    /// Every reason, in index order.
    pub const ALL: [PortDrop; 6] = [
        PortDrop::BadVnetHeader,
        PortDrop::Truncated,
        PortDrop::Oversize,
        PortDrop::RxError,
        PortDrop::TxError,
        PortDrop::RingFull,
    ];
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`PortDrop::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name for metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            PortDrop::BadVnetHeader => "bad_vnet_header",
            PortDrop::Truncated => "truncated",
            PortDrop::Oversize => "oversize",
            PortDrop::RxError => "rx_error",
            PortDrop::TxError => "tx_error",
            PortDrop::RingFull => "ring_full",
        }
    }
}

/// Counters of one TAP queue or AF_PACKET socket.
#[derive(Debug, Default)]
pub struct PortStats {
    /// Frames received and handed to the switch.
    pub rx_frames: Counter,
    /// Of those, GSO super-frames.
    pub rx_gso_frames: Counter,
    /// Of those, frames whose checksum was still to be computed.
    pub rx_csum_partial: Counter,
    /// Frames the kernel reported as sent by this socket itself and that were skipped
    /// (AF_PACKET without `PACKET_IGNORE_OUTGOING`); not drops.
    pub rx_own_skipped: Counter,
    /// Frames written to the kernel.
    pub tx_frames: Counter,
    /// Of those, GSO super-frames.
    pub tx_gso_frames: Counter,
    /// Of those, frames whose checksum was left to the receiver.
    pub tx_csum_partial: Counter,
    drops: [Counter; PortDrop::COUNT],
}

impl PortStats {
    /// Counts one drop (by the half that owns `reason`: rx reasons by the receive half).
    #[inline]
    pub(crate) fn drop_one(&self, reason: PortDrop) {
        self.drop_many(reason, 1);
    }

    /// Counts `n` drops at once (the kernel's ring drops, read in one call).
    #[inline]
    pub(crate) fn drop_many(&self, reason: PortDrop, n: u64) {
        self.drops[reason.index()].add(n);
    }

    /// Drops counted for `reason`.
    pub fn drops(&self, reason: PortDrop) -> u64 {
        self.drops[reason.index()].get()
    }

    /// A plain copy of every counter.
    pub fn snapshot(&self) -> PortStatsSnapshot {
        let mut drops = [0; PortDrop::COUNT];
        for (d, c) in drops.iter_mut().zip(&self.drops) {
            *d = c.get();
        }
        PortStatsSnapshot {
            rx_frames: self.rx_frames.get(),
            rx_gso_frames: self.rx_gso_frames.get(),
            rx_csum_partial: self.rx_csum_partial.get(),
            rx_own_skipped: self.rx_own_skipped.get(),
            tx_frames: self.tx_frames.get(),
            tx_gso_frames: self.tx_gso_frames.get(),
            tx_csum_partial: self.tx_csum_partial.get(),
            drops,
        }
    }
}

/// A copy of a port's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStatsSnapshot {
    /// Frames received and handed to the switch.
    pub rx_frames: u64,
    /// Of those, GSO super-frames.
    pub rx_gso_frames: u64,
    /// Of those, frames with a checksum still to be computed.
    pub rx_csum_partial: u64,
    /// Own outgoing frames skipped (AF_PACKET fallback).
    pub rx_own_skipped: u64,
    /// Frames written to the kernel.
    pub tx_frames: u64,
    /// Of those, GSO super-frames.
    pub tx_gso_frames: u64,
    /// Of those, frames with a checksum left to the receiver.
    pub tx_csum_partial: u64,
    /// Drops, indexed by [`PortDrop::index`].
    pub drops: [u64; PortDrop::COUNT],
}

impl PortStatsSnapshot {
    /// Drops for one reason.
    pub fn drops(&self, reason: PortDrop) -> u64 {
        self.drops[reason.index()]
    }
    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Adds `other`'s counts to these (the queues of one port).
    pub fn add(&mut self, other: &PortStatsSnapshot) {
        self.rx_frames += other.rx_frames;
        self.rx_gso_frames += other.rx_gso_frames;
        self.rx_csum_partial += other.rx_csum_partial;
        self.rx_own_skipped += other.rx_own_skipped;
        self.tx_frames += other.tx_frames;
        self.tx_gso_frames += other.tx_gso_frames;
        self.tx_csum_partial += other.tx_csum_partial;
        for (d, o) in self.drops.iter_mut().zip(other.drops) {
            *d += o;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reason_index_matches_position_in_all() {
        for (i, r) in PortDrop::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
    }

    #[test]
    fn snapshot_reports_drops_by_reason() {
        let s = PortStats::default();
        s.drop_one(PortDrop::Truncated);
        s.drop_one(PortDrop::Truncated);
        s.drop_one(PortDrop::TxError);
        let snap = s.snapshot();
        assert_eq!(snap.drops(PortDrop::Truncated), 2);
        assert_eq!(snap.drops(PortDrop::TxError), 1);
        assert_eq!(snap.total_drops(), 3);
        assert_eq!(s.drops(PortDrop::Oversize), 0);
    }
}
