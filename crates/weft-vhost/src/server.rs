//! A vhost-user port in server mode: weft listens on a Unix socket, a frontend (QEMU, DPDK
//! virtio-user) connects. One control thread per port serves one frontend at a time; when
//! it disconnects the rings stop and the port waits for the next one.
//!
//! The control thread only ever blocks on the socket (bounded by a timeout per message) and
//! on the rings' mutexes (held by the data path for one call at most); the data path never
//! waits for it.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vhost::vhost_user::{BackendReqHandler, Error as VhostUserError};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_switch::PortCaps;

use crate::config::VhostPortConfig;
use crate::control::Device;
use crate::counters::{LogLimiter, QueueFault, QueueStats};
use crate::device::DeviceShared;
use crate::error::VhostError;
use crate::rx::VhostPortRx;
use crate::tx::VhostPortTx;

/// How long one message may take to arrive once it has started, or a reply to be taken.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(5);

/// The counters of a port's two queues.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VhostPortStats {
    /// The guest's receive queue: frames the port transmitted to the guest.
    pub to_guest: QueueStats,
    /// The guest's transmit queue: frames the port received from the guest.
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

/// A vhost-user port listening for its frontend. Dropping it stops the control thread,
/// disconnects the frontend and removes the socket.
pub struct VhostUserPort {
    shared: Arc<DeviceShared>,
    path: PathBuf,
    stop: EventFd,
    /// The connection being served, so that dropping the port can cut it.
    current: Arc<Mutex<Option<UnixStream>>>,
    thread: Option<JoinHandle<()>>,
    halves_taken: bool,
    /// Device and inode of the socket file this port bound: on drop it removes the file only
    /// if it is still that one (another port may have taken the path over since).
    socket_id: Option<(u64, u64)>,
}

