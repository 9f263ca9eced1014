//! A vhost-user port: in server mode weft listens on a Unix socket and a frontend (QEMU,
//! DPDK virtio-user) connects; in client mode the frontend listens and weft connects,
//! reconnecting forever (with backoff) when the frontend is not there yet or goes away. One
//! control thread per port serves one frontend at a time (`serve.rs`), whichever way it got
//! the stream (`source.rs`); between frontends the rings are stopped and the port's halves
//! stay on their switch.
//!
//! The control thread only ever blocks on the socket (a frontend that stops halfway through
//! a message holds it until it hangs up or the port is dropped: see `serve.rs`), on the
//! rings' mutexes (held by the data path for one call at most) and on its doorbell
//! (`park.rs`: stop, or park between two messages for a hand-over to another process);
//! the data path never waits for it.

use std::ffi::{OsStr, OsString};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weft_switch::PortCaps;

use crate::config::VhostPortConfig;
use crate::counters::{LogLimiter, QueueFault, QueueStats};
use crate::device::{DeviceShared, LaneShare};
use crate::error::VhostError;
use crate::rx::VhostPortRx;
use crate::socket_dir::{FileId, SocketDir, SocketDirError};
use crate::tx::VhostPortTx;

pub(crate) mod park;
pub(crate) mod serve;
mod side_requests;
pub(crate) mod source;

use park::Signals;
use serve::{serve, Connection, Ready, Served};
#[cfg(any(test, fuzzing))]
pub(crate) use side_requests::{serve_side_request, Side};
use source::StreamSource;

/// Which side of the socket the port takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VhostMode {
    /// weft creates the socket and the frontend connects (QEMU `-chardev socket,path=P`).
    #[default]
    Server,
    /// The frontend creates the socket (QEMU `-chardev socket,path=P,server=on,wait=off`)
    /// and weft connects, and reconnects after the frontend or weft restarts.
    Client,
}

/// The counters of a port's queues: totals over the queue pairs, and each pair's own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VhostPortStats {
    /// The guest's receive queues (all pairs): frames the port transmitted to the guest.
    pub to_guest: QueueStats,
    /// The guest's transmit queues (all pairs): frames the port received from the guest.
    pub from_guest: QueueStats,
    /// Each queue pair's counters, pair 0 first (one entry without multiqueue).
    pub pairs: Vec<QueuePairStats>,
    /// Memory tables refused, per [`MemoryRefusal::index`](crate::MemoryRefusal::index).
    pub memory_refusals: [u64; crate::MemoryRefusal::ALL.len()],
    /// Live migration: whether the port logs the pages it writes now (the frontend turned
    /// logging on and gave a log), and the bytes of that log.
    pub logging: bool,
    /// The bytes of the dirty log in use (0 while not logging).
    pub log_bytes: u64,
    /// Pages of guest memory whose dirty bit the port set (they were clean).
    pub pages_logged: u64,
    /// Pages written that lay beyond the frontend's log (not marked).
    pub pages_beyond_log: u64,
    /// Logging requests refused, per [`LogRefusal::index`](crate::LogRefusal::index).
    pub log_refusals: [u64; crate::LogRefusal::ALL.len()],
    /// Guests announced from this port after a migration (`SEND_RARP`).
    pub announcements: u64,
    /// The MTU the frontend gave its guest (`NET_SET_MTU`, QEMU `host_mtu`), once it said.
    pub guest_mtu: Option<u32>,
    /// `NET_SET_MTU` requests refused (not negotiated, or outside the port's MTU).
    pub mtu_refusals: u64,
}

/// The counters of one queue pair.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueuePairStats {
    /// The pair's receive queue (`2k`): frames the port transmitted to the guest.
    pub to_guest: QueueStats,
    /// The pair's transmit queue (`2k + 1`): frames the port received from the guest.
    pub from_guest: QueueStats,
}

/// The state of one of the port's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStatus {
    /// The frontend started the ring (and has not stopped it).
    pub running: bool,
    /// The frontend enabled it.
    pub enabled: bool,
    /// Why it stopped being served, if it broke.
    pub fault: Option<QueueFault>,
}

