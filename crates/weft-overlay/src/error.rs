//! Errors of opening an overlay port.

use std::path::PathBuf;

/// Why a VXLAN port could not be opened or configured.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// The configuration is inconsistent.
    #[error("invalid VXLAN configuration: {0}")]
    Config(String),
    /// A socket call failed.
    #[error("{call}: {source}")]
    Socket {
        /// The system call or option.
        call: &'static str,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// The network namespace could not be entered.
    #[error("network namespace {path}: {source}")]
    Netns {
        /// The namespace file.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// The helper thread that works inside the namespace died.
    #[error("the helper thread in network namespace {0} panicked")]
    NetnsThread(PathBuf),
    /// The static remote FDB is full.
    #[error("remote FDB full ({0} entries)")]
    FdbFull(usize),
    /// The configured remotes and the directory's VTEPs together exceed the flood list's
    /// bound (the list stays as it was).
    #[error("flood list of {remotes} remotes (configured and directory): at most {max}")]
    FloodListFull {
        /// Remotes asked for, deduplicated.
        remotes: usize,
        /// The bound.
        max: usize,
    },
    /// A hand-over to another weftd could not be taken, or one received was refused.
    #[error(transparent)]
    Handover(#[from] crate::handover::HandoverError),
}
