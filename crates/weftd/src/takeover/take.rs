//! The new weftd's side: connect to the running weftd's takeover socket, receive its state,
//! listeners and devices, and (once the switches are built on them) say so and wait for
//! the old weftd's last word. Everything received is checked: another binary sent it.

use std::net::TcpListener;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt};

use super::channel::{HandoverChannel, HandoverError};
use super::protocol::{Answer, Bye, Hello, Offer, PortOffer, Verdict, PROTOCOL};
use crate::control::Inherited;

/// How long each message may take to arrive.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most ports a hand-over may carry (far beyond any switch's limit).
const MAX_PORTS: usize = 1 << 16;

/// Why the new weftd could not take over.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// Nothing listens on the takeover socket.
    #[error(
        "no running weftd to take over from at {}: {source}. Is weftd running with this \
         runtime directory (--runtime-dir, or the configuration's runtime_dir)? A weftd \
         too old to hand over has no takeover socket: restart it instead",
        path.display()
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The running weftd said no; it carries on.
    #[error("the running weftd refused to hand over: {0}")]
    Refused(String),
    /// The conversation broke.
    #[error("hand-over: {0}")]
    Channel(#[from] HandoverError),
    /// What arrived is not what the protocol says.
    #[error("the running weftd sent an unusable hand-over: {0}")]
    Malformed(String),
}

/// What the running weftd handed over.
#[derive(Debug)]
pub struct Received {
    /// The conversation, for the verdict.
    pub channel: HandoverChannel,
    /// Its state and what its switches learned.
    pub offer: Offer,
    /// The runtime directory's lock (held once the old weftd is gone).
    pub lock: OwnedFd,
    /// The control socket.
    pub control: UnixListener,
    /// The old weftd's standard output and error.
    pub stdio: [OwnedFd; 2],
    /// The control socket over TCP.
    pub control_tcp: Option<TcpListener>,
    /// The metrics listener.
    pub metrics: Option<TcpListener>,
    /// The ports' devices.
    pub inherited: Inherited,
}

/// Asks the weftd listening on `path` for everything; `lock_file` is the runtime
/// directory's lock, which the lock descriptor must be.
pub fn receive(path: &Path, lock_file: &Path) -> Result<Received, TakeError> {
    let stream = UnixStream::connect(path).map_err(|source| TakeError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    receive_on(stream, lock_file)
}

/// [`receive`] on a connected `stream`.
pub fn receive_on(stream: UnixStream, lock_file: &Path) -> Result<Received, TakeError> {
    let mut channel = HandoverChannel::new(stream, MESSAGE_TIMEOUT)?;
    channel.send(
        &Hello {
            protocol: PROTOCOL,
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
        &[],
    )?;
    let (answer, fds) = channel.recv::<Answer>()?;
    let offer = match answer {
        Answer::Refuse { reason } => return Err(TakeError::Refused(reason)),
        Answer::Offer(offer) => *offer,
    };
    let malformed = |m: String| TakeError::Malformed(m);
    if fds.len() != offer.listeners.fd_count() {
        return Err(malformed(format!(
            "{} descriptors came with the offer, {} belong",
            fds.len(),
            offer.listeners.fd_count()
        )));
    }
    if offer.ports > MAX_PORTS {
        return Err(malformed(format!("{} ports", offer.ports)));
    }
    let mut fds = fds.into_iter();
    let mut next = || {
        fds.next()
            .ok_or_else(|| malformed("a descriptor is missing".into()))
    };
    let lock = next()?;
    check_lock(&lock, lock_file)?;
    let control = UnixListener::from(listening(next()?, "the control socket")?);
    let stdio = [next()?, next()?];
    let control_tcp = match offer.listeners.control_tcp {
        true => Some(TcpListener::from(listening(
            next()?,
            "the TCP control socket",
        )?)),
        false => None,
    };
    let metrics = match offer.listeners.metrics {
        true => Some(TcpListener::from(listening(
            next()?,
            "the metrics listener",
        )?)),
        false => None,
    };
    let mut inherited = Inherited::new();
    for _ in 0..offer.ports {
        let (port, fds) = channel.recv::<PortOffer>()?;
        if let Some(count) = port.device.fd_count().filter(|c| *c != fds.len()) {
            return Err(malformed(format!(
                "port {}:{} came with {} descriptors, {count} belong",
                port.switch,
                port.port,
                fds.len()
            )));
        }
        let key = (port.switch.clone(), port.port.clone());
        if inherited.insert(key, (port.device, fds)).is_some() {
            return Err(malformed(format!(
                "port {}:{} came twice",
                port.switch, port.port
            )));
        }
    }
    Ok(Received {
        channel,
        offer,
        lock,
        control,
        stdio,
        control_tcp,
        metrics,
        inherited,
    })
}

/// Checks `fd` is the lock file at `path` (the same file, not another of that name).
fn check_lock(fd: &OwnedFd, path: &Path) -> Result<(), TakeError> {
    let file = std::fs::File::from(fd.try_clone().map_err(HandoverError::Io)?);
    let held = file.metadata().map_err(HandoverError::Io)?;
    let here = std::fs::metadata(path).map_err(HandoverError::Io)?;
    if (held.dev(), held.ino()) != (here.dev(), here.ino()) {
        return Err(TakeError::Malformed(format!(
            "the lock handed over is not {}: the running weftd uses another runtime directory",
            path.display()
        )));
    }
    Ok(())
}

/// `fd` if it is a listening socket.
fn listening(fd: OwnedFd, what: &str) -> Result<OwnedFd, TakeError> {
    match getsockopt(&fd.as_fd(), sockopt::AcceptConn) {
        Ok(true) => Ok(fd),
        _ => Err(TakeError::Malformed(format!(
            "{what} is not a listening socket"
        ))),
    }
}

impl Received {
    /// Writes this process's standard output and error where the old weftd's went (for a
    /// weftd in the foreground: the same terminal, file or journal).
    pub fn take_stdio(&self) {
        let _ = nix::unistd::dup2_stdout(&self.stdio[0]);
        let _ = nix::unistd::dup2_stderr(&self.stdio[1]);
    }

    /// Tells the old weftd to carry on (it resumes its workers).
    pub fn abandon(&mut self, reason: &str) {
        let _ = self.channel.send(
            &Verdict::Abandon {
                reason: reason.to_string(),
            },
            &[],
        );
    }

    /// Tells the old weftd the devices are taken over, and waits for its last word: after
    /// it, the old weftd never touches them again.
    pub fn adopted(&mut self) -> Result<(), TakeError> {
        self.channel.send(&Verdict::Adopted, &[])?;
        let (Bye, fds) = self.channel.recv::<Bye>()?;
        if !fds.is_empty() {
            return Err(HandoverError::StrayFds.into());
        }
        Ok(())
    }
}
