//! Counters: packets, bytes and drops by reason, per port and per switch.
//!
//! Each counter has exactly one writer (the thread that owns the port's data path) and any
//! number of readers (control plane, metrics). A single writer lets an increment be a plain
//! load and store (`Relaxed`), not a locked read-modify-write, and readers never block it.
//! The pipeline adds per batch, not per packet.

use core::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing count with a single writer.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning thread may call this (single writer): two concurrent
    /// writers could lose increments, never corrupt memory.
    #[inline]
    pub fn add(&self, n: u64) {
        if n != 0 {
            let v = self.0.load(Ordering::Relaxed);
            self.0.store(v.wrapping_add(n), Ordering::Relaxed);
        }
    }
    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a packet was dropped. Every drop in the core is counted under exactly one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The frame is too short for an Ethernet header, or a VLAN tag is cut off.
    Malformed,
    /// The source MAC is multicast, broadcast or zero (not a valid station address).
    InvalidSourceMac,
    /// The ingress port's VLAN configuration does not admit the frame's VLAN (or untagged).
    VlanIngressDenied,
    /// The egress port's VLAN configuration does not admit the packet's VLAN.
    VlanEgressDenied,
    /// A flow rule said `drop`.
    FlowRuleDrop,
    /// The destination is the port the packet came in on.
    SamePort,
    /// The packet's decision named no port that could take it (e.g. flooding reached no one).
    NoDestination,
    /// The destination port's queue was full.
    TxQueueFull,
    /// The frame exceeds the destination's maximum and cannot be segmented.
    FrameTooBig,
    /// The frame's offload metadata is inconsistent, or segmenting / checksumming it failed.
    BadOffload,
    /// A `controller` action found the upcall queue full.
    UpcallQueueFull,
    /// The destination port no longer exists.
    PortGone,
    /// An access port received a tagged frame (a VLAN id other than 0, or a second tag
    /// behind a priority tag): the classic double-tagging hop into another VLAN.
    TaggedOnAccessPort,
    /// Port security: the source MAC is not one the port may send from.
    SpoofedSrcMac,
    /// Port security: an IPv4 or IPv6 source address the port may not send from.
    SpoofedSrcIp,
    /// Port security: an ARP packet with a sender MAC or IPv4 address the port may not use.
    SpoofedArp,
    /// Port security: a neighbour solicitation or advertisement claiming a target or
    /// link-layer address the port may not use.
    SpoofedNd,
    /// Port security: a DHCP or DHCPv6 server message from a port not allowed to serve.
    RogueDhcp,
    /// Port security: an IPv6 router advertisement from a port not allowed to send them.
    RogueRa,
    /// Storm control: over the port's broadcast rate.
    StormBroadcast,
    /// Storm control: over the port's multicast rate.
    StormMulticast,
    /// Storm control: over the port's unknown-unicast rate.
    StormUnknownUnicast,
    /// The port holds as many learned MACs as its limit allows, and frames from new
    /// sources are dropped (the limit's `drop` action).
    MacLimit,
    /// The source MAC flapped between ports too often and is held on the port it was on.
    MacFlapHeld,
}

