//! What the FDB tells its caller: learning outcomes, flush filters, entry views, counters.

use core::time::Duration;

use weft_packet::MacAddr;

use crate::types::{PortId, Timestamp, VlanId};

/// What [`Fdb::learn`](super::Fdb::learn) did with a source address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnOutcome {
    /// The address was already known on this port (a dynamic entry was refreshed, or a
    /// static entry confirmed). Lookups are unchanged.
    Refreshed,
    /// A new entry was created (or an expired one revived) without evicting a live one.
    Learned,
    /// A live dynamic entry moved here from another port. If this port was at its limit,
    /// its least recently seen entry was evicted; that shows only in the counters.
    Moved {
        /// The port the address was on before.
        from: PortId,
    },
    /// A new entry was created after evicting a live one.
    Evicted {
        /// The port whose least recently seen entry was evicted.
        victim_port: PortId,
        /// Which bound forced the eviction.
        cause: EvictionCause,
    },
    /// Nothing was learned.
    Ignored(IgnoreReason),
}

impl LearnOutcome {
    /// Whether this call may have changed some lookup result.
    pub const fn changed_lookups(&self) -> bool {
        matches!(
            self,
            LearnOutcome::Learned | LearnOutcome::Moved { .. } | LearnOutcome::Evicted { .. }
        )
    }
}

/// Which bound forced an eviction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvictionCause {
    /// The learning port was at its own per-port limit: its own oldest entry went.
    PortLimit,
    /// The whole table was full: the oldest entry of the port holding the most dynamic
    /// entries went.
    TableFull,
}

/// Why a source address was not learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IgnoreReason {
    /// Multicast, broadcast or all-zero source address: not a station.
    NotUnicast,
    /// A static entry puts this address on another port; learning never overrides it, so a
    /// guest spoofing the address cannot hijack its traffic.
    StaticConflict,
    /// The table is full and every entry in it is static.
    TableFullOfStatic,
    /// The port id is not below [`MAX_PORTS`](crate::types::MAX_PORTS).
    PortOutOfRange,
    /// The VLAN id is above [`MAX_FDB_VLAN`](super::MAX_FDB_VLAN).
    VlanOutOfRange,
    /// The port holds as many learned entries as its own MAC limit allows.
    PortMacLimit,
    /// The address flapped between ports too often and is held where it is.
    FlapHeld,
}

/// Which entries [`Fdb::flush`](super::Fdb::flush) removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushFilter {
    /// Every entry, static ones included.
    All,
    /// Every learned entry; static ones stay.
    Dynamic,
    /// Every entry on this port, static ones included (the port is going away).
    Port(PortId),
    /// The learned entries on this port (its link went down, or the topology changed).
    DynamicOnPort(PortId),
    /// Every entry in this VLAN, static ones included.
    Vlan(VlanId),
}

/// A copy of one stored entry, for listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbEntryView {
    /// The entry's VLAN.
    pub vlan: VlanId,
    /// The station's address.
    pub mac: MacAddr,
    /// Where frames to it go.
    pub port: PortId,
    /// Configured rather than learned: never ages, never moves, never evicted.
    pub is_static: bool,
    /// When the source was last seen (to within the refresh granularity); `None` if static.
    pub last_seen: Option<Timestamp>,
    /// When the entry stops answering lookups; `None` if static. Entries past this time are
    /// listed until the next sweep removes them.
    pub expires_at: Option<Timestamp>,
}

impl FdbEntryView {
    /// Time since the source was last seen; `None` for a static entry.
    pub fn age(&self, now: Timestamp) -> Option<Duration> {
        self.last_seen
            .map(|seen| Duration::from_nanos(now.nanos_since(seen)))
    }

    /// Whether lookups at `now` ignore this entry.
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// Evictions by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvictionStats {
    /// A port at its own limit evicted its own oldest entry.
    pub port_limit: u64,
    /// A full table evicted the oldest entry of its biggest port.
    pub table_full: u64,
}

/// Ignored source addresses by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IgnoredStats {
    /// See [`IgnoreReason::NotUnicast`].
    pub not_unicast: u64,
    /// See [`IgnoreReason::StaticConflict`].
    pub static_conflict: u64,
    /// See [`IgnoreReason::TableFullOfStatic`].
    pub table_full_of_static: u64,
    /// See [`IgnoreReason::PortOutOfRange`].
    pub port_out_of_range: u64,
    /// See [`IgnoreReason::VlanOutOfRange`].
    pub vlan_out_of_range: u64,
    /// See [`IgnoreReason::PortMacLimit`].
    pub port_mac_limit: u64,
    /// See [`IgnoreReason::FlapHeld`].
    pub flap_held: u64,
}

impl IgnoredStats {
    pub(super) fn count(&mut self, reason: IgnoreReason) {
        let counter = match reason {
            IgnoreReason::NotUnicast => &mut self.not_unicast,
            IgnoreReason::StaticConflict => &mut self.static_conflict,
            IgnoreReason::TableFullOfStatic => &mut self.table_full_of_static,
            IgnoreReason::PortOutOfRange => &mut self.port_out_of_range,
            IgnoreReason::VlanOutOfRange => &mut self.vlan_out_of_range,
            IgnoreReason::PortMacLimit => &mut self.port_mac_limit,
            IgnoreReason::FlapHeld => &mut self.flap_held,
        };
        *counter = counter.wrapping_add(1);
    }

    /// All ignored sources.
    pub fn total(&self) -> u64 {
        self.not_unicast
            .wrapping_add(self.static_conflict)
            .wrapping_add(self.table_full_of_static)
            .wrapping_add(self.port_out_of_range)
            .wrapping_add(self.vlan_out_of_range)
            .wrapping_add(self.port_mac_limit)
            .wrapping_add(self.flap_held)
    }
}

/// Counters since the FDB was built (event counters wrap) and its current occupancy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbStats {
    /// Entries created or revived by learning.
    pub learned: u64,
    /// Learning calls that found the source already on the same port.
    pub refreshed: u64,
    /// Live dynamic entries that moved to another port.
    pub moves: u64,
    /// Times an address was found flapping and held on its port.
    pub flap_episodes: u64,
    /// Live entries evicted to make room, by cause.
    pub evictions: EvictionStats,
    /// Dynamic entries removed because they aged out (by the sweep, or reclaimed when
    /// room was needed).
    pub expired: u64,
    /// Entries removed by `remove` or `flush`.
    pub removed: u64,
    /// Sources not learned, by reason.
    pub ignored: IgnoredStats,
    /// Entries stored now (including expired ones the sweep has not removed yet).
    pub entries: usize,
    /// Static entries stored now.
    pub static_entries: usize,
}
