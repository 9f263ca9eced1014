//! Handing a live memif port to another process (weftd's zero-gap upgrade) without its
//! peer noticing: no DISCONNECT, no new handshake, no frame lost or read twice.
//!
//! The old process asks the port's control thread to stop ([`MemifHandoverSource::suspend`]):
//! between two passes of its loop it describes the port ([`MemifHandover`]), duplicates the
//! descriptors the description names, and parks until the [`SuspendedMemif`] it handed out
//! is dropped. With the workers paused after a batch, every slot a receive half read was
//! given back and every frame a transmit half wrote was published, so one position per
//! ring says where the data path goes on. Those positions are weft's own copies, not the
//! indexes in shared memory, which the peer may have written anything into.
//!
//! The new process rebuilds the port from them ([`MemifPort::adopt`](crate::MemifPort::adopt),
//! `handover/adopt.rs`): the description is untrusted and checked as a peer's messages
//! are; the descriptors by index, kind and use.
//!
//! Only the connected peer is carried. A peer still in its handshake is dropped when the
//! old process exits (a client retries; weft as client reconnects itself).
//!
//! Descriptor order (each named once, by index into the vector passed): the listener
//! (server), the connection, the regions in index order, then each ring's interrupt, the
//! receive rings first. The indices are the contract; the order is only how the old side
//! builds it.

mod adopt;
mod describe;

use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_sys::event::EventFd;

use crate::config::Role;
use crate::layout::ClientLayout;

pub(crate) use adopt::{adopt, AdoptedSession};
pub(crate) use describe::{describe, Connected};

/// The version of [`MemifHandover`] this binary writes and adopts.
pub const HANDOVER_VERSION: u32 = 1;

/// What another process needs to carry a memif port on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MemifHandover {
    /// [`HANDOVER_VERSION`] of the binary that wrote it.
    pub version: u32,
    /// The port's role.
    pub role: Role,
    /// The port's interface id.
    pub id: u32,
    /// Server: the listening socket.
    pub listener: Option<usize>,
    /// The connected peer, if one is.
    pub connection: Option<ConnectionHandover>,
}

/// A connected peer: its socket, the memory and rings.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ConnectionHandover {
    /// The control socket.
    pub socket: usize,
    /// Its application name (for `port show`).
    pub peer_name: String,
    /// Its interface name.
    pub peer_interface: String,
    /// Bytes per buffer.
    pub buffer_size: u32,
    /// The regions, by index.
    pub regions: Vec<RegionHandover>,
    /// Client: how weft laid out its one region (its buffers are found from it, never
    /// from what the server writes into a descriptor).
    pub layout: Option<ClientLayout>,
    /// The rings weft consumes, by index.
    pub rx: Vec<RingHandover>,
    /// The rings weft produces into, by index.
    pub tx: Vec<RingHandover>,
}

/// One region.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionHandover {
    /// Bytes.
    pub size: u64,
    /// Its file.
    pub fd: usize,
}

/// One ring and where weft goes on in it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingHandover {
    /// Its region.
    pub region: u16,
    /// Its offset there.
    pub offset: u64,
    /// Slots, as log2.
    pub log2: u8,
    /// Its interrupt eventfd.
    pub interrupt: usize,
    /// A ring weft consumes: the next slot to read (all before it given back). One it
    /// produces into: the next slot to fill (all before it published).
    pub position: u16,
    /// A ring a client consumes: the slots it had offered the server up to here (0, with
    /// `position` 0, when it never offered any).
    pub offered: Option<u16>,
}

