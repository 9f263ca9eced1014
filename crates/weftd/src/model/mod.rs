//! The configuration as weftd keeps it: the protocol's [`State`](weft_control::state::State)
//! checked ([`validate`]) and translated into the switch's types ([`translate`]).

pub mod remote_macs;
pub mod translate;
pub mod validate;

/// The most switches one weftd runs: each reserves its FDB and flow cache up front.
pub const MAX_SWITCHES: usize = 256;
