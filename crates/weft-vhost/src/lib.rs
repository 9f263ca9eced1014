//! vhost-user backend ports: a VM's virtio-net device (QEMU/KVM, Cloud Hypervisor) or a DPDK
//! virtio-user port, attached to a weft switch.
//!
//! The switch maps the guest's memory and walks its virtqueues itself — the position
//! VNET/P and Hyper-Switch give their switch inside the hypervisor. Frames the guest
//! transmits are lent to the switch where they lie in guest memory, and copied once,
//! straight into the receiving guest's buffers.
//!
//! ```no_run
//! use weft_vhost::{VhostPortConfig, VhostUserPort};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Listen; QEMU connects with `-chardev socket,path=/tmp/vm1.sock`. (Or
//! // `VhostUserPort::connect`: QEMU listens with `server=on,wait=off`, weft connects and
//! // reconnects after either side restarts.)
//! let mut port = VhostUserPort::listen("/tmp/vm1.sock", VhostPortConfig::default())?;
//! let (rx, tx) = port.take_halves()?;
//! // `rx` is a `weft_switch::PortRx`, `tx` a `weft_switch::PortTx`:
//! // switch.add_port("vm1", Some(Box::new(rx)), Box::new(tx), options)
//! # Ok(()) }
//! ```
//!
//! Threads: each port has a control thread that speaks vhost-user with its frontend
//! (`server.rs`, `control.rs`); the halves belong to the worker that owns the switch. They
//! meet in each queue's state (`vring.rs`), which the data path only ever `try_lock`s —
//! except when the switch runs as several lanes (`take_lane_halves`, one worker thread per
//! lane, each with its own share of the queue pairs): a lane whose pairs the guest does not
//! use shares another lane's receive queue, and both then wait a bounded moment for the
//! other's burst.
//!
//! Everything from the frontend is hostile: memory tables, ring setup, descriptor chains
//! and virtio-net headers are validated (`memory.rs`, `control.rs`, `chain.rs`, `rx.rs`).
//! A bad frame is dropped and counted by reason; a bad chain or ring stops that queue only
//! ([`QueueFault`]), until the frontend resets it.
//!
//! A live port can be handed to another process without its frontend noticing (weftd's
//! upgrade): [`VhostUserPort::suspend`], [`SuspendedPort::snapshot`] (a serde
//! [`PortSnapshot`] and the descriptors it names), [`VhostUserPort::adopt`] in the other
//! process (`handover.rs`).
#![deny(missing_docs)]

pub mod ab;
mod bounce;
mod chain;
mod config;
mod control;
mod counters;
mod device;
mod dispatch;
mod error;
mod fds;
mod features;
mod flow_hash;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
mod handover;
mod memory;
mod modes;
mod notify;
mod port_device;
mod ring_access;
mod rx;
mod server;
mod socket_dir;
mod tx;
mod vring;

#[cfg(test)]
mod tests;

pub use config::{ConfigError, VhostPortConfig, MAX_FRAME_LEN, MAX_QUEUE_PAIRS, MAX_QUEUE_SIZE};
pub use counters::{batch_bucket, FrameDrop, QueueFault, QueueStats, BATCH_BUCKETS};
pub use device::queue_name;
pub use dispatch::{Dispatch, Driven};
pub use error::VhostError;
pub use fds::FdError;
pub use features::{offered_features, Features};
pub use handover::{
    ConnectionSnapshot, HandoverError, HandoverFds, PortSnapshot, RegionSnapshot,
    RingAddrsSnapshot, RingSnapshot, SuspendedPort, SNAPSHOT_VERSION,
};
pub use memory::{
    max_log_bytes, DirtyLogError, GuardError, GuardedMemory, GuestMemoryTable, LogRefusal,
    MemoryRefusal, MemoryTableError, RegionDesc, DEFAULT_MAX_GUEST_MEMORY, LOG_PAGE, MAX_REGIONS,
};
pub use modes::{DispatchMode, ModeError, NotifyPolicy, MAX_MODE_PERIOD};
pub use rx::VhostPortRx;
pub use server::{QueuePairStats, QueueStatus, VhostMode, VhostPortStats, VhostUserPort};
pub use socket_dir::{FileId, SocketDir, SocketDirError};
pub use tx::VhostPortTx;
pub use vring::{RingError, RingLayout, NUM_QUEUES, RX_QUEUE, TX_QUEUE};
