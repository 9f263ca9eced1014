//! The control socket (Unix, and TCP when configured): accepts clients within bounds and
//! serves each on its own thread.
//!
//! Bounds: at most `max_clients` connections at once (the next one is told
//! `limit_reached` and closed), requests of at most `MAX_REQUEST_BYTES`, and a connection
//! that completes no request within `idle_timeout_secs` is closed. The acceptor never
//! waits on a client: refusals are one short write on a fresh socket, with a timeout.
//!
//! Root stays in: the last [`ClientSlots::reserved`] slots are kept for root and weftd's
//! own user on the Unix socket, so neither group members nor TCP clients can fill them.
//! A TCP client takes a shared slot only once its first request carried the token
//! ([`tcp`]); until then it holds one of a few handshake slots of its own, for a fixed time.

pub mod auth;
pub mod conn;
mod setup_errors;
pub mod tcp;

use std::io;
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_control::{ControlError, ErrorKind};

use crate::control::Controller;
use crate::ratelimit::RateLimit;
use auth::UnixPolicy;
use conn::Context;
pub use setup_errors::{ControlSocketError, TokenFileError};

/// How long a refusal or a response may take to write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Counts connected clients against the limit.
#[derive(Debug)]
pub struct ClientSlots {
    max: usize,
    /// Slots only [`ClientSlots::take`] may fill (root's, on the control socket).
    reserved: usize,
    used: AtomicUsize,
}

/// One taken slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot(Arc<ClientSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.used.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ClientSlots {
    /// Room for `max` clients, of which [`reserved_for_root`]`(max)` are reserved.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(ClientSlots {
            max,
            reserved: reserved_for_root(max),
            used: AtomicUsize::new(0),
        })
    }

    /// A slot, if one is free, reserved ones included (root and weftd's own user).
    pub fn take(self: &Arc<Self>) -> Option<Slot> {
        self.take_below(self.max)
    }

    /// A slot outside the reserved ones (socket group members, TCP clients).
    pub fn take_unreserved(self: &Arc<Self>) -> Option<Slot> {
        self.take_below(self.max - self.reserved)
    }

    fn take_below(self: &Arc<Self>, limit: usize) -> Option<Slot> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }

    /// Slots kept for root.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Clients connected now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// Slots of `max` that only root and weftd's own user may fill: an eighth, 1 to 8 of them
/// (none when there is a single slot).
pub fn reserved_for_root(max: usize) -> usize {
    if max < 2 {
        0
    } else {
        (max / 8).clamp(1, 8)
    }
}

/// Everything a serving thread needs, shared.
#[derive(Clone)]
pub struct Shared {
    /// The control plane.
    pub controller: Arc<Mutex<Controller>>,
    /// The client limit.
    pub slots: Arc<ClientSlots>,
    /// Idle clients are closed after this.
    pub idle_timeout: Duration,
}

static ACCEPT_ERRORS: RateLimit = RateLimit::new(5, Duration::from_secs(60));
static REFUSALS: RateLimit = RateLimit::new(10, Duration::from_secs(60));

/// Creates the control socket at `path` with permission bits `mode` and, when given,
/// group `gid`. A stale socket left by a dead weftd is replaced; a live one is an error.
pub fn bind_unix(
    path: &Path,
    mode: u32,
    gid: Option<u32>,
) -> Result<UnixListener, ControlSocketError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(ControlSocketError::NotASocket(path.to_path_buf()));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(ControlSocketError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(|source| ControlSocketError::RemoveStale {
                path: path.to_path_buf(),
                source,
            })?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ControlSocketError::Inspect {
                path: path.to_path_buf(),
                source,
            })
        }
    }
    // Bound inside a private directory, given its group and mode there, and only then moved
    // into place: nobody can connect before the mode is right, and the process umask (shared
    // by every thread) is never touched. A chmod after binding in place would leave a window
    // with the umask's mode; the rename is atomic.
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = parent.join(format!(".weftd-bind-{}", std::process::id()));
    let staged = private.join("sock");
    let make_private = || std::fs::DirBuilder::new().mode(0o700).create(&private);
    if let Err(e) = make_private() {
        // Left by a weftd of the same pid that died right there (pid 1 in a container):
        // an empty directory or one with our staged socket, removed; anything else stays.
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(ControlSocketError::PrivateDir {
                path: private,
                source: e,
            });
        }
        // Never through a symlink, nor in a directory someone else made.
        let ours = std::fs::symlink_metadata(&private).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.file_type().is_dir() && m.uid() == nix::unistd::geteuid().as_raw()
        });
        if !ours {
            return Err(ControlSocketError::ForeignDir(private));
        }
        let _ = std::fs::remove_file(&staged);
        std::fs::remove_dir(&private)
            .and_then(|()| make_private())
            .map_err(|source| ControlSocketError::PrivateDir {
                path: private.clone(),
                source,
            })?;
    }
    let placed = stage_socket(&staged, mode, gid).and_then(|listener| {
        std::fs::rename(&staged, path)
            .map(|()| listener)
            .map_err(|source| ControlSocketError::Create {
                path: Some(path.to_path_buf()),
                source,
            })
    });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    placed
}

