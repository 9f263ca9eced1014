//! Handing a live port to another process (weftd's zero-gap upgrade) without its frontend
//! noticing: no disconnect, no frame lost or sent twice.
//!
//! The old process suspends the port ([`VhostUserPort::suspend`]: its control thread parks
//! between two messages of the frontend, connection and device untouched), pauses its
//! workers after a batch, and takes a [`PortSnapshot`] and the descriptors it names
//! ([`SuspendedPort::snapshot`]): the listening socket (server mode), the connection, the
//! negotiated features, the memory table and its files, and each ring's addresses, the
//! index the data path goes on from, and its call and kick eventfds. It passes them on
//! (weftd: JSON and SCM_RIGHTS) and exits without running destructors; if the hand-over
//! fails it resumes the port instead ([`SuspendedPort::resume`]).
//!
//! The new process rebuilds the port from them ([`VhostUserPort::adopt`]) by replaying
//! what the frontend once asked, through the request handler's own code (`control.rs`):
//! the snapshot is untrusted, checked as a frontend's requests are (`restore.rs`), its
//! descriptors by index, kind and use (`fds.rs`). The `vhost` crate's handler keeps what it
//! negotiated private; it is restored by replaying the negotiation on a socket pair
//! (`replay.rs`). The control thread then serves the adopted connection, and afterwards
//! accepts on the adopted listener (server mode) or reconnects (client mode).
//!
//! Descriptor order in a snapshot (each named once, by index into the vector passed):
//! the listener (server mode), the connection, the memory regions in table order, then
//! per queue in index order its call and kick eventfds — whichever of them exist. The
//! indices in the snapshot are the contract; the order is only how `snapshot` builds it.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::VhostPortConfig;
use crate::error::VhostError;
use crate::server::park::SuspendRefused;
use crate::server::{VhostMode, VhostUserPort};
use crate::socket_dir::SocketDir;

mod error;
mod fds;
mod replay;
mod restore;
mod snapshot;

pub use error::HandoverError;
pub use fds::HandoverFds;

/// The version of [`PortSnapshot`] this binary writes and adopts.
pub const SNAPSHOT_VERSION: u32 = 1;

/// What another process needs to carry a port on. Descriptors are named by their index
/// in the vector passed beside it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PortSnapshot {
    /// [`SNAPSHOT_VERSION`] of the binary that wrote it.
    pub version: u32,
    /// Server mode: the listening socket.
    pub listener: Option<usize>,
    /// The frontend connected now, if one is.
    pub connection: Option<ConnectionSnapshot>,
}

/// A connected frontend and what it set up.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ConnectionSnapshot {
    /// The connected socket.
    pub socket: usize,
    /// The virtio features the frontend acknowledged (`SET_FEATURES`).
    pub features: u64,
    /// The protocol features it acknowledged (`SET_PROTOCOL_FEATURES`).
    pub protocol_features: u64,
    /// The memory table (`SET_MEM_TABLE`), if one was given.
    pub memory: Option<Vec<RegionSnapshot>>,
    /// Every queue of the port, by index (`2k`: pair `k`'s receive queue).
    pub rings: Vec<RingSnapshot>,
    /// A migrated guest's MAC still to be announced (`SEND_RARP` not yet sent on).
    pub announce: Option<[u8; 6]>,
    /// The MTU the frontend gave its guest (`NET_SET_MTU`), if it said.
    #[serde(default)]
    pub guest_mtu: Option<u32>,
}

/// One region of guest memory as the frontend described it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionSnapshot {
    /// Guest physical address.
    pub guest_phys_addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// The frontend's virtual address of it.
    pub user_addr: u64,
    /// Offset in its file.
    pub mmap_offset: u64,
    /// Its file.
    pub fd: usize,
}

/// A ring's addresses, in the frontend's virtual addresses.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAddrsSnapshot {
    /// The descriptor table.
    pub desc: u64,
    /// The available ring.
    pub avail: u64,
    /// The used ring.
    pub used: u64,
    /// The used ring's guest physical address for dirty logging (`VHOST_VRING_F_LOG`).
    pub log: Option<u64>,
}

