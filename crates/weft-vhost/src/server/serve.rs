//! Serving one connected frontend, whichever way the stream was got (accepted in server
//! mode, connected in client mode, or adopted from another process: `handover.rs`), and
//! the one wait both ways share: a descriptor, the port's doorbell (`park.rs`: stop, or
//! park at this message boundary), an optional timeout.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vhost::vhost_user::{BackendReqHandler, Error as VhostUserError};

use super::lock;
use super::park::Signals;
use super::side_requests::{serve_side_request, Side};
use crate::control::Device;
use crate::counters::LogLimiter;
use crate::device::DeviceShared;

/// The socket's read and write timeout. It does not bound a message that stops halfway:
/// the `vhost` crate retries a timed-out read or write until the frontend sends the rest,
/// hangs up, or the port is dropped (which shuts the socket down). A frontend can so hold
/// only its own port's control thread, as an idle one does; the timeout makes each blocked
/// call return now and then rather than sleep in the kernel for good.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(5);

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// The port is being dropped.
    Stop,
    /// The descriptor is readable (or hung up).
    Socket,
    /// The timeout passed.
    Timeout,
}

/// Waits until `fd` (if any) is readable or hung up, the port stops, or `timeout` (if any)
/// passes. A stop wins over a ready descriptor. A suspend parks the thread here (the
/// frontend's next message, if any, left unread) until it is resumed or stopped.
pub(super) fn wait(
    fd: Option<RawFd>,
    signals: &Signals,
    timeout: Option<Duration>,
) -> io::Result<Ready> {
    let timeout_ms = timeout.map_or(-1, |t| {
        i32::try_from(t.as_millis().max(1)).unwrap_or(i32::MAX)
    });
    loop {
        let mut fds = [
            libc::pollfd {
                fd: signals.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                // poll ignores a negative descriptor.
                fd: fd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structures for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            if signals.answer() {
                return Ok(Ready::Stop);
            }
            continue;
        }
        if fds[1].revents != 0 {
            return Ok(Ready::Socket);
        }
        if n == 0 {
            return Ok(Ready::Timeout);
        }
    }
}

/// The connection being served, as the port sees it: a clone of the stream (to cut it when
/// the port is dropped, and to hand it over) and the device model behind it.
pub(crate) struct Served {
    pub(crate) stream: UnixStream,
    pub(crate) device: Arc<Mutex<Device>>,
}

/// A frontend's connection ready to be served: the stream the thread polls, the device
/// model, and the `vhost` crate's handler reading the same stream into that device.
pub(crate) struct Connection {
    pub(crate) watch: UnixStream,
    pub(crate) device: Arc<Mutex<Device>>,
    pub(crate) handler: BackendReqHandler<Mutex<Device>>,
}

/// Sets `stream` up as the control thread serves it: blocking, with the message timeouts.
pub(crate) fn configure(stream: &UnixStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(MESSAGE_TIMEOUT))?;
    stream.set_write_timeout(Some(MESSAGE_TIMEOUT))
}

impl Connection {
    /// A new frontend on `stream`, nothing negotiated yet.
    pub(super) fn fresh(stream: UnixStream, shared: &Arc<DeviceShared>) -> Option<Connection> {
        let watch = match configure(&stream).and_then(|()| stream.try_clone()) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot set up a vhost-user connection");
                return None;
            }
        };
        let device = Arc::new(Mutex::new(Device::new(Arc::clone(shared))));
        let handler = BackendReqHandler::from_stream(stream, Arc::clone(&device));
        Some(Connection {
            watch,
            device,
            handler,
        })
    }
}

/// Serves one frontend until it disconnects (or breaks the protocol, or the port stops):
/// `Ready::Stop` when the port stops, `Ready::Socket` when the connection ended.
pub(super) fn serve(
    conn: Connection,
    shared: &Arc<DeviceShared>,
    signals: &Signals,
    served: &Mutex<Option<Served>>,
    log: &mut LogLimiter,
) -> Ready {
    let Connection {
        watch,
        device,
        mut handler,
    } = conn;
    match watch.try_clone() {
        Ok(stream) => {
            *lock(served) = Some(Served {
                stream,
                device: Arc::clone(&device),
            });
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot set up a vhost-user connection");
            lock(&device).reset();
            return Ready::Socket;
        }
    }
    shared.connected.store(true, Ordering::Release);
    tracing::info!("vhost-user frontend connected");
    let outcome = loop {
        match wait(Some(watch.as_raw_fd()), signals, None) {
            Ok(Ready::Stop) => break Ready::Stop,
            Ok(_) => {}
            Err(_) => break Ready::Socket,
        }
        match serve_side_request(&watch, &device) {
            Side::Served => continue,
            Side::Refused => break Ready::Socket,
            Side::NotMine => {}
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
    *lock(served) = None;
    lock(&device).reset();
    shared.connected.store(false, Ordering::Release);
    outcome
}
