//! The running weftd's side: it listens on `<runtime-dir>/takeover.sock` (owner-only, and
//! only a peer of its own user is served), and hands everything to the first new weftd
//! that asks in a protocol it speaks. After the hand-over it exits at once, closing
//! nothing: every device, socket and lock lives on in the new process.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::channel::{HandoverChannel, HandoverError};
use super::protocol::{Answer, Bye, Hello, Listeners, Offer, PortOffer, Verdict, PROTOCOL};
use crate::control::{self, Controller};

/// How long each message may take to arrive.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the new weftd may take to build its switches on what it was given.
const VERDICT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the workers are held at most: past the verdict's timeout, so that a hold never
/// ends while the new weftd may still be deciding.
const HOLD_MAX: Duration = Duration::from_secs(60);

/// The descriptors weftd serves on, duplicated at start, for the next weftd.
#[derive(Debug)]
pub struct Served {
    /// The runtime directory's lock (an `flock` lives with the open file, so the new
    /// weftd holds it once the old one is gone).
    pub lock: OwnedFd,
    /// The control socket.
    pub control: OwnedFd,
    /// Standard output and error.
    pub stdio: [OwnedFd; 2],
    /// The control socket over TCP.
    pub control_tcp: Option<OwnedFd>,
    /// The metrics listener.
    pub metrics: Option<OwnedFd>,
}

impl Served {
    fn listeners(&self) -> Listeners {
        Listeners {
            control_tcp: self.control_tcp.is_some(),
            metrics: self.metrics.is_some(),
        }
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        let mut fds = vec![
            self.lock.as_fd(),
            self.control.as_fd(),
            self.stdio[0].as_fd(),
            self.stdio[1].as_fd(),
        ];
        fds.extend(self.control_tcp.as_ref().map(AsFd::as_fd));
        fds.extend(self.metrics.as_ref().map(AsFd::as_fd));
        fds
    }
}

/// Why a hand-over did not happen (the old weftd carries on).
#[derive(Debug, thiserror::Error)]
pub enum GiveError {
    /// The conversation broke.
    #[error(transparent)]
    Channel(#[from] HandoverError),
    /// The peer is not weftd's own user.
    #[error("a process of uid {0} asked for a hand-over: refused")]
    Stranger(u32),
    /// The new weftd speaks another protocol.
    #[error("refused: {0}")]
    Refused(String),
    /// The new weftd gave up.
    #[error("the new weftd gave up: {0}")]
    Abandoned(String),
}

/// Binds the takeover socket at `path` (replacing what an earlier weftd left: the lock is
/// held) and serves hand-overs on a thread. After a successful one the process exits.
pub fn spawn(
    path: &Path,
    controller: Arc<Mutex<Controller>>,
    served: Served,
) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new()
        .name("weftd-takeover".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                match give(stream, &controller, &served) {
                    Ok(()) => {}
                    Err(e) => tracing::warn!(error = %e, "no hand-over; this weftd carries on"),
                }
            }
        })?;
    Ok(())
}

/// One hand-over; returns only when it did not happen (after a successful one the process
/// is gone).
fn give(
    stream: UnixStream,
    controller: &Mutex<Controller>,
    served: &Served,
) -> Result<(), GiveError> {
    let peer = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| HandoverError::Io(e.into()))?;
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return Err(GiveError::Stranger(peer.uid()));
    }
    let mut channel = HandoverChannel::new(stream, MESSAGE_TIMEOUT)?;
    let (hello, fds) = channel.recv::<Hello>()?;
    if !fds.is_empty() {
        return Err(HandoverError::StrayFds.into());
    }
    if hello.protocol != PROTOCOL {
        let reason = format!(
            "the running weftd ({}) hands over in protocol {PROTOCOL}, the new one ({}) in \
             protocol {}: stop the running weftd and start the new one instead (a restart \
             with a short gap)",
            env!("CARGO_PKG_VERSION"),
            hello.version,
            hello.protocol
        );
        channel.send(
            &Answer::Refuse {
                reason: reason.clone(),
            },
            &[],
        )?;
        return Err(GiveError::Refused(reason));
    }
    let started = Instant::now();
    // No request runs from here on; one in progress finishes first.
    let guard = control::lock(controller);
    let held = match guard.hold_workers(HOLD_MAX) {
        Ok(h) => h,
        Err(e) => return refuse(&mut channel, &e.message),
    };
    let ports = match guard.carry_ports() {
        Ok(p) => p,
        Err(e) => {
            held.resume();
            return refuse(&mut channel, &e.message);
        }
    };
    let offer = Offer {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        state: guard.state().clone(),
        listeners: served.listeners(),
        ports: ports.len(),
        fdb: held.fdb.clone(),
        notify_socket: std::env::var("NOTIFY_SOCKET").ok(),
    };
    let sent = (|| -> Result<Verdict, HandoverError> {
        channel.send(&Answer::Offer(Box::new(offer)), &served.fds())?;
        for (switch, port, leaving) in &ports {
            let offer = PortOffer {
                switch: switch.clone(),
                port: port.clone(),
                device: leaving.carried.clone(),
            };
            let fds: Vec<BorrowedFd<'_>> = leaving.fds.iter().map(AsFd::as_fd).collect();
            channel.send(&offer, &fds)?;
        }
        channel.set_timeout(VERDICT_TIMEOUT)?;
        let (verdict, fds) = channel.recv::<Verdict>()?;
        if !fds.is_empty() {
            return Err(HandoverError::StrayFds);
        }
        Ok(verdict)
    })();
    match sent {
        Ok(Verdict::Adopted) => {
            // Committed: this process never touches a device again. Under systemd the new
            // weftd is the service's main process from now on (it connected itself, so its
            // pid is the peer's). Then say so to it, and go.
            crate::daemon::notify_service_manager(&format!("MAINPID={}", peer.pid()));
            let _ = channel.send(&Bye, &[]);
            tracing::info!(
                ports = ports.len(),
                held_ms = started.elapsed().as_millis(),
                "handed over to the new weftd; exiting"
            );
            std::process::exit(0);
        }
        Ok(Verdict::Abandon { reason }) => {
            drop(ports);
            held.resume();
            Err(GiveError::Abandoned(reason))
        }
        Err(e) => {
            drop(ports);
            held.resume();
            Err(e.into())
        }
    }
}

fn refuse(channel: &mut HandoverChannel, why: &str) -> Result<(), GiveError> {
    let reason = format!("the running weftd cannot hand over now: {why}");
    channel.send(
        &Answer::Refuse {
            reason: reason.clone(),
        },
        &[],
    )?;
    Err(GiveError::Refused(reason))
}