/// A vhost-user port serving its frontend. Dropping it stops the control thread promptly,
/// disconnects the frontend and (in server mode) removes the socket it created.
pub struct VhostUserPort {
    pub(crate) shared: Arc<DeviceShared>,
    path: PathBuf,
    mode: VhostMode,
    /// Connections served so far (counting the current one).
    connections: Arc<AtomicU64>,
    /// Stops and parks the control thread.
    pub(crate) signals: Arc<Signals>,
    /// The connection being served, so that dropping the port can cut it (and a hand-over
    /// can describe it).
    pub(crate) served: Arc<Mutex<Option<Served>>>,
    /// Server mode: the listening socket (the control thread accepts on its own handle of
    /// it), for a hand-over.
    pub(crate) listener: Option<UnixListener>,
    thread: Option<JoinHandle<()>>,
    halves_taken: bool,
    /// The socket file this port bound (server mode): on drop it removes the file, through
    /// the held directory, only if it is still that one.
    pub(crate) created: Option<CreatedSocket>,
    /// Set once another process serves the connection and the socket (a hand-over that
    /// succeeded): dropping the port then touches neither.
    pub(crate) handed_over: AtomicBool,
}

/// A socket a port created: where, and which file it was.
pub(crate) struct CreatedSocket {
    pub(crate) dir: Arc<SocketDir>,
    pub(crate) name: OsString,
    pub(crate) id: FileId,
}