impl DropReason {
    /// Every reason, in a fixed order (the index of [`DropReason::index`]).
    pub const ALL: [DropReason; 24] = [
        DropReason::Malformed,
        DropReason::InvalidSourceMac,
        DropReason::VlanIngressDenied,
        DropReason::VlanEgressDenied,
        DropReason::FlowRuleDrop,
        DropReason::SamePort,
        DropReason::NoDestination,
        DropReason::TxQueueFull,
        DropReason::FrameTooBig,
        DropReason::BadOffload,
        DropReason::UpcallQueueFull,
        DropReason::PortGone,
        DropReason::TaggedOnAccessPort,
        DropReason::SpoofedSrcMac,
        DropReason::SpoofedSrcIp,
        DropReason::SpoofedArp,
        DropReason::SpoofedNd,
        DropReason::RogueDhcp,
        DropReason::RogueRa,
        DropReason::StormBroadcast,
        DropReason::StormMulticast,
        DropReason::StormUnknownUnicast,
        DropReason::MacLimit,
        DropReason::MacFlapHeld,
    ];
    /// Number of reasons.
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`DropReason::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name, used in metrics and the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::InvalidSourceMac => "invalid_source_mac",
            DropReason::VlanIngressDenied => "vlan_ingress_denied",
            DropReason::VlanEgressDenied => "vlan_egress_denied",
            DropReason::FlowRuleDrop => "flow_rule_drop",
            DropReason::SamePort => "same_port",
            DropReason::NoDestination => "no_destination",
            DropReason::TxQueueFull => "tx_queue_full",
            DropReason::FrameTooBig => "frame_too_big",
            DropReason::BadOffload => "bad_offload",
            DropReason::UpcallQueueFull => "upcall_queue_full",
            DropReason::PortGone => "port_gone",
            DropReason::TaggedOnAccessPort => "tagged_on_access_port",
            DropReason::SpoofedSrcMac => "spoofed_src_mac",
            DropReason::SpoofedSrcIp => "spoofed_src_ip",
            DropReason::SpoofedArp => "spoofed_arp",
            DropReason::SpoofedNd => "spoofed_nd",
            DropReason::RogueDhcp => "rogue_dhcp",
            DropReason::RogueRa => "rogue_ra",
            DropReason::StormBroadcast => "storm_broadcast",
            DropReason::StormMulticast => "storm_multicast",
            DropReason::StormUnknownUnicast => "storm_unknown_unicast",
            DropReason::MacLimit => "mac_limit",
            DropReason::MacFlapHeld => "mac_flap_held",
        }
    }
}

/// Drops by reason.
#[derive(Debug, Default)]
pub struct DropCounters([Counter; DropReason::COUNT]);

impl DropCounters {
    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn add(&self, reason: DropReason, n: u64) {
        self.0[reason.index()].add(n);
    }
    /// Drops counted for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()].get()
    }
    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.0.iter().map(Counter::get).sum()
    }
    /// (reason, count) for every reason, including zeros.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.get(*r)))
    }
}

/// Drops accumulated during one batch, flushed into [`DropCounters`] once per batch.
#[derive(Debug, Default, Clone, Copy)]
pub struct BatchDrops([u64; DropReason::COUNT]);

impl BatchDrops {
    /// Notes one drop.
    #[inline]
    pub fn note(&mut self, reason: DropReason, n: u64) {
        self.0[reason.index()] += n;
    }
    /// Adds everything into `into` and resets.
    pub fn flush(&mut self, into: &DropCounters) {
        for (i, n) in self.0.iter_mut().enumerate() {
            if *n != 0 {
                into.0[i].add(*n);
                *n = 0;
            }
        }
    }
    /// Total noted since the last flush.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Counters of one port. Receive-side drops are charged to the ingress port, transmit-side
/// drops to the egress port.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received from the port.
    pub rx_packets: Counter,
    /// Bytes received from the port.
    pub rx_bytes: Counter,
    /// Frames handed to the port for transmission and accepted by it.
    pub tx_packets: Counter,
    /// Bytes accepted for transmission.
    pub tx_bytes: Counter,
    /// Receive batches (with at least one frame).
    pub rx_batches: Counter,
    /// Drops by reason.
    pub drops: DropCounters,
}

/// A plain copy of a port's counters, for display and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortCountersSnapshot {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Receive batches.
    pub rx_batches: u64,
    /// Drops by reason (every reason listed, zeros included).
    pub drops: Vec<(DropReason, u64)>,
}

impl PortCountersSnapshot {
    /// Adds `other`'s counts (the same port on another lane of its switch).
    pub fn add(&mut self, other: &PortCountersSnapshot) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        self.rx_batches += other.rx_batches;
        for (reason, n) in &other.drops {
            match self.drops.iter_mut().find(|(r, _)| r == reason) {
                Some((_, mine)) => *mine += n,
                None => self.drops.push((*reason, *n)),
            }
        }
    }

    /// Drops for one reason.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }
    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }
}

impl PortCounters {
    /// Reads every counter.
    pub fn snapshot(&self) -> PortCountersSnapshot {
        PortCountersSnapshot {
            rx_packets: self.rx_packets.get(),
            rx_bytes: self.rx_bytes.get(),
            tx_packets: self.tx_packets.get(),
            tx_bytes: self.tx_bytes.get(),
            rx_batches: self.rx_batches.get(),
            drops: self.drops.iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reason_index_matches_position_in_all() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
    }

    #[test]
    fn batch_drops_flush_adds_and_resets() {
        let counters = DropCounters::default();
        let mut batch = BatchDrops::default();
        batch.note(DropReason::TxQueueFull, 3);
        batch.note(DropReason::Malformed, 1);
        batch.flush(&counters);
        batch.flush(&counters);
        assert_eq!(counters.get(DropReason::TxQueueFull), 3);
        assert_eq!(counters.total(), 4);
        assert_eq!(batch.total(), 0);
    }
}
