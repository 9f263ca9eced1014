//! Handing the live ports to a new weftd (an upgrade without a traffic gap).
//!
//! The two processes talk over a Unix stream socket in the runtime directory: typed
//! messages (JSON) with the descriptors they concern attached as `SCM_RIGHTS` ([`channel`]),
//! in the order [`protocol`] describes. [`give`] is the running weftd's side, [`take`] the
//! new one's.

pub mod channel;
pub mod give;
pub mod protocol;
pub mod take;

pub use channel::{HandoverChannel, HandoverError, MAX_FDS_PER_MESSAGE, MAX_MESSAGE_BYTES};

#[cfg(test)]
mod tests;
