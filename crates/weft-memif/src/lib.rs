//! memif ports: the shared-memory packet interface of VPP, libmemif and DPDK's
//! `net_memif`, as a weft switch port, in either role.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod config;
pub mod handshake;
pub mod layout;
pub mod memory;
pub mod ring;
pub mod wire;
