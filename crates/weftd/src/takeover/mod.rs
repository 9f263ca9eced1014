//! Handing the live ports to a new weftd (an upgrade without a traffic gap).
//!
//! The two processes talk over a Unix stream socket: typed messages (JSON) with the
//! descriptors they concern attached as `SCM_RIGHTS` ([`channel`]). What is handed over,
//! and in which order, builds on this.

pub mod channel;

pub use channel::{HandoverChannel, HandoverError, MAX_FDS_PER_MESSAGE, MAX_MESSAGE_BYTES};
