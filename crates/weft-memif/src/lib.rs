//! memif ports: the shared-memory packet interface of VPP, libmemif and DPDK's
//! `net_memif`, as a weft switch port, in either role.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod config;
mod connection;
mod counters;
mod fds;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod handshake;
pub mod layout;
pub mod memory;
pub mod ring;
mod rx;
mod tx;
pub mod wire;

pub use connection::PeerStatus;
pub use counters::MemifStats;
pub use rx::MemifPortRx;
pub use tx::MemifPortTx;
mod control;
mod port;

pub use config::{ConfigError, MemifConfig, Role};
pub use port::{MemifError, MemifPort};
pub use weft_vhost::SocketDir;
