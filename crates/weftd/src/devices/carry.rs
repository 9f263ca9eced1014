//! What a port's device leaves to the weftd that takes over from this one (`weftd
//! --takeover`): kept from when the device was opened, because its halves then run on the
//! workers where the control plane cannot reach them.
//!
//! [`Keep`] is the live side (duplicated descriptors and handles); [`Carried`] is what
//! travels, as JSON, with the descriptors beside it in the order its driver names them.
//! [`Leaving`] is a device on its way out: dropping it (the hand-over failed) gives the
//! device back to this weftd. The receiving weftd treats every [`Carried`] as untrusted:
//! another binary wrote it.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_memif::{MemifHandover, MemifHandoverSource, SuspendedMemif};
use weft_overlay::tcp_link::{TcpLinkHandover, TcpLinkHandoverSource};
use weft_overlay::{VxlanHandover, VxlanHandoverSource};
use weft_vhost::{PortSnapshot, SuspendedPort, VhostUserPort};

use super::tap::TapKeep;

/// How long a vhost-user or memif port's control thread may take to reach a message
/// boundary.
const SUSPEND_TIMEOUT: Duration = Duration::from_secs(1);

/// What a port's device keeps for a takeover.
#[derive(Clone, Default)]
pub enum Keep {
    /// Nothing: the new weftd opens the port afresh (an AF_PACKET port: the new socket is
    /// bound before the old one closes, so only frames of the hand-over instant are lost).
    #[default]
    Reopen,
    /// A TAP's queues: the device itself, with its addresses, stays.
    Tap(Arc<TapKeep>),
    /// A vhost-user port: its listener, connection, guest memory and rings.
    Vhost(Arc<VhostUserPort>),
    /// A memif port: its listener, connection, shared memory and rings.
    Memif(MemifHandoverSource),
    /// A VXLAN port: its sockets and learned remotes.
    Vxlan(VxlanHandoverSource),
    /// A TCP link: its listener, connection and buffered bytes.
    TcpLink(TcpLinkHandoverSource),
}

/// A port's device as it travels to the new weftd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Carried {
    /// Open it afresh.
    Reopen,
    /// A TAP (one descriptor per queue).
    Tap {
        /// The interface's name, as the kernel gave it.
        ifname: String,
        /// How many queues (descriptors) it has; left out when one, as weftd before
        /// multiqueue TAPs wrote it.
        #[serde(default = "one_queue", skip_serializing_if = "is_one_queue")]
        queues: u16,
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
    /// A vhost-user port (descriptors named by index in the snapshot).
    VhostUser {
        /// The port's state.
        snapshot: PortSnapshot,
    },
    /// A memif port (descriptors named by index).
    Memif {
        /// The port's state.
        handover: MemifHandover,
    },
    /// A VXLAN port (descriptors named by index).
    Vxlan {
        /// The port's state.
        handover: VxlanHandover,
    },
    /// A TCP link (descriptors named by index).
    TcpLink {
        /// The link's state.
        handover: TcpLinkHandover,
    },
}

