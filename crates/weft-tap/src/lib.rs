//! TAP and AF_PACKET ports for the weft switch: the host stack, containers in network
//! namespaces, VMs that only know `-netdev tap`, and host interfaces (veth or physical).
//!
//! Both port kinds carry the virtio-net header beside every frame, so TCP super-frames
//! (64 KiB) and "checksum not yet computed" frames cross the switch as they are whenever the
//! destination takes them (dual-stack paper §6); the core segments and completes checksums
//! for destinations that do not.
//!
//! - [`tap`]: [`Tap::open`] creates or attaches to a TAP device (optionally in another
//!   network namespace, optionally multi-queue); each [`TapQueue`] splits into a
//!   [`TapRx`]/[`TapTx`] pair and an `Arc<`[`PortStats`]`>`.
//! - [`af_packet`]: [`AfPacket::open`] binds a packet socket to an existing interface, with a
//!   memory-mapped `TPACKET_V3` receive ring and `sendmmsg` transmit.
//! - [`device`]: either behind a port as the daemon sees every port ([`KernelPortDevice`]).
//! - [`stats`]: what a port drops itself, by reason ([`PortDrop`]).
//! - [`netns`]: doing things inside another network namespace.
//!
//! System calls go through `weft_sys`'s safe types. The one place with `unsafe` is `ring`:
//! the `TPACKET_V3` receive ring is memory the kernel writes while the port reads it, mapped
//! and handed back block by block (each block with a `// SAFETY:` comment).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod af_packet;
pub mod device;
pub mod error;
pub mod netns;
pub mod offloads;
// The memory-mapped receive ring, shared with the kernel: the only unsafe code here.
#[allow(unsafe_code)]
mod ring;
pub mod stats;
mod sys;
pub mod tap;
pub mod vnet;

pub use af_packet::{AfPacket, AfPacketOptions, AfPacketRx, AfPacketTx};
pub use device::{af_packet_device, tap_device, KernelPortDevice, TapDevice};
pub use error::PortError;
pub use offloads::Offloads;
pub use stats::{PortDrop, PortStats, PortStatsSnapshot};
pub use tap::{Tap, TapOptions, TapQueue, TapRx, TapTx};
