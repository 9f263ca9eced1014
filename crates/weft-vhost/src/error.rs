//! Errors of the port's public API.

use crate::config::ConfigError;
use crate::vring::RingError;

/// Why a vhost-user port could not be created or used.
#[derive(Debug, thiserror::Error)]
pub enum VhostError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A queue could not be set up with the configured size.
    #[error(transparent)]
    Ring(#[from] RingError),
    /// The receive and transmit halves were taken already.
    #[error("the port's halves were taken already")]
    HalvesTaken,
    /// A port's halves were asked for more lanes than it can have queue pairs.
    #[error("a vhost-user port is split among 1 to 16 lanes, not {0}")]
    BadLanes(usize),
    /// The socket's directory or name cannot be used.
    #[error(transparent)]
    SocketDir(#[from] crate::socket_dir::SocketDirError),
    /// A hand-over to or from another process could not be made.
    #[error(transparent)]
    Handover(#[from] crate::handover::HandoverError),
    /// A system call failed (socket, epoll, eventfd, thread).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

impl VhostError {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> VhostError {
        move |source| VhostError::Io { what, source }
    }
}
