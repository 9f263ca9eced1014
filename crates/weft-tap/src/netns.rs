//! Working inside another network namespace: see [`weft_netns`] (why ports are opened from a
//! thread that joined the namespace rather than moved there).

use std::path::Path;

pub use weft_netns::{named, NetnsError};

use crate::error::PortError;

impl From<NetnsError> for PortError {
    fn from(e: NetnsError) -> Self {
        match e {
            NetnsError::Enter { path, source } => PortError::Netns { path, source },
            NetnsError::Thread(path) => PortError::NetnsThread(path),
        }
    }
}

/// [`weft_netns::run_in`] with this crate's error type.
pub fn run_in<T, F>(path: Option<&Path>, f: F) -> Result<T, PortError>
where
    T: Send,
    F: FnOnce() -> Result<T, PortError> + Send,
{
    weft_netns::run_in(path, f)
}
