//! What a port's device leaves to the weftd that takes over from this one (`weftd
//! --takeover`): kept from when the device was opened, because its halves then run on the
//! workers where the control plane cannot reach them.
//!
//! [`Keep`] is the live side (duplicated descriptors and handles); [`Carried`] is what
//! travels, as JSON, with the descriptors beside it in the order [`Keep::carry`] gives them.
//! The receiving weftd treats it as untrusted: another binary wrote it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::tap::TapKeep;

/// What a port's device keeps for a takeover.
#[derive(Clone, Default)]
pub enum Keep {
    /// Nothing: the new weftd opens the port afresh (an AF_PACKET port: the new socket is
    /// bound before the old one closes, so only frames of the hand-over instant are lost).
    #[default]
    Reopen,
    /// A TAP queue: the device itself, with its addresses, stays.
    Tap(Arc<TapKeep>),
}

/// A port's device as it travels to the new weftd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Carried {
    /// Open it afresh.
    Reopen,
    /// A TAP queue (one descriptor).
    Tap {
        /// The interface's name, as the kernel gave it.
        ifname: String,
        /// Its MTU when it was opened.
        mtu: u32,
        /// The offloads the kernel accepted.
        csum: bool,
        /// TCP segmentation offload.
        tso: bool,
        /// UDP segmentation offload.
        uso: bool,
        /// weft created it: it persists across a crash and goes when the port is deleted.
        owned: bool,
    },
}

/// Why a carried device cannot be taken over.
#[derive(Debug, thiserror::Error)]
pub enum CarryError {
    /// The descriptors are not what the description says.
    #[error("{0}")]
    Mismatch(String),
    /// Duplicating a descriptor failed.
    #[error("cannot duplicate a descriptor: {0}")]
    Dup(#[from] std::io::Error),
}

impl Keep {
    /// The description and duplicates of the descriptors to send (the device keeps its own).
    pub fn carry(&self) -> Result<(Carried, Vec<OwnedFd>), CarryError> {
        match self {
            Keep::Reopen => Ok((Carried::Reopen, Vec::new())),
            Keep::Tap(tap) => Ok((
                tap.carried(),
                vec![tap.queue().as_fd().try_clone_to_owned()?],
            )),
        }
    }
}

impl Carried {
    /// How many descriptors travel with it.
    pub fn fd_count(&self) -> usize {
        match self {
            Carried::Reopen => 0,
            Carried::Tap { .. } => 1,
        }
    }
}