impl std::fmt::Debug for VhostUserPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostUserPort")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl VhostUserPort {
    /// Creates the socket at `path` and starts serving frontends on it. An old socket left
    /// at `path` that nobody listens on is replaced; any other file there is an error. The
    /// parent directory is opened with no symlink followed (see [`SocketDir`]); which
    /// directories are allowed is the caller's policy (weftd confines them to its
    /// `vhost_socket_dirs`, through [`listen_in`](Self::listen_in)).
    pub fn listen(path: impl AsRef<Path>, config: VhostPortConfig) -> Result<Self, VhostError> {
        let (dir, name) = split_socket_path(path.as_ref())?;
        Self::listen_in(dir, &name, config)
    }

    /// Creates the socket `name` in the held directory `dir` and starts serving frontends
    /// on it. Dropping the port removes the socket, through `dir`, if it is still the one
    /// it created.
    pub fn listen_in(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: VhostPortConfig,
    ) -> Result<Self, VhostError> {
        let shared = DeviceShared::new(config)?;
        let (listener, id) = dir.bind_listener(name)?;
        let path = dir.display_path(name);
        let kept = listener
            .try_clone()
            .map_err(VhostError::io("duplicating the listening socket"))?;
        let mut port = Self::start(
            shared,
            path,
            VhostMode::Server,
            StreamSource::Accept(listener),
            None,
        )?;
        port.listener = Some(kept);
        port.created = Some(CreatedSocket {
            dir,
            name: name.to_os_string(),
            id,
        });
        Ok(port)
    }

    /// Connects to the frontend's socket at `path` and serves it; when the socket is not
    /// there yet, refuses, or the connection drops, tries again forever (waits from 50 ms
    /// doubling to 1 s). Never fails for a missing socket; never removes it. The parent
    /// directory must exist (it is held open, see [`connect_in`](Self::connect_in)).
    pub fn connect(path: impl AsRef<Path>, config: VhostPortConfig) -> Result<Self, VhostError> {
        let (dir, name) = split_socket_path(path.as_ref())?;
        Self::connect_in(dir, &name, config)
    }

    /// [`connect`](Self::connect) to the socket `name` in the held directory `dir`: only a
    /// socket there is connected to, never a symlink or a file swapped in for it.
    pub fn connect_in(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: VhostPortConfig,
    ) -> Result<Self, VhostError> {
        SocketDir::check_name(name)?;
        let shared = DeviceShared::new(config)?;
        let path = dir.display_path(name);
        let source = StreamSource::connect(dir, name.to_os_string());
        Self::start(shared, path, VhostMode::Client, source, None)
    }

    /// [`listen`](Self::listen) or [`connect`](Self::connect), as `mode` says.
    pub fn open(
        path: impl AsRef<Path>,
        mode: VhostMode,
        config: VhostPortConfig,
    ) -> Result<Self, VhostError> {
        let (dir, name) = split_socket_path(path.as_ref())?;
        Self::open_in(dir, &name, mode, config)
    }

    /// [`listen_in`](Self::listen_in) or [`connect_in`](Self::connect_in), as `mode` says.
    pub fn open_in(
        dir: Arc<SocketDir>,
        name: &OsStr,
        mode: VhostMode,
        config: VhostPortConfig,
    ) -> Result<Self, VhostError> {
        match mode {
            VhostMode::Server => Self::listen_in(dir, name, config),
            VhostMode::Client => Self::connect_in(dir, name, config),
        }
    }

    /// Starts the control thread serving `first` (a connection adopted from another
    /// process), if any, then taking frontends from `source`.
    pub(crate) fn start(
        shared: Arc<DeviceShared>,
        path: PathBuf,
        mode: VhostMode,
        source: StreamSource,
        first: Option<Connection>,
    ) -> Result<Self, VhostError> {
        let signals = Arc::new(Signals::new().map_err(VhostError::io("creating an eventfd"))?);
        let served = Arc::new(Mutex::new(None));
        let connections = Arc::new(AtomicU64::new(0));
        if first.is_some() {
            // Connected from the start, not from when the thread gets to it.
            shared.connected.store(true, Ordering::Release);
        }
        let thread = {
            let (served, shared, connections, signals) = (
                Arc::clone(&served),
                Arc::clone(&shared),
                Arc::clone(&connections),
                Arc::clone(&signals),
            );
            std::thread::Builder::new()
                .name("weft-vhost-ctl".into())
                .spawn(move || {
                    control_loop(source, first, &shared, &signals, &served, &connections)
                })
                .map_err(VhostError::io("starting the control thread"))?
        };
        Ok(VhostUserPort {
            shared,
            path,
            mode,
            connections,
            signals,
            served,
            listener: None,
            thread: Some(thread),
            halves_taken: false,
            created: None,
            handed_over: AtomicBool::new(false),
        })
    }

    /// The receive and transmit halves, to hand to a switch (once).
    pub fn take_halves(&mut self) -> Result<(VhostPortRx, VhostPortTx), VhostError> {
        let mut halves = self.take_lane_halves(1)?;
        halves.pop().ok_or(VhostError::HalvesTaken)
    }

    /// One pair of halves per lane of a switch run by `lanes` worker threads
    /// (`weft_switch::lanes`), to hand to them (once). Lane `i` receives from, and
    /// transmits into, the queue pairs `p` with `p % lanes == i`; a lane none of whose
    /// pairs the guest uses transmits into another lane's, sharing it under its lock.
    pub fn take_lane_halves(
        &mut self,
        lanes: usize,
    ) -> Result<Vec<(VhostPortRx, VhostPortTx)>, VhostError> {
        if self.halves_taken {
            return Err(VhostError::HalvesTaken);
        }
        if !(1..=usize::from(crate::config::MAX_QUEUE_PAIRS)).contains(&lanes) {
            return Err(VhostError::BadLanes(lanes));
        }
        let halves = (0..lanes)
            .map(|index| {
                let lane = LaneShare { index, lanes };
                Ok((
                    VhostPortRx::new(Arc::clone(&self.shared), lane)?,
                    VhostPortTx::new(Arc::clone(&self.shared), lane),
                ))
            })
            .collect::<Result<Vec<_>, VhostError>>()?;
        self.halves_taken = true;
        Ok(halves)
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether weft listens (server) or connects (client).
    pub fn mode(&self) -> VhostMode {
        self.mode
    }

    /// Frontend connections served so far, the current one included (a reconnect counts).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Acquire)
    }

    /// True while a frontend is connected.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// True when both queues of the first pair are being served (the pair every frontend
    /// uses; with multiqueue the guest enables the others as it wants).
    pub fn is_running(&self) -> bool {
        self.shared
            .vrings
            .iter()
            .take(crate::vring::NUM_QUEUES)
            .all(|v| v.lock().serving())
    }

    /// The state of every queue by index: the guest's receive queue of pair `k` at `2k`,
    /// its transmit queue at `2k + 1`.
    pub fn queue_status(&self) -> Vec<QueueStatus> {
        self.shared
            .vrings
            .iter()
            .map(|v| {
                let st = v.lock();
                QueueStatus {
                    running: st.running,
                    enabled: st.enabled,
                    fault: st.fault,
                }
            })
            .collect()
    }

    /// Waits until both queues of the first pair are served; false on timeout.
    pub fn wait_running(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.is_running()
    }

    /// The features the frontend accepted (0 while none).
    pub fn features(&self) -> u64 {
        self.shared.features().0
    }

    /// What the transmit half can take now (from the negotiated features).
    pub fn caps(&self) -> PortCaps {
        self.shared.caps()
    }

    /// The MTU the port was configured with (what it offers the frontend).
    pub fn configured_mtu(&self) -> usize {
        self.shared.config.mtu
    }

    /// Changes whenever [`caps`](Self::caps) may have changed.
    pub fn caps_generation(&self) -> u64 {
        self.shared.caps_generation()
    }

    /// The port's counters.
    pub fn stats(&self) -> VhostPortStats {
        let (logging, log_bytes) = self.shared.logging();
        let log = &self.shared.log_counters;
        let mut stats = VhostPortStats {
            memory_refusals: self.shared.memory_refusals.snapshot(),
            logging,
            log_bytes,
            pages_logged: log.pages.load(Ordering::Relaxed),
            pages_beyond_log: log.beyond.load(Ordering::Relaxed),
            log_refusals: self.shared.log_refusals.snapshot(),
            announcements: self.shared.announcements.load(Ordering::Relaxed),
            guest_mtu: Some(self.shared.guest_mtu.load(Ordering::Relaxed)).filter(|m| *m > 0),
            mtu_refusals: self.shared.mtu_refusals.load(Ordering::Relaxed),
            ..VhostPortStats::default()
        };
        for pair in self.shared.vrings.chunks(crate::vring::NUM_QUEUES) {
            let (Some(rx), Some(tx)) = (pair.first(), pair.get(1)) else {
                continue;
            };
            let p = QueuePairStats {
                to_guest: rx.counters.snapshot(),
                from_guest: tx.counters.snapshot(),
            };
            stats.to_guest.accumulate(&p.to_guest);
            stats.from_guest.accumulate(&p.from_guest);
            stats.pairs.push(p);
        }
        stats
    }
}

