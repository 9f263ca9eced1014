//! The directory: weft hosts find each other, and every MAC, through etcd.
//!
//! Each weftd writes, under a lease it keeps alive, its tunnel endpoint for every VNI it
//! carries and the MACs behind its local ports ([`publish`]); it reads and watches the same
//! for everyone else ([`view`]) and hands the result to its overlay ports through a
//! [`Sink`]. A MAC that moves carries a higher sequence number, as in EVPN, so every host
//! agrees on where it is. Everything read from the store is hostile input: keys and values
//! are parsed strictly ([`keys`], [`records`]), refusals are counted, and the view is
//! bounded. While the store is unreachable nothing is flushed; on reconnection the VNIs are
//! read again and replaced whole.

#![forbid(unsafe_code)]

#[cfg(feature = "client")]
mod client;
pub mod config;
pub mod error;
#[cfg(any(test, fuzzing))]
pub mod fuzz_entry;
pub mod keys;
pub mod publish;
pub mod records;
#[cfg(feature = "client")]
mod session;
pub mod view;

#[cfg(feature = "client")]
pub use client::{Directory, Sink, Status};
pub use config::{DirectoryConfig, TlsFiles};
pub use error::{DirectoryError, Refusal, Refusals};
pub use keys::{HostId, Key};
pub use publish::{Desired, Publisher, Write};
pub use records::{MacClaim, VtepRecord};
pub use view::{Change, Entry, View};

#[cfg(test)]
mod tests;
