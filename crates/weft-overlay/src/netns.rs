//! Opening sockets inside another network namespace: see [`weft_netns`].

use std::path::Path;

pub use weft_netns::NetnsError;

use crate::error::OverlayError;

impl From<NetnsError> for OverlayError {
    fn from(e: NetnsError) -> Self {
        match e {
            NetnsError::Enter { path, source } => OverlayError::Netns { path, source },
            NetnsError::Thread(path) => OverlayError::NetnsThread(path),
        }
    }
}

/// [`weft_netns::run_in`] with this crate's error type.
pub fn run_in<T, F>(path: Option<&Path>, f: F) -> Result<T, OverlayError>
where
    T: Send,
    F: FnOnce() -> Result<T, OverlayError> + Send,
{
    weft_netns::run_in(path, f)
}
