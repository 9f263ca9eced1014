//! weft's overlay links: VXLAN (RFC 7348) ports that carry a weft switch's frames to remote
//! tunnel endpoints — other weft switches, Linux kernel `vxlan` devices, Open vSwitch.
//!
//! - [`VxlanPort::open`] takes a [`VxlanConfig`] (local endpoint, VNI, remotes, static remote
//!   FDB, learning, TTL/DSCP, MTU, network namespace) and splits into a [`VxlanRx`] /
//!   [`VxlanTx`] pair for `Switch::add_port`, plus its [`OverlayStats`].
//! - [`decap`]: the checks every received datagram passes ([`DecapDrop`] names each drop).
//! - [`encap`]: the UDP + VXLAN header and the flow hash that picks the UDP source port.
//! - [`remote_fdb`]: MAC → remote endpoint, bounded, learned entries aged; a running port's
//!   table is reached through its [`RemoteFdbHandle`].
//!
//! No `unsafe` here: sockets, socket options, `sendmmsg` / `recvmmsg`, `UDP_SEGMENT` sends,
//! epoll and eventfd all go through `weft_sys`'s safe types. (Test builds deny rather than
//! forbid it, for the one unit test that drops a capability with `capset`.)
#![deny(missing_docs)]
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]

pub mod config;
pub mod decap;
pub mod encap;
pub mod error;
mod fdb_handle;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod gro;
pub mod netns;
mod port;
pub mod remote_fdb;
mod rx;
pub mod rx_coalesce;
mod rx_coalesce_udp;
pub mod stats;
mod sys;
pub mod tcp_link;
pub mod too_big;
mod tx;
mod tx_burst;
mod tx_raw;
mod tx_small_gso;
pub mod tx_super;
mod udp_offload;

#[cfg(test)]
mod tests;

pub use config::VxlanConfig;
pub use decap::{decapsulate, DecapRules};
pub use error::OverlayError;
pub use fdb_handle::RemoteFdbHandle;
pub use port::{SocketPaths, VxlanPort, MAX_SUPER_FRAME};
pub use remote_fdb::{RemoteEntry, RemoteFdb};
pub use rx::VxlanRx;
pub use stats::{DecapDrop, OverlayStats, OverlayStatsSnapshot};
pub use tx::VxlanTx;

/// Most remote endpoints per port (head-end replication sends one datagram to each).
pub const MAX_REMOTES: usize = 128;
