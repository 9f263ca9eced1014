//! VXLAN (RFC 7348) ports: receive (`rx`, with UDP GRO cut apart in `gro` and merged again
//! in `rx_coalesce`), transmit (`tx`: each burst routed once in `tx_burst`, then sent as raw
//! `sendmmsg` batches in `tx_raw`, `UDP_SEGMENT` runs in `tx_small_gso` and segmented
//! super-frames in `tx_super`), the headers (`encap`, `decap`), the remote FDB and the flood
//! list that changes while the port runs (`flood_list`), the ICMP
//! answers to oversize frames (`too_big`), and the sockets (`sys`, `udp_offload`).

pub mod config;
pub mod decap;
pub mod encap;
mod fdb_handle;
mod flood_list;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod gro;
pub mod handover;
pub(crate) mod port;
pub mod remote_fdb;
mod rx;
pub mod rx_coalesce;
mod rx_coalesce_udp;
mod rx_handover;
pub mod stats;
mod sys;
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
pub use fdb_handle::RemoteFdbHandle;
pub use flood_list::FloodApplied;
pub use handover::{VxlanHandover, VxlanHandoverSource};
pub use port::{SocketPaths, VxlanPort, MAX_SUPER_FRAME};
pub use remote_fdb::directory::DirectoryApplied;
pub use remote_fdb::{EntrySource, RemoteEntry, RemoteFdb};
pub use rx::VxlanRx;
pub use stats::{DecapDrop, OverlayStats, OverlayStatsSnapshot};
pub use tx::VxlanTx;
