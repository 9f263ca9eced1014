//! Per-port ingress policy: what a port may send (port security), how fast it may flood
//! (storm control) and how many stations it may teach the FDB (MAC limit).
//!
//! Every check here runs before the FDB learns from a frame: a frame one of them drops
//! never moves or adds an entry. All of it is off by default, so a port is a plain
//! learning-bridge port until configured otherwise.

mod security;
mod storm;

pub use security::{PortSecurity, SecurityConfigError, MAX_ALLOWED_IPS, MAX_ALLOWED_MACS};
pub(crate) use storm::StormGate;
pub use storm::{
    FloodKind, RateLimit, StormConfigError, StormControl, StormMeter, StormPolicy,
    DEFAULT_STORM_BURST,
};

/// What happens to frames from new source addresses once a port holds
/// [`MacLimit::max`] learned entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MacLimitAction {
    /// Forward the frame but do not learn its source (replies to it flood as unknown
    /// unicast). Frames from already learned sources are unaffected.
    #[default]
    NoLearn,
    /// Drop the frame, counted as `mac_limit`.
    Drop,
}

impl MacLimitAction {
    /// The name used in configuration and output: `no_learn` or `drop`.
    pub const fn name(self) -> &'static str {
        match self {
            MacLimitAction::NoLearn => "no_learn",
            MacLimitAction::Drop => "drop",
        }
    }
}

/// A bound on the learned entries one port holds, beside the switch-wide per-port bound
/// (which evicts the port's oldest entry instead of refusing the new one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacLimit {
    /// Most learned entries (1 or more).
    pub max: usize,
    /// What happens to a frame from a new source beyond that.
    pub action: MacLimitAction,
}
