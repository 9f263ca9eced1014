//! Why a listener cannot be set up: the control socket, the TCP listener's token.

use std::io;
use std::path::PathBuf;

/// Why the control socket cannot be created.
#[derive(Debug, thiserror::Error)]
pub enum ControlSocketError {
    /// Something else is at the socket's path.
    #[error("{} exists and is not a socket: move it away or configure another control.socket", .0.display())]
    NotASocket(PathBuf),
    /// A live weftd holds it.
    #[error("another weftd answers on {}: stop it first, or give this one another --runtime-dir", .0.display())]
    InUse(PathBuf),
    /// The socket of a dead weftd cannot be removed.
    #[error("cannot remove the stale socket {}: {source}", path.display())]
    RemoveStale {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The path cannot be looked at.
    #[error("cannot inspect {}: {source}", path.display())]
    Inspect {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The private directory it is bound in cannot be made.
    #[error("cannot create {}: {source}", path.display())]
    PrivateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The private directory's name is taken by someone else's.
    #[error("{} exists and is not a directory of weftd's user: remove it", .0.display())]
    ForeignDir(PathBuf),
    /// Binding, or moving the bound socket into place, failed.
    #[error("cannot create the control socket{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Create {
        /// Where it was to go (none: while binding).
        path: Option<PathBuf>,
        /// Why.
        source: io::Error,
    },
    /// Its group cannot be set.
    #[error("cannot give the control socket to group {gid}: {source}")]
    Group {
        /// The group.
        gid: u32,
        /// Why.
        source: io::Error,
    },
    /// Its mode cannot be set.
    #[error("cannot set the mode of the control socket: {0}")]
    Mode(#[source] io::Error),
}

/// Why the TCP listener's token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Others may read it.
    #[error("the token file {} is readable by group or others: chmod 600 it", .0.display())]
    Exposed(PathBuf),
    /// The token is too short or has spaces.
    #[error("the token in {} must be at least 16 characters, without spaces (e.g. from `head -c 24 /dev/urandom | base64`)", .0.display())]
    Weak(PathBuf),
}