impl std::fmt::Debug for VhostUserPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostUserPort")
            .field("path", &self.path)
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl VhostUserPort {
    /// Creates the socket at `path` and starts serving frontends on it. An old socket left
    /// at `path` is replaced; any other file there is an error.
    pub fn listen(path: impl AsRef<Path>, config: VhostPortConfig) -> Result<Self, VhostError> {
        let shared = DeviceShared::new(config)?;
        let path = path.as_ref().to_path_buf();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() => {
                std::fs::remove_file(&path).map_err(VhostError::io("removing the old socket"))?
            }
            Ok(_) => return Err(VhostError::PathInUse(path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(VhostError::Io {
                    what: "inspecting the socket path",
                    source: e,
                })
            }
        }
        let listener = UnixListener::bind(&path).map_err(VhostError::io("binding the socket"))?;
        let socket_id = file_id(&path);
        listener
            .set_nonblocking(true)
            .map_err(VhostError::io("configuring the socket"))?;
        let stop = EventFd::new(EFD_NONBLOCK).map_err(VhostError::io("creating an eventfd"))?;
        let thread_stop = stop
            .try_clone()
            .map_err(VhostError::io("creating an eventfd"))?;
        let current = Arc::new(Mutex::new(None));
        let thread_current = Arc::clone(&current);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("weft-vhost-ctl".into())
            .spawn(move || control_loop(&listener, &thread_shared, &thread_stop, &thread_current))
            .map_err(VhostError::io("starting the control thread"))?;
        Ok(VhostUserPort {
            shared,
            path,
            stop,
            current,
            thread: Some(thread),
            halves_taken: false,
            socket_id,
        })
    }

    /// The receive and transmit halves, to hand to a switch (once).
    pub fn take_halves(&mut self) -> Result<(VhostPortRx, VhostPortTx), VhostError> {
        if self.halves_taken {
            return Err(VhostError::HalvesTaken);
        }
        self.halves_taken = true;
        Ok((
            VhostPortRx::new(Arc::clone(&self.shared)),
            VhostPortTx::new(Arc::clone(&self.shared)),
        ))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True while a frontend is connected.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// True when both queues are being served.
    pub fn is_running(&self) -> bool {
        self.shared.vrings.iter().all(|v| v.lock().serving())
    }

    /// The state of both queues: the guest's receive queue, then its transmit queue.
    pub fn queue_status(&self) -> [QueueStatus; 2] {
        let status = |v: &crate::vring::Vring| {
            let st = v.lock();
            QueueStatus {
                running: st.running,
                enabled: st.enabled,
                fault: st.fault,
            }
        };
        [
            status(self.shared.rx_vring()),
            status(self.shared.tx_vring()),
        ]
    }

    /// Waits until both queues are served; false on timeout.
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

    /// Changes whenever [`caps`](Self::caps) may have changed.
    pub fn caps_generation(&self) -> u64 {
        self.shared.caps_generation()
    }

    /// The port's counters.
    pub fn stats(&self) -> VhostPortStats {
        VhostPortStats {
            to_guest: self.shared.rx_vring().counters.snapshot(),
            from_guest: self.shared.tx_vring().counters.snapshot(),
        }
    }
}

impl Drop for VhostUserPort {
    fn drop(&mut self) {
        let _ = self.stop.write(1);
        if let Some(conn) = lock(&self.current).as_ref() {
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.socket_id.is_some() && file_id(&self.path) == self.socket_id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Device and inode of the file at `path`.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which of two descriptors became ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ready {
    Stop,
    Socket,
}

/// Waits until `fd` is readable (or hung up) or `stop` is signalled.
fn wait_readable(fd: RawFd, stop: &EventFd) -> io::Result<Ready> {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structures for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            return Ok(Ready::Stop);
        }
        if fds[1].revents != 0 {
            return Ok(Ready::Socket);
        }
    }
}

fn control_loop(
    listener: &UnixListener,
    shared: &Arc<DeviceShared>,
    stop: &EventFd,
    current: &Mutex<Option<UnixStream>>,
) {
    let mut log = LogLimiter::new();
    loop {
        match wait_readable(listener.as_raw_fd(), stop) {
            Ok(Ready::Stop) => return,
            Ok(Ready::Socket) => {}
            Err(e) => {
                tracing::error!(error = %e, "vhost-user control thread cannot poll");
                return;
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                if let Some(held_back) = log.allow() {
                    tracing::warn!(error = %e, held_back, "vhost-user accept failed");
                }
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if serve(stream, shared, stop, current, &mut log) == Ready::Stop {
            return;
        }
    }
}

/// Serves one frontend until it disconnects (or breaks the protocol, or the port stops).
fn serve(
    stream: UnixStream,
    shared: &Arc<DeviceShared>,
    stop: &EventFd,
    current: &Mutex<Option<UnixStream>>,
    log: &mut LogLimiter,
) -> Ready {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(MESSAGE_TIMEOUT)))
        .and_then(|()| stream.set_write_timeout(Some(MESSAGE_TIMEOUT)))
        .and_then(|()| stream.try_clone());
    let watch = match setup {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot set up a vhost-user connection");
            return Ready::Socket;
        }
    };
    if let Ok(c) = watch.try_clone() {
        *lock(current) = Some(c);
    }
    let device = Arc::new(Mutex::new(Device::new(Arc::clone(shared))));
    let mut handler = BackendReqHandler::from_stream(stream, Arc::clone(&device));
    shared.connected.store(true, Ordering::Release);
    tracing::info!("vhost-user frontend connected");
    let outcome = loop {
        match wait_readable(watch.as_raw_fd(), stop) {
            Ok(Ready::Stop) => break Ready::Stop,
            Ok(Ready::Socket) => {}
            Err(_) => break Ready::Socket,
        }
        if let Err(e) = handler.handle_request() {
            match e {
                // QEMU 7.2's virtio-net enables its rings before it sets any feature; the
                // `vhost` crate refuses that (PROTOCOL_FEATURES not yet acknowledged) after
                // reading the whole message, so the stream is intact: carry on. Rings start
                // enabled for that reason (see `control.rs`).
                VhostUserError::InactiveFeature(_) => {
                    tracing::debug!("request needing unnegotiated features ignored");
                    continue;
                }
                VhostUserError::Disconnected | VhostUserError::PartialMessage => {
                    tracing::info!("vhost-user frontend disconnected");
                }
                e => {
                    if let Some(held_back) = log.allow() {
                        tracing::warn!(error = %e, held_back, "vhost-user frontend dropped");
                    }
                }
            }
            break Ready::Socket;
        }
    };
    *lock(current) = None;
    lock(&device).reset();
    shared.connected.store(false, Ordering::Release);
    outcome
}

#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;
