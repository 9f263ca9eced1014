//! memif ports: the shared-memory packet interface of VPP, libmemif and DPDK's
//! `net_memif`, as a weft switch port, in either role.
//!
//! ```no_run
//! use std::sync::Arc;
//! use weft_memif::{MemifConfig, MemifPort, Role, SocketDir};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // weft listens; DPDK connects with
//! // `--vdev=net_memif0,role=client,socket=/run/weft/m0.sock,socket-abstract=no,id=0`.
//! let dir = Arc::new(SocketDir::open("/run/weft".as_ref())?);
//! let config = MemifConfig { role: Role::Server, id: 0, ..MemifConfig::default() };
//! let mut port = MemifPort::open(dir, "m0.sock".as_ref(), config)?;
//! let (rx, tx) = port.take_halves()?; // or, as a `PortDevice`, `take_lanes(n)`
//! // switch.add_port("m0", Some(Box::new(rx)), Box::new(tx), options)
//! # let _ = (rx, tx); Ok(()) }
//! ```
//!
//! Roles: as a server (memif's master) weft listens and maps the regions its client
//! hands over; as a client (slave) it connects, allocates one sealed memfd with every ring
//! and buffer, and reconnects after the server goes (50 ms doubling to 1 s).
//!
//! Threads: one control thread per port (`control.rs`) speaks the protocol
//! (`handshake.rs`, pure) and hands a completed connection to the halves
//! (`connection.rs`); the halves belong to the worker, pick the connection up between
//! batches, and never wait on the control thread. A half that finds a ring broken tells
//! the control thread, which drops the peer with a DISCONNECT naming why.
//!
//! Everything the peer writes is hostile: every message field, every descriptor, every
//! index is read once, checked, and only the checked copy used (`ring.rs`); shared memory
//! is only ever touched through volatile and atomic accessors (`memory.rs`), never as a
//! `&[u8]`; a peer that shrinks its memory file is caught by the SIGBUS guard, which breaks
//! only its connection.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod config;
mod connection;
mod counters;
mod fds;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod handover;
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
pub use handover::{MemifHandover, MemifHandoverError, MemifHandoverSource, SuspendedMemif};
pub use port::{MemifError, MemifPort};
pub use weft_vhost::SocketDir;