/// Why a port could not be handed over or taken over.
#[derive(Debug, thiserror::Error)]
pub enum MemifHandoverError {
    /// The control thread did not answer in time.
    #[error("the memif control thread did not stop within {0:?}; the port keeps serving")]
    SuspendTimeout(Duration),
    /// The port is closing (or its control thread is gone).
    #[error("the memif port is closing")]
    Stopping,
    /// A connection broke and has not been dropped yet.
    #[error("the memif connection is broken ({0}); hand the port over once it is dropped")]
    Broken(String),
    /// The description is of another version.
    #[error("memif hand-over version {found}, this binary adopts version {expected}")]
    Version {
        /// The description's version.
        found: u32,
        /// The version this binary reads.
        expected: u32,
    },
    /// The description is not of this port.
    #[error("the hand-over describes {found}, the port is {expected}")]
    Mismatch {
        /// What the port is.
        expected: String,
        /// What the description says.
        found: String,
    },
    /// Something in the description does not hold together.
    #[error("memif hand-over: {0}")]
    Invalid(String),
    /// A descriptor was not what the description says.
    #[error(transparent)]
    Fds(#[from] weft_vhost::HandoverError),
    /// Mapping the regions failed.
    #[error("memif hand-over: {0}")]
    Memory(#[from] crate::memory::MemoryError),
    /// A system call failed.
    #[error("memif hand-over: {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
}

pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> MemifHandoverError {
    move |source| MemifHandoverError::Io { what, source }
}

/// A description and its descriptors.
pub type Described = (MemifHandover, Vec<OwnedFd>);

/// What the control thread is asked: describe the port, answer, then park until
/// `resume` says (or its sender is dropped).
pub(crate) struct Request {
    pub(crate) reply: mpsc::Sender<Result<Described, MemifHandoverError>>,
    pub(crate) resume: mpsc::Receiver<()>,
}

/// A handle that asks a port's control thread for a hand-over; kept by whoever may hand
/// the port over (it outlives the port's halves being moved onto workers).
#[derive(Clone)]
pub struct MemifHandoverSource {
    pub(crate) requests: mpsc::Sender<Request>,
    pub(crate) wake: Arc<EventFd>,
    /// Server: a duplicate of the listener, for [`listener_record`](Self::listener_record).
    pub(crate) listener: Option<Arc<OwnedFd>>,
    pub(crate) role: Role,
    pub(crate) id: u32,
}

impl std::fmt::Debug for MemifHandoverSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemifHandoverSource")
            .field("role", &self.role)
            .field("id", &self.id)
            .finish()
    }
}

/// A port whose control thread is parked for a hand-over; dropping it resumes the port.
#[derive(Debug)]
pub struct SuspendedMemif {
    _resume: mpsc::Sender<()>,
}

impl MemifHandoverSource {
    /// Stops the port's control thread between two passes of its loop, waiting at most
    /// `timeout`, and describes the port. Pause the workers that own its halves first
    /// (after a batch). The port stays suspended while the returned guard lives.
    pub fn suspend(
        &self,
        timeout: Duration,
    ) -> Result<(SuspendedMemif, Described), MemifHandoverError> {
        let (reply, answer) = mpsc::channel();
        let (resume_tx, resume) = mpsc::channel();
        self.requests
            .send(Request { reply, resume })
            .map_err(|_| MemifHandoverError::Stopping)?;
        let _ = self.wake.write(1);
        let described = match answer.recv_timeout(timeout) {
            Ok(result) => result?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(MemifHandoverError::SuspendTimeout(timeout))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(MemifHandoverError::Stopping),
        };
        Ok((SuspendedMemif { _resume: resume_tx }, described))
    }

    /// A server's listener alone, described with no connection: what outlives a crash
    /// of the process (weftd keeps it in systemd's file descriptor store), so that a
    /// client reconnecting meanwhile waits in its queue. `None` for a client. Nothing is
    /// paused.
    pub fn listener_record(&self) -> Result<Option<Described>, MemifHandoverError> {
        let Some(listener) = &self.listener else {
            return Ok(None);
        };
        let fd = listener
            .try_clone()
            .map_err(io("duplicating the listening socket"))?;
        Ok(Some((
            MemifHandover {
                version: HANDOVER_VERSION,
                role: self.role,
                id: self.id,
                listener: Some(0),
                connection: None,
            },
            vec![fd],
        )))
    }
}

#[cfg(test)]
mod tests;
