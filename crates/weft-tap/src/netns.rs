//! Working inside another network namespace.
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

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::PortError;

/// Where `ip netns add NAME` puts namespace `name`.
pub fn named(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// Runs `f` inside the network namespace at `path` (a file such as `/run/netns/NAME` or
/// `/proc/PID/ns/net`), on a helper thread that exists only for the call; `None` runs it
/// on the calling thread, in the current namespace.
pub fn run_in<T, F>(path: Option<&Path>, f: F) -> Result<T, PortError>
where
    T: Send,
    F: FnOnce() -> Result<T, PortError> + Send,
{
    let Some(path) = path else {
        return f();
    };
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            enter(path)?;
            f()
        });
        worker
            .join()
            .map_err(|_| PortError::NetnsThread(path.to_path_buf()))?
    })
}

/// Moves the calling thread into the network namespace at `path`.
fn enter(path: &Path) -> Result<(), PortError> {
    let netns_error = |source| PortError::Netns {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(netns_error)?;
    // SAFETY: setns takes a descriptor (open for the call) and a flag; it changes only the
    // calling thread's network namespace, and this thread exits when the caller's closure
    // returns, so no other code runs in the namespace by accident.
    let ret = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if ret != 0 {
        return Err(netns_error(std::io::Error::last_os_error()));
    }
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
        let there = run_in(None, || Ok(std::thread::current().id())).unwrap();
        assert_eq!(here, there);
    }

    #[test]
    fn a_missing_namespace_is_an_error() {
        let r = run_in(Some(Path::new("/nonexistent/netns/x")), || Ok(()));
        assert!(matches!(r, Err(PortError::Netns { .. })), "{r:?}");
    }
}
