//! [`Directory`]: the client. A thread of its own runs one store session at a time
//! (`session.rs`); weftd tells it what this host has ([`Directory::set_desired`]) and
//! hears what the others have through a [`Sink`]. While the store is away, nothing is
//! taken from the sink: forwarding goes on from what it last said.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use weft_packet::{MacAddr, Vni};

use crate::config::DirectoryConfig;
use crate::error::DirectoryError;
use crate::publish::Desired;
use crate::records::VtepRecord;
use crate::session;

/// Where the directory's news goes: the overlay ports of each VNI.
pub trait Sink: Send + Sync + 'static {
    /// Everything the directory has for `vni`, after a (re)synchronisation: the remote
    /// tunnel endpoints and the MACs behind them. What the sink had from earlier and is not
    /// here is gone.
    fn replace(&self, vni: Vni, remotes: &[VtepRecord], macs: &[(MacAddr, IpAddr)]);
    /// The VNI's remote tunnel endpoints are now `remotes`.
    fn remotes(&self, vni: Vni, remotes: &[VtepRecord]);
    /// MACs moved: to a remote endpoint, or (`None`) to none.
    fn macs(&self, vni: Vni, changes: &[(MacAddr, Option<IpAddr>)]);
}

/// What `weft directory status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// A session with the store is up.
    pub connected: bool,
    /// The store's revision last seen.
    pub revision: i64,
    /// The lease this host's entries live under (0: none).
    pub lease: i64,
    /// Remote tunnel endpoints known, over all VNIs carried.
    pub vteps: usize,
    /// MAC claims known (this host's included).
    pub macs: usize,
    /// MAC claims this host has written.
    pub published: usize,
    /// Writes the store took.
    pub writes: u64,
    /// Full re-reads of the VNIs carried (first one, reconnections, compacted history).
    pub resyncs: u64,
    /// Sessions started.
    pub sessions: u64,
    /// Entries refused, by reason (only those with a count).
    pub refused: Vec<(&'static str, u64)>,
    /// The last error, while it lasts (cleared when a session is up again).
    pub last_error: Option<String>,
}

/// State shared by the client's handle and its thread.
pub(crate) struct Shared {
    pub(crate) desired: Mutex<(u64, Desired)>,
    pub(crate) status: Mutex<Status>,
    pub(crate) stop: AtomicBool,
    pub(crate) wake: tokio::sync::Notify,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every holder leaves the value whole before it could panic.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running directory client; stopped (its lease revoked, so its entries go at once)
/// when dropped.
pub struct Directory {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Directory {
    /// Checks `config` (its TLS files are read now, so a bad one is an error here) and
    /// starts the client's thread. It connects in the background, and keeps trying.
    pub fn start(
        config: DirectoryConfig,
        sink: Arc<dyn Sink>,
    ) -> Result<Directory, DirectoryError> {
        let connect = session::ConnectSettings::new(&config)?;
        let shared = Arc::new(Shared {
            desired: Mutex::new((0, Desired::default())),
            status: Mutex::new(Status::default()),
            stop: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(DirectoryError::Runtime)?;
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("weft-directory".into())
            .spawn(move || {
                runtime.block_on(session::run(config, connect, for_thread, sink));
            })
            .map_err(DirectoryError::Runtime)?;
        Ok(Directory {
            shared,
            thread: Some(thread),
        })
    }

    /// What this host has now; written to the store within a publish interval (or when
    /// the store is back).
    pub fn set_desired(&self, desired: Desired) {
        let mut current = lock(&self.shared.desired);
        if current.1 != desired {
            current.0 += 1;
            current.1 = desired;
        }
    }

    /// The client's state.
    pub fn status(&self) -> Status {
        lock(&self.shared.status).clone()
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
