//! Why weftd cannot start. Each says what is wrong and how to go on; `run` prints it and
//! exits with a failure.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use weft_control::ControlError;

use crate::persist::StateFileError;
use crate::server::{ControlSocketError, TokenFileError};

/// A startup failure.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The `[directory]` cannot be used.
    #[error("[directory]: {0}")]
    Directory(String),
    /// Nowhere to put the runtime files.
    #[error(
        "no runtime directory: XDG_RUNTIME_DIR is not set; pass --runtime-dir DIR (or set \
         runtime_dir in the configuration)"
    )]
    NoRuntimeDir,
    /// A directory weftd needs is something else.
    #[error("{} exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A directory weftd needs lets others replace its files.
    #[error("{} ({what}) is writable by group or others, who could replace weftd's files: chmod go-w it, or choose another directory", path.display())]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// Which one it is.
        what: &'static str,
    },
    /// A directory cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The lock file cannot be opened.
    #[error("cannot open {}: {source}", path.display())]
    OpenLock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Another weftd holds the lock.
    #[error("another weftd (pid {pid}) runs with the runtime directory {}: stop it, or use another --runtime-dir", runtime_dir.display())]
    Locked {
        /// What the pid file says.
        pid: String,
        /// The runtime directory.
        runtime_dir: PathBuf,
    },
    /// The state file cannot be used.
    #[error("{}", super::state_refusal(source, path))]
    UnusableState {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        source: StateFileError,
    },
    /// `--reset-state` cannot move the state file aside.
    #[error("cannot move {} aside: {source}", path.display())]
    MoveAside {
        /// The state file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The vhost-user socket directories are not usable.
    #[error(transparent)]
    SocketDirs(#[from] crate::socket_dirs::SocketDirsError),
    /// Signals cannot be blocked for the signal thread.
    #[error("cannot block signals: {0}")]
    Signals(#[source] nix::Error),
    /// The control socket cannot be created.
    #[error(transparent)]
    ControlSocket(#[from] ControlSocketError),
    /// The workers cannot be started.
    #[error("cannot start the workers: {0}")]
    Workers(#[source] io::Error),
    /// The configuration cannot be built.
    #[error("cannot build the configuration: {}", .0.message)]
    Build(ControlError),
    /// The TCP listener's token is not usable.
    #[error(transparent)]
    Token(#[from] TokenFileError),
    /// The TCP control listener cannot be bound.
    #[error("cannot listen on {addr} (control.tcp.listen): {source}")]
    ControlListen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The metrics listener cannot be bound.
    #[error(
        "cannot serve metrics on {addr}: {source} (set metrics.listen, or --metrics-listen off)"
    )]
    MetricsListen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A thread cannot be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[source] io::Error),
    /// The pid file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    PidFile {
        /// The pid file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The log file of a detached weftd cannot be opened.
    #[error("cannot open the log file {}: {source}", path.display())]
    LogFile {
        /// The log file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// /dev/null cannot be opened.
    #[error("/dev/null: {0}")]
    DevNull(#[source] io::Error),
    /// A descriptor cannot be duplicated (for a later hand-over).
    #[error("cannot duplicate a descriptor: {0}")]
    Descriptor(#[source] io::Error),
    /// `--takeover` failed; the running weftd carries on.
    #[error("{0}")]
    Takeover(#[from] crate::takeover::take::TakeError),
}