/// What the frontend set up of one queue, and where its data path goes on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct RingSnapshot {
    /// `SET_VRING_NUM`, if given.
    pub size: Option<u16>,
    /// `SET_VRING_ADDR`, if given.
    pub addrs: Option<RingAddrsSnapshot>,
    /// A started ring: the next available entry the data path has not taken (every entry
    /// before it is in the used ring: nothing in flight). Otherwise `SET_VRING_BASE`.
    pub base: u16,
    /// What the last `SET_VRING_ENABLE` said, if one got through.
    pub enabled: Option<bool>,
    /// The ring runs (its kick came).
    pub started: bool,
    /// The call eventfd (`SET_VRING_CALL`), if any.
    pub call: Option<usize>,
    /// The kick eventfd of a started ring (none: the frontend polls).
    pub kick: Option<usize>,
}

/// A port whose control thread is parked between two messages, for a hand-over. Dropping
/// it resumes the port (as [`resume`](Self::resume)).
#[derive(Debug)]
pub struct SuspendedPort<'a> {
    port: &'a VhostUserPort,
    released: bool,
}

impl VhostUserPort {
    /// Stops the control thread at a message boundary without disconnecting the frontend,
    /// waiting at most `timeout`. A frontend halfway through a message makes this fail
    /// ([`HandoverError::SuspendTimeout`]); the port then keeps serving as before. The
    /// data path is not stopped: pause the workers that own the halves.
    pub fn suspend(&self, timeout: Duration) -> Result<SuspendedPort<'_>, VhostError> {
        self.signals.suspend(timeout).map_err(|e| match e {
            SuspendRefused::Timeout => HandoverError::SuspendTimeout(timeout),
            SuspendRefused::AlreadySuspended => HandoverError::AlreadySuspended,
            SuspendRefused::Stopping => HandoverError::Stopping,
        })?;
        Ok(SuspendedPort {
            port: self,
            released: false,
        })
    }

    /// A server-mode port's listener alone, as a snapshot with no connection: what
    /// outlives a crash of the process (weftd keeps it in systemd's file descriptor
    /// store), so that a frontend reconnecting meanwhile waits in its queue until a
    /// restarted process accepts it on [`adopt`](Self::adopt). `None` in client mode. It
    /// suspends and changes nothing.
    pub fn listener_record(&self) -> Result<Option<(PortSnapshot, Vec<OwnedFd>)>, VhostError> {
        let Some(listener) = &self.listener else {
            return Ok(None);
        };
        let fd = std::os::fd::AsFd::as_fd(listener)
            .try_clone_to_owned()
            .map_err(HandoverError::io("duplicating the listening socket"))?;
        let snapshot = PortSnapshot {
            version: SNAPSHOT_VERSION,
            listener: Some(0),
            connection: None,
        };
        Ok(Some((snapshot, vec![fd])))
    }

    /// A port rebuilt in this process from another process's `snapshot` and the
    /// descriptors it names (`fds`, owned here from now on: all closed on an error): the
    /// same socket (server mode: the listener passed, `name` in `dir` the file it is bound
    /// to, removed when this port is dropped; client mode: `name` in `dir` to reconnect to
    /// after this frontend), the connected frontend served from where the other process
    /// stopped. Everything in the snapshot is checked as the frontend's requests are.
    pub fn adopt(
        dir: Arc<SocketDir>,
        name: &OsStr,
        mode: VhostMode,
        config: VhostPortConfig,
        snapshot: PortSnapshot,
        fds: Vec<OwnedFd>,
    ) -> Result<VhostUserPort, VhostError> {
        restore::adopt(dir, name, mode, config, snapshot, fds)
    }
}

impl SuspendedPort<'_> {
    /// What another process needs to carry on: the description and the descriptors
    /// (duplicates, owned by the caller) it names by index. Call while the port's halves
    /// are not running (the workers are paused after a batch), so that ring positions are
    /// final. Every running ring's guest is interrupted first (a notification the policy
    /// held back must not be lost; a spurious one is harmless). Refused, the port
    /// unchanged, while a live migration logs, or while a ring has chains in flight or is
    /// broken ([`HandoverError`]).
    pub fn snapshot(&self) -> Result<(PortSnapshot, Vec<OwnedFd>), VhostError> {
        Ok(snapshot::take(self.port)?)
    }

    /// Back to serving the same connection as if nothing happened (the hand-over failed).
    pub fn resume(self) {}

    /// The hand-over succeeded: another process serves the connection and the socket now.
    /// The port stays parked; dropping it then ends its thread without disconnecting the
    /// frontend or removing the socket. (weftd exits without dropping anything instead;
    /// this is for a process that goes on.)
    pub fn release(mut self) {
        self.released = true;
        self.port.handed_over.store(true, Ordering::Release);
    }
}

impl Drop for SuspendedPort<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.port.signals.resume();
        }
    }
}

#[cfg(test)]
mod tests;
