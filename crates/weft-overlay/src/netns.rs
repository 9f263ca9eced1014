//! Opening sockets inside another network namespace: a short-lived helper thread joins the
//! namespace (`setns` affects only the calling thread), opens the sockets and ends. Sockets
//! keep the namespace they were created in. Same mechanism as `weft_tap::netns`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::OverlayError;

/// Runs `f` inside the network namespace at `path` on a helper thread; `None` runs it here.
pub fn run_in<T, F>(path: Option<&Path>, f: F) -> Result<T, OverlayError>
where
    T: Send,
    F: FnOnce() -> Result<T, OverlayError> + Send,
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
            .map_err(|_| OverlayError::NetnsThread(path.to_path_buf()))?
    })
}

fn enter(path: &Path) -> Result<(), OverlayError> {
    let netns_error = |source| OverlayError::Netns {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(netns_error)?;
    // SAFETY: setns takes a descriptor (open for the call) and a flag; it changes only the
    // calling thread's namespace, and this helper thread ends when the closure returns.
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
    fn a_missing_namespace_is_an_error() {
        let r = run_in(Some(Path::new("/nonexistent/netns/x")), || Ok(()));
        assert!(matches!(r, Err(OverlayError::Netns { .. })), "{r:?}");
    }

    #[test]
    fn without_a_namespace_the_closure_runs_here() {
        let here = std::thread::current().id();
        assert_eq!(
            run_in(None, || Ok(std::thread::current().id())).unwrap(),
            here
        );
    }
}
