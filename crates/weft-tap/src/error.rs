//! Errors from opening and configuring ports. Errors on the data path are never returned:
//! they are counted (see [`crate::stats`]).

use std::io;
use std::path::PathBuf;

/// Why a port could not be opened or configured.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// An interface name Linux would refuse.
    #[error("invalid interface name {0:?}: use 1 to 15 bytes without '/', ':' or whitespace")]
    BadName(String),
    /// An option out of range.
    #[error("invalid option: {0}")]
    BadOption(String),
    /// A system call or ioctl failed.
    #[error("{what} on {name:?} failed: {source}")]
    Sys {
        /// What was being done (the call's name).
        what: &'static str,
        /// The interface (or device) it was done on.
        name: String,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The network namespace could not be entered.
    #[error("cannot enter network namespace {path:?}: {source}")]
    Netns {
        /// The namespace file.
        path: PathBuf,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The helper thread that works inside a network namespace died.
    #[error("the thread working in network namespace {0:?} panicked")]
    NetnsThread(PathBuf),
    /// The kernel lacks something this port needs.
    #[error("unsupported by this kernel: {0}")]
    Unsupported(String),
}

impl PortError {
    /// A failed call `what` on `name`, with `source`.
    pub(crate) fn sys(what: &'static str, name: &str, source: io::Error) -> Self {
        PortError::Sys {
            what,
            name: name.to_string(),
            source,
        }
    }
}
