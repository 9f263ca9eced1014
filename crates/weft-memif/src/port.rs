//! A memif port as weft holds it: opened on a socket in a held directory, its control
//! thread started, split into lane halves once, closed on drop.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weft_switch::{
    DeviceCounter, DeviceError, DeviceStatus, Link, PortCaps, PortDevice, PortHalves,
};
use weft_sys::event::EventFd;
use weft_vhost::{FileId, SocketDir, SocketDirError};

use crate::config::{ConfigError, MemifConfig, Role};
use crate::connection::{PeerStatus, Shared};
use crate::control::{Control, Signals};
use crate::counters::MemifStats;
use crate::handover::{
    adopt, AdoptedSession, MemifHandover, MemifHandoverError, MemifHandoverSource,
};
use crate::rx::MemifPortRx;
use crate::tx::MemifPortTx;

/// Why a port could not be opened or split.
#[derive(Debug, thiserror::Error)]
pub enum MemifError {
    /// The configuration was refused.
    #[error("memif configuration: {0}")]
    Config(#[from] ConfigError),
    /// The socket could not be created (server) or named (client).
    #[error("memif socket: {0}")]
    Socket(#[from] SocketDirError),
    /// An eventfd, epoll set or thread could not be made.
    #[error("memif port: {0}")]
    Io(#[from] std::io::Error),
    /// A hand-over could not be taken.
    #[error(transparent)]
    Handover(#[from] MemifHandoverError),
    /// The halves were taken before.
    #[error("the port's halves were already taken")]
    AlreadySplit,
}

/// A memif port (see the crate documentation).
pub struct MemifPort {
    config: MemifConfig,
    shared: Arc<Shared>,
    wake: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    split: bool,
    source: MemifHandoverSource,
}

impl std::fmt::Debug for MemifPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemifPort")
            .field("role", &self.config.role)
            .field("id", &self.config.id)
            .field("status", &self.status())
            .finish()
    }
}

impl MemifPort {
    /// Opens a port on the socket `name` in `dir`: as a server, binds and listens there
    /// now (replacing a stale socket of this user); as a client, connects in the
    /// background and keeps reconnecting. Traffic flows once the halves are on a switch
    /// and a peer completed its handshake.
    pub fn open(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: MemifConfig,
    ) -> Result<Self, MemifError> {
        config.validate()?;
        SocketDir::check_name(name)?;
        let listener = match config.role {
            Role::Server => {
                let (fd, id) = dir.bind_seqpacket_listener(name)?;
                Some((std::os::unix::net::UnixListener::from(fd), Some(id)))
            }
            Role::Client => None,
        };
        Self::start(dir, name, config, listener, None)
    }

    /// Takes over a port another process described ([`MemifHandoverSource::suspend`]):
    /// its listener and its connected peer, which goes on with no new handshake. The
    /// description is checked against `config` and as a peer's messages are.
    pub fn adopt(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: MemifConfig,
        handover: MemifHandover,
        fds: Vec<OwnedFd>,
    ) -> Result<Self, MemifError> {
        config.validate()?;
        SocketDir::check_name(name)?;
        // The halves' wake, before the connection that carries it.
        let wake = Arc::new(EventFd::new(true)?);
        let adopted = adopt(&dir, name, &config, handover, fds, &wake)?;
        Self::start_with(dir, name, config, adopted.listener, adopted.session, wake)
    }

    fn start(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: MemifConfig,
        listener: Option<(UnixListener, Option<FileId>)>,
        session: Option<AdoptedSession>,
    ) -> Result<Self, MemifError> {
        let wake = Arc::new(EventFd::new(true)?);
        Self::start_with(dir, name, config, listener, session, wake)
    }

    fn start_with(
        dir: Arc<SocketDir>,
        name: &OsStr,
        config: MemifConfig,
        listener: Option<(UnixListener, Option<FileId>)>,
        session: Option<AdoptedSession>,
        wake: Arc<EventFd>,
    ) -> Result<Self, MemifError> {
        let shared = Arc::new(Shared::new(config.queue_pairs)?);
        let stop = Arc::new(AtomicBool::new(false));
        let kept_listener = match &listener {
            Some((l, _)) => Some(Arc::new(l.as_fd().try_clone_to_owned()?)),
            None => None,
        };
        let (requests, requests_rx) = mpsc::channel();
        let signals = Signals {
            wake: Arc::clone(&wake),
            stop: Arc::clone(&stop),
            requests: requests_rx,
        };
        let mut control = Control::new(
            config.clone(),
            dir,
            name.to_os_string(),
            Arc::clone(&shared),
            signals,
            listener,
        )?;
        if let Some(session) = session {
            control.adopt_session(session);
        }
        let thread = std::thread::Builder::new()
            .name(format!("memif-{}", config.id))
            .spawn(move || control.run())?;
        let source = MemifHandoverSource {
            requests,
            wake: Arc::clone(&wake),
            listener: kept_listener,
            role: config.role,
            id: config.id,
        };
        Ok(MemifPort {
            config,
            shared,
            wake,
            stop,
            thread: Some(thread),
            split: false,
            source,
        })
    }

    /// What hands this port over to another process (kept apart from the port, whose
    /// halves the workers own).
    pub fn handover_source(&self) -> MemifHandoverSource {
        self.source.clone()
    }

    /// What the port takes on transmit: plain Ethernet frames up to `mtu + 22` bytes.
    pub fn caps(&self) -> PortCaps {
        PortCaps::plain(usize::try_from(self.config.mtu).unwrap_or(1500))
    }

    /// The halves for one lane (every queue pair read by one receive half).
    pub fn take_halves(&mut self) -> Result<(MemifPortRx, MemifPortTx), MemifError> {
        self.take_lane_halves(1)?
            .pop()
            .ok_or(MemifError::AlreadySplit)
    }

    /// Halves for up to `lanes` lanes (at most one per queue pair): lane `k` reads queues
    /// `k, k + L, ...` and sends on queue `k` (modulo the rings negotiated).
    pub fn take_lane_halves(
        &mut self,
        lanes: usize,
    ) -> Result<Vec<(MemifPortRx, MemifPortTx)>, MemifError> {
        if self.split {
            return Err(MemifError::AlreadySplit);
        }
        let pairs = usize::from(self.config.queue_pairs);
        let lanes = lanes.clamp(1, pairs);
        let mut halves = Vec::with_capacity(lanes);
        for lane in 0..lanes {
            let queues = (lane..pairs).step_by(lanes).collect();
            let rx = MemifPortRx::new(
                Arc::clone(&self.shared),
                queues,
                lane,
                self.config.max_frame_len(),
            )?;
            let tx = MemifPortTx::new(Arc::clone(&self.shared), lane, self.caps());
            halves.push((rx, tx));
        }
        self.split = true;
        Ok(halves)
    }

    /// The peer as the control thread last saw it.
    pub fn status(&self) -> PeerStatus {
        self.shared
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// True while a peer is connected.
    pub fn is_connected(&self) -> bool {
        self.status().connected
    }

    /// Waits up to `timeout` for a peer to connect.
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_connected() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// The counters now.
    pub fn stats(&self) -> MemifStats {
        self.shared.counters.snapshot()
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &MemifConfig {
        &self.config
    }
}

impl Drop for MemifPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.write(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl PortDevice for MemifPort {
    fn kind(&self) -> &'static str {
        "memif"
    }

    fn mtu(&self) -> u32 {
        self.config.mtu
    }

    fn take_lanes(&mut self, lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        let halves = self.take_lane_halves(lanes).map_err(|e| match e {
            MemifError::AlreadySplit => DeviceError::AlreadySplit,
            other => DeviceError::Split(other.to_string()),
        })?;
        Ok(halves
            .into_iter()
            .map(|(rx, tx)| PortHalves::pair(rx, tx))
            .collect())
    }

    fn status(&self) -> DeviceStatus {
        let status = MemifPort::status(self);
        DeviceStatus {
            link: Some(if status.connected {
                Link::Connected
            } else {
                Link::Disconnected
            }),
            running: status.connected,
            ..DeviceStatus::default()
        }
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        self.shared.counters.visit(visit);
    }
}
