//! FDB sizing and timing, and the FDB's errors.

use core::time::Duration;

use weft_packet::MacAddr;

use crate::types::{PortId, VlanId, MAX_PORTS};

/// The largest `max_entries` accepted: slot indices are `u32`, and sixteen million
/// entries is far beyond any one switch.
pub const MAX_FDB_ENTRIES: usize = 1 << 24;

/// The highest VLAN id an entry may carry (4095 is reserved; 0 means "no VLAN").
pub const MAX_FDB_VLAN: VlanId = 4094;

/// How long a flapping address is held unless configured otherwise.
pub const DEFAULT_MAC_MOVE_HOLD: Duration = Duration::from_secs(10);

/// Bounds and timers of a forwarding database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbConfig {
    /// Most entries in the table, static and dynamic together.
    pub max_entries: usize,
    /// Most dynamic (learned) entries one port may hold.
    pub max_per_port: usize,
    /// How long a dynamic entry lives after its source was last seen.
    pub ageing: Duration,
    /// A refresh rewrites an entry's timestamp (and LRU position) only when the stored one
    /// is at least this old, so that the per-packet refresh is usually a read. Ageing and
    /// LRU order are then precise to within this much. Zero means exact.
    pub refresh_granularity: Duration,
    /// MAC flap dampening: a learned address that moves between ports more than this many
    /// times within one second is held on the port it is on for [`mac_move_hold`]; frames
    /// from it on other ports are then dropped (`mac_flap_held`). Zero turns it off (the
    /// default: every move is learned).
    ///
    /// [`mac_move_hold`]: FdbConfig::mac_move_hold
    pub mac_move_limit: u32,
    /// How long a flapping address is held (default 10 s).
    pub mac_move_hold: Duration,
}

impl Default for FdbConfig {
    /// 8192 entries, 1024 per port, 300 s ageing (802.1D's default), 1 s refresh granularity.
    fn default() -> Self {
        FdbConfig {
            max_entries: 8192,
            max_per_port: 1024,
            ageing: Duration::from_secs(300),
            refresh_granularity: Duration::from_secs(1),
            mac_move_limit: 0,
            mac_move_hold: DEFAULT_MAC_MOVE_HOLD,
        }
    }
}

impl FdbConfig {
    /// Checks that the bounds are usable and the timers fit in 64-bit nanoseconds.
    pub fn validate(&self) -> Result<(), FdbError> {
        if self.max_entries == 0 {
            return Err(FdbError::ZeroCapacity);
        }
        if self.max_entries > MAX_FDB_ENTRIES {
            return Err(FdbError::CapacityTooLarge {
                requested: self.max_entries,
                max: MAX_FDB_ENTRIES,
            });
        }
        if self.max_per_port == 0 {
            return Err(FdbError::ZeroPortLimit);
        }
        if self.max_per_port > self.max_entries {
            return Err(FdbError::PortLimitAboveCapacity {
                per_port: self.max_per_port,
                total: self.max_entries,
            });
        }
        if self.ageing.is_zero() {
            return Err(FdbError::ZeroAgeing);
        }
        if u64::try_from(self.ageing.as_nanos()).is_err() {
            return Err(FdbError::AgeingTooLong(self.ageing));
        }
        if self.refresh_granularity >= self.ageing {
            return Err(FdbError::RefreshGranularityTooCoarse {
                granularity: self.refresh_granularity,
                ageing: self.ageing,
            });
        }
        if self.mac_move_limit != 0
            && !(Duration::from_millis(100)..=MAX_MAC_MOVE_HOLD).contains(&self.mac_move_hold)
        {
            return Err(FdbError::BadMacMoveHold(self.mac_move_hold));
        }
        Ok(())
    }

    /// (ageing, refresh granularity) in nanoseconds, for a validated config.
    pub(super) fn timers_ns(&self) -> Result<(u64, u64), FdbError> {
        let ageing = u64::try_from(self.ageing.as_nanos())
            .map_err(|_| FdbError::AgeingTooLong(self.ageing))?;
        let granularity = u64::try_from(self.refresh_granularity.as_nanos())
            .map_err(|_| FdbError::AgeingTooLong(self.refresh_granularity))?;
        Ok((ageing, granularity))
    }
}

/// The longest a flapping address may be held.
pub const MAX_MAC_MOVE_HOLD: Duration = Duration::from_secs(3600);

/// Why an FDB could not be built or changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FdbError {
    /// The table must hold at least one entry.
    #[error("the table must hold at least one entry")]
    ZeroCapacity,
    /// `max_entries` is above [`MAX_FDB_ENTRIES`].
    #[error("max_entries {requested} is above the supported {max}")]
    CapacityTooLarge {
        /// The configured size.
        requested: usize,
        /// The largest size accepted.
        max: usize,
    },
    /// A port must be allowed at least one learned entry.
    #[error("the per-port limit must be at least one entry")]
    ZeroPortLimit,
    /// One port may not be allowed more entries than the whole table holds.
    #[error("per-port limit {per_port} exceeds the table size {total}")]
    PortLimitAboveCapacity {
        /// The configured per-port limit.
        per_port: usize,
        /// The configured table size.
        total: usize,
    },
    /// Entries must live for some time.
    #[error("the ageing time must not be zero")]
    ZeroAgeing,
    /// The ageing time does not fit in 64-bit nanoseconds.
    #[error("the ageing time {0:?} does not fit in 64-bit nanoseconds")]
    AgeingTooLong(Duration),
    /// A flap hold time outside 100 ms to one hour.
    #[error("the MAC move hold time {0:?} is out of range: use 100 ms to 3600 s")]
    BadMacMoveHold(Duration),
    /// Refreshing less often than entries age would let active entries expire.
    #[error("refresh granularity {granularity:?} must be below the ageing time {ageing:?}")]
    RefreshGranularityTooCoarse {
        /// The configured granularity.
        granularity: Duration,
        /// The configured ageing time.
        ageing: Duration,
    },
    /// The port id is not below [`MAX_PORTS`].
    #[error("port {0} is out of range (a switch has at most {MAX_PORTS} ports)")]
    PortOutOfRange(PortId),
    /// The VLAN id is above [`MAX_FDB_VLAN`].
    #[error("VLAN {0} is out of range (0..={MAX_FDB_VLAN})")]
    VlanOutOfRange(VlanId),
    /// Only unicast addresses can have entries.
    #[error("{0} is not a unicast address")]
    NotUnicast(MacAddr),
    /// Every entry is static, so none can be evicted to make room.
    #[error("the table is full of static entries")]
    TableFull,
}
