//! Working inside another network namespace (shared by the port crates: weft-tap, weft-overlay).
//!
//! A port "in namespace N" is created by a short-lived thread that joins N (`setns`, which
//! affects only the calling thread), opens the TAP queue or packet socket there, configures
//! the interface and ends. Descriptors keep the namespace they were created in, so the
//! switch (in its own namespace) then reads and writes them as usual.
//!
//! Why not create the device here and move it (`ip link set NAME netns N` or netlink
//! `IFLA_NET_NS_FD`): moving only works for devices this process creates, a name may already
//! be taken in the target namespace, and the interface would have to be configured again
//! after the move (a move takes it down). Joining the namespace covers creating a TAP,
//! attaching to an existing one and opening a packet socket on an interface with one
//! mechanism, and needs no netlink code. Both need `CAP_SYS_ADMIN` (plus `CAP_NET_ADMIN` in
//! the target namespace).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Why a namespace could not be worked in.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The namespace could not be entered.
    #[error("cannot enter network namespace {path:?}: {source}")]
    Enter {
        /// The namespace file.
        path: PathBuf,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The helper thread working inside the namespace panicked.
    #[error("the thread working in network namespace {0:?} panicked")]
    Thread(PathBuf),
}

/// Where `ip netns add NAME` puts namespace `name`.
pub fn named(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// Runs `f` inside the network namespace at `path` (a file such as `/run/netns/NAME` or
/// `/proc/PID/ns/net`), on a helper thread that exists only for the call; `None` runs it
/// on the calling thread, in the current namespace. The caller's error type takes the
/// namespace's own errors.
pub fn run_in<T, E, F>(path: Option<&Path>, f: F) -> Result<T, E>
where
    T: Send,
    E: From<NetnsError> + Send,
    F: FnOnce() -> Result<T, E> + Send,
{
    let Some(path) = path else {
        return f();
    };
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            enter(path).map_err(E::from)?;
            f()
        });
        worker
            .join()
            .map_err(|_| E::from(NetnsError::Thread(path.to_path_buf())))?
    })
}

/// Moves the calling thread into the network namespace at `path`.
fn enter(path: &Path) -> Result<(), NetnsError> {
    let netns_error = |source| NetnsError::Enter {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(netns_error)?;
    // Changes only the calling thread's network namespace, and this thread exits when the
    // caller's closure returns, so no other code runs in the namespace by accident.
    weft_sys::netns::enter_netns(&file).map_err(netns_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_namespaces_live_under_run_netns() {
        assert_eq!(named("a"), PathBuf::from("/run/netns/a"));
    }

    #[test]
    fn without_a_namespace_the_closure_runs_here() {
        let here = std::thread::current().id();
        let there = run_in::<_, NetnsError, _>(None, || Ok(std::thread::current().id())).unwrap();
        assert_eq!(here, there);
    }

    #[test]
    fn a_missing_namespace_is_an_error() {
        let r = run_in::<(), NetnsError, _>(Some(Path::new("/nonexistent/netns/x")), || Ok(()));
        assert!(matches!(r, Err(NetnsError::Enter { .. })), "{r:?}");
    }
}
