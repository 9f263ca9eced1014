//! weft's data path core, after VALE and Hyper-Switch.
//!
//! Packets move in batches: a port's receive burst is collected and its headers read,
//! each packet's destinations are computed (flow cache, flow table, learning bridge), and
//! delivery happens per destination port, once per batch. No I/O, no unsafe, and no
//! allocation per packet: ports do the I/O; this crate decides and counts.
//!
//! Start at [`Switch`] (one L2 domain and its pipeline) and [`port`] (what a port is).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capture;
pub mod counters;
pub mod decision;
pub mod fdb;
pub mod flow_cache;
pub mod flow_key;
pub mod flow_match;
pub mod flow_table;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod lanes;
pub mod memory_port;
pub mod policy;
pub mod port;
pub mod registry;
pub mod switch;
pub mod types;
pub mod upcall;
pub mod vlan;

pub use counters::{DropReason, PortCounters, PortCountersSnapshot};
pub use decision::{Decision, Target, VlanState};
pub use fdb::{
    Fdb, FdbConfig, FdbError, FdbStats, FlushFilter, IgnoreReason, LearnOutcome, LearnedEntry,
};
pub use flow_cache::{FlowCache, FlowCacheStats};
pub use flow_key::FlowKey;
pub use flow_match::{FlowMatch, IpPrefix, MacMatch, MatchField};
pub use flow_table::{
    Action, ActionList, FlowError, FlowRule, FlowTable, RuleId, RuleStats, MAX_ACTIONS,
};
pub use policy::{
    FloodKind, MacLimit, MacLimitAction, PortSecurity, RateLimit, StormControl, StormPolicy,
};
pub use port::{
    CounterClass, CounterSource, DeviceCounter, DeviceError, DeviceStatus, FrameHandle, Link,
    OnePairDevice, PortCaps, PortDevice, PortHalves, PortRx, PortTx, RxBatch, RxDesc, RxFrame,
    SharedTail, TxFrame, Unsplit,
};
pub use registry::{RegistryError, SwitchRegistry};
pub use switch::{
    PacketOutError, PacketOutStats, Pipeline, PortOptions, Switch, SwitchConfig, SwitchError,
    SwitchStats,
};
pub use types::{PortId, Timestamp, VlanId, MAX_PORTS};
pub use upcall::{
    RuleRef, SubscribedUpcall, Upcall, UpcallHub, UpcallReason, UpcallStats, UpcallSubscription,
};
pub use vlan::{PortVlanMode, VlanSet};