impl Drop for VhostUserPort {
    fn drop(&mut self) {
        self.signals.stop();
        // After a hand-over the connection and the socket are another process's: shutting
        // the stream down would cut the frontend off there too (it is one socket), and the
        // socket file is the one it listens on.
        let handed_over = self.handed_over.load(Ordering::Acquire);
        if !handed_over {
            if let Some(conn) = lock(&self.served).as_ref() {
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if handed_over {
            return;
        }
        if let Some(s) = self.created.take() {
            if let Err(e) = s.dir.remove_socket(&s.name, s.id) {
                tracing::warn!(error = %e, "cannot remove the vhost-user socket");
            }
        }
    }
}

/// The held parent directory of `path` and the socket's name in it.
fn split_socket_path(path: &Path) -> Result<(Arc<SocketDir>, OsString), VhostError> {
    let name = path
        .file_name()
        .ok_or_else(|| SocketDirError::BadName {
            name: path.as_os_str().to_os_string(),
        })?
        .to_os_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((Arc::new(SocketDir::open(parent)?), name))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn control_loop(
    mut source: StreamSource,
    first: Option<Connection>,
    shared: &Arc<DeviceShared>,
    signals: &Signals,
    served: &Mutex<Option<Served>>,
    connections: &AtomicU64,
) {
    let mut log = LogLimiter::new();
    if let Some(conn) = first {
        connections.fetch_add(1, Ordering::AcqRel);
        if serve(conn, shared, signals, served, &mut log) == Ready::Stop {
            return;
        }
    }
    while let Some(stream) = source.next_stream(signals, &mut log) {
        connections.fetch_add(1, Ordering::AcqRel);
        let Some(conn) = Connection::fresh(stream, shared) else {
            continue;
        };
        if serve(conn, shared, signals, served, &mut log) == Ready::Stop {
            return;
        }
    }
}

#[cfg(test)]
mod client_tests;
#[cfg(test)]
mod hostile_memory_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod shrunk_memory_tests;
#[cfg(test)]
pub(crate) mod tests;
