//! Small value types shared by every part of the core.

use core::fmt;

/// A port's index inside one switch. Dense and small so that it can index arrays and
/// fit in keys; the switch hands them out and reuses freed ones.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortId(pub u16);

impl PortId {
    /// The id as an array index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port{}", self.0)
    }
}

/// The most ports one switch holds (the flood set is a bitmap of this many bits).
pub const MAX_PORTS: usize = 256;

/// A VLAN id, 0..=4095. Inside the switch `0` means "no VLAN": untagged traffic on ports
/// without VLAN configuration (ids 1..=4094 are real VLANs; 4095 is reserved).
pub type VlanId = u16;

/// Monotonic time in nanoseconds, passed in by the caller: the core never reads a clock,
/// which keeps it deterministic under test.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// From whole seconds.
    pub const fn from_secs(s: u64) -> Self {
        Timestamp(s.saturating_mul(1_000_000_000))
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms.saturating_mul(1_000_000))
    }
    /// Nanoseconds since `earlier` (zero if `earlier` is later).
    pub const fn nanos_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}
