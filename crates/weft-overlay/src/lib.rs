//! weft's overlay links: VXLAN (RFC 7348) ports that carry a weft switch's frames to remote
//! tunnel endpoints — other weft switches, Linux kernel `vxlan` devices, Open vSwitch.
//!
//! - [`VxlanPort::open`] takes a [`VxlanConfig`] (local endpoint, VNI, remotes, static remote
//!   FDB, learning, TTL/DSCP, MTU, network namespace) and splits into a [`VxlanRx`] /
//!   [`VxlanTx`] pair for `Switch::add_port`, plus its [`OverlayStats`].
//! - [`decap`]: the checks every received datagram passes ([`DecapDrop`] names each drop).
//! - [`encap`]: the UDP + VXLAN header and the flow hash that picks the UDP source port.
//! - [`remote_fdb`]: MAC → remote endpoint, bounded; static, directory (bulk updates from
//!   the control plane's directory) and learned entries, the learned ones aged. A running
//!   port's table, and its flood list (configured remotes and the directory's VTEPs), are
//!   reached through its [`RemoteFdbHandle`].
//! - [`tcp_link`]: a point-to-point link that carries frames over one TCP connection.
//! - [`handover`]: handing live ports to another weftd (a zero-gap upgrade): each kind's
//!   hand-over source ([`VxlanHandoverSource`], [`tcp_link::TcpLinkHandoverSource`]) gives
//!   its descriptors and a serde description; `adopt` takes them in the new process.
//!
//! Layout: `src/vxlan/` holds the VXLAN port (receive, transmit, headers, FDB, sockets) and
//! `src/tcp_link/` the TCP link, beside each other; `error`, `netns` and `device` (each as a
//! `weft_switch::PortDevice`) serve both. The VXLAN
//! modules are re-exported at the crate root under their old paths.
//!
//! No `unsafe` here: sockets, socket options, `sendmmsg` / `recvmmsg`, `UDP_SEGMENT` sends,
//! epoll and eventfd all go through `weft_sys`'s safe types. (Test builds deny rather than
//! forbid it, for the one unit test that drops a capability with `capset`.)
#![deny(missing_docs)]
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]

pub mod device;
pub mod error;
pub mod handover;
pub mod netns;
pub mod tcp_link;
pub mod vxlan;

// The VXLAN modules' paths from before they moved under `vxlan/`.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub use vxlan::fuzz_entry;
pub use vxlan::{config, decap, encap, gro, remote_fdb, rx_coalesce, stats, too_big, tx_super};

pub use device::{tcp_link_device, vxlan_device, TcpLinkDevice, VxlanDevice};
pub use error::OverlayError;
pub use handover::HandoverError;
pub use vxlan::{
    decapsulate, DecapDrop, DecapRules, DirectoryApplied, EntrySource, FloodApplied, OverlayStats,
    OverlayStatsSnapshot, RemoteEntry, RemoteFdb, RemoteFdbHandle, SocketPaths, VxlanConfig,
    VxlanHandover, VxlanHandoverSource, VxlanPort, VxlanRx, VxlanTx, MAX_SUPER_FRAME,
};

/// Most configured remote endpoints per port (head-end replication sends one datagram to
/// each).
pub const MAX_REMOTES: usize = 128;

/// Most remote endpoints on a port's flood list: the configured ones and the directory's
/// VTEPs of the VNI (a thousand hosts fit).
pub const MAX_FLOOD_REMOTES: usize = 4096;