/// Binds `staged` (in a private directory) and gives it its group and mode.
fn stage_socket(
    staged: &Path,
    mode: u32,
    gid: Option<u32>,
) -> Result<UnixListener, ControlSocketError> {
    let listener = UnixListener::bind(staged)
        .map_err(|source| ControlSocketError::Create { path: None, source })?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(staged, None, Some(gid))
            .map_err(|source| ControlSocketError::Group { gid, source })?;
    }
    std::fs::set_permissions(staged, std::fs::Permissions::from_mode(mode))
        .map_err(ControlSocketError::Mode)?;
    Ok(listener)
}

fn accept_failed(e: &io::Error) {
    if let Some(suppressed) = ACCEPT_ERRORS.allow() {
        tracing::warn!(error = %e, suppressed, "accept failed");
    }
    // Out of descriptors, say: do not spin.
    std::thread::sleep(Duration::from_millis(50));
}

fn refused(stream: &mut dyn io::Write, kind: ErrorKind, message: &str, hint: &str) {
    if let Some(suppressed) = REFUSALS.allow() {
        tracing::warn!(?kind, suppressed, "{message}");
    }
    conn::refuse(stream, ControlError::new(kind, message).with_hint(hint));
}

pub(crate) fn limit_hint(max: usize) -> String {
    format!("weftd serves {max} clients at once (control.max_clients): close some, or retry later")
}

/// Serves the Unix socket on a new thread.
pub fn spawn_unix(
    listener: UnixListener,
    policy: UnixPolicy,
    shared: Shared,
) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("weftd-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let mut stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        accept_failed(&e);
                        continue;
                    }
                };
                let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
                let peer = auth::peer(&stream).ok().filter(|p| policy.allows(p));
                let Some(peer) = peer else {
                    refused(
                        &mut stream,
                        ErrorKind::PermissionDenied,
                        "this user may not use weftd's control socket",
                        "run as root or as weftd's user, or join the group of control.socket_group",
                    );
                    continue;
                };
                let slot = if policy.is_privileged(&peer) {
                    shared.slots.take()
                } else {
                    shared.slots.take_unreserved()
                };
                let Some(slot) = slot else {
                    refused(
                        &mut stream,
                        ErrorKind::LimitReached,
                        "too many clients",
                        &limit_hint(shared.slots.max),
                    );
                    continue;
                };
                let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                let files_as = crate::control::FileReader::client(peer.uid, peer.gid, &peer.groups);
                let shared = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("weftd-client".into())
                    .spawn(move || {
                        let _slot = slot;
                        let ctx = Context {
                            controller: &shared.controller,
                            token: None,
                            idle_timeout: shared.idle_timeout,
                            files_as,
                        };
                        conn::serve(&mut stream, &ctx);
                    });
                if let Err(e) = spawned {
                    accept_failed(&e);
                }
            }
        })
}

/// Serves the TCP listener on a new thread; every request must carry `token`. A new
/// connection holds one of [`tcp::HANDSHAKE_SLOTS`] until its first request proved the
/// token, then a shared (unreserved) slot.
pub fn spawn_tcp(
    listener: TcpListener,
    token: String,
    shared: Shared,
) -> io::Result<std::thread::JoinHandle<()>> {
    let token: Arc<str> = token.into();
    let handshakes = ClientSlots::new(tcp::HANDSHAKE_SLOTS);
    let handshake_time = tcp::handshake_time(shared.idle_timeout);
    std::thread::Builder::new()
        .name("weftd-accept-tcp".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let mut stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        accept_failed(&e);
                        continue;
                    }
                };
                let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
                let Some(handshake) = handshakes.take() else {
                    refused(
                        &mut stream,
                        ErrorKind::LimitReached,
                        "too many TCP clients waiting to authenticate",
                        &format!(
                            "weftd lets {} TCP connections at once prove the token, each for {} s: retry later",
                            tcp::HANDSHAKE_SLOTS,
                            handshake_time.as_secs()
                        ),
                    );
                    continue;
                };
                let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
                let _ = stream.set_nodelay(true);
                let deadline = std::time::Instant::now() + handshake_time;
                let shared = shared.clone();
                let token = Arc::clone(&token);
                let spawned = std::thread::Builder::new()
                    .name("weftd-client-tcp".into())
                    .spawn(move || {
                        let ctx = Context {
                            controller: &shared.controller,
                            token: Some(&token),
                            idle_timeout: shared.idle_timeout,
                            // Token holders can do what root can (SECURITY.md).
                            files_as: crate::control::FileReader::Weftd,
                        };
                        let admission = tcp::Admission {
                            handshake,
                            deadline,
                            slots: &shared.slots,
                        };
                        tcp::serve(&mut stream, &ctx, admission);
                    });
                if let Err(e) = spawned {
                    accept_failed(&e);
                }
            }
        })
}

#[cfg(test)]
mod tests;

/// Reads the TCP token: at least 16 characters, in a file not readable by group or others.
pub fn read_token(path: &Path) -> Result<String, TokenFileError> {
    let unreadable = |source| TokenFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(TokenFileError::Exposed(path.to_path_buf()));
    }
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    let token = text.trim();
    if token.len() < 16 || token.chars().any(char::is_whitespace) {
        return Err(TokenFileError::Weak(path.to_path_buf()));
    }
    Ok(token.to_string())
}