/// Why a carried device cannot be handed over or taken over.
#[derive(Debug, thiserror::Error)]
pub enum CarryError {
    /// The descriptors are not what the description says.
    #[error("{0}")]
    Mismatch(String),
    /// Duplicating a descriptor failed.
    #[error("cannot duplicate a descriptor: {0}")]
    Dup(#[from] std::io::Error),
    /// The vhost-user driver refused.
    #[error(transparent)]
    Vhost(#[from] weft_vhost::VhostError),
    /// The memif driver refused.
    #[error(transparent)]
    Memif(#[from] weft_memif::MemifHandoverError),
    /// The overlay driver refused.
    #[error(transparent)]
    Overlay(#[from] weft_overlay::OverlayError),
}

/// A device on its way to the new weftd: what to send, and what gives it back to this one
/// when dropped (a vhost-user port's control thread parked, a TCP link's thread parked).
pub struct Leaving<'a> {
    /// The description.
    pub carried: Carried,
    /// Its descriptors (duplicates).
    pub fds: Vec<OwnedFd>,
    _undo: Undo<'a>,
}

/// What dropping a [`Leaving`] undoes.
enum Undo<'a> {
    Nothing,
    Vhost {
        /// Resumes the port when dropped.
        _suspended: SuspendedPort<'a>,
    },
    TcpLink(TcpLinkHandoverSource),
    Memif {
        /// Resumes the port when dropped.
        _suspended: SuspendedMemif,
    },
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        // A suspended vhost-user port resumes when its guard drops.
        if let Undo::TcpLink(source) = self {
            source.resume();
        }
    }
}

impl Keep {
    /// Takes the device out for a hand-over (with the workers held): its description and
    /// duplicates of its descriptors; the device itself stays until this process exits.
    pub fn carry(&self) -> Result<Leaving<'_>, CarryError> {
        let leaving = |carried, fds, undo| Leaving {
            carried,
            fds,
            _undo: undo,
        };
        Ok(match self {
            Keep::Reopen => leaving(Carried::Reopen, Vec::new(), Undo::Nothing),
            Keep::Tap(tap) => leaving(tap.carried(), tap.queue_fds()?, Undo::Nothing),
            Keep::Vhost(port) => {
                let suspended = port.suspend(SUSPEND_TIMEOUT)?;
                let (snapshot, fds) = suspended.snapshot()?;
                leaving(
                    Carried::VhostUser { snapshot },
                    fds,
                    Undo::Vhost {
                        _suspended: suspended,
                    },
                )
            }
            Keep::Memif(source) => {
                let (suspended, (handover, fds)) = source.suspend(SUSPEND_TIMEOUT)?;
                leaving(
                    Carried::Memif { handover },
                    fds,
                    Undo::Memif {
                        _suspended: suspended,
                    },
                )
            }
            Keep::Vxlan(source) => {
                let (handover, fds) = source.handover()?;
                leaving(Carried::Vxlan { handover }, fds, Undo::Nothing)
            }
            Keep::TcpLink(source) => {
                // From here the link's thread is parked: resumed by the guard's drop.
                let undo = Undo::TcpLink(source.clone());
                let (handover, fds) = source.handover()?;
                leaving(Carried::TcpLink { handover }, fds, undo)
            }
        })
    }
}

impl Keep {
    /// What of the device outlives a crash of weftd, kept in systemd's file descriptor
    /// store (`daemon/fd_store.rs`): the part that changes only when the port is opened,
    /// so that the record never needs refreshing. A TAP's queue (the device and its
    /// addresses), a server-mode vhost-user or memif port's listener (a peer reconnecting
    /// meanwhile waits in its queue), a VXLAN port's sockets (same bound addresses;
    /// datagrams wait in the queue), a listening TCP link's listener. `None`: nothing
    /// worth keeping (AF_PACKET, client mode, a connecting link). Nothing is paused.
    pub fn record(&self) -> Result<Option<(Carried, Vec<OwnedFd>)>, CarryError> {
        Ok(match self {
            Keep::Reopen => None,
            Keep::Tap(tap) => Some((tap.carried(), tap.queue_fds()?)),
            Keep::Vhost(port) => port
                .listener_record()?
                .map(|(snapshot, fds)| (Carried::VhostUser { snapshot }, fds)),
            Keep::Memif(source) => source
                .listener_record()?
                .map(|(handover, fds)| (Carried::Memif { handover }, fds)),
            Keep::Vxlan(source) => {
                let (handover, fds) = source.sockets_record()?;
                Some((Carried::Vxlan { handover }, fds))
            }
            Keep::TcpLink(source) => source
                .listener_record()?
                .map(|(handover, fds)| (Carried::TcpLink { handover }, fds)),
        })
    }
}

impl Carried {
    /// How many descriptors travel with it, where the description alone says (the drivers
    /// that name theirs by index check their own).
    pub fn fd_count(&self) -> Option<usize> {
        match self {
            Carried::Reopen => Some(0),
            Carried::Tap { queues, .. } => Some(usize::from(*queues)),
            Carried::VhostUser { .. }
            | Carried::Memif { .. }
            | Carried::Vxlan { .. }
            | Carried::TcpLink { .. } => None,
        }
    }
}

fn one_queue() -> u16 {
    1
}

fn is_one_queue(queues: &u16) -> bool {
    *queues == 1
}
