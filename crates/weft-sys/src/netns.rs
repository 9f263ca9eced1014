//! Joining a network namespace (nix's `setns`).

use std::io;
use std::os::fd::AsFd;

use nix::sched::{setns, CloneFlags};

/// Moves the calling thread into the network namespace `ns` (an open `/run/netns/<name>` or
/// `/proc/<pid>/ns/net`). Only this thread's namespace changes: callers run it on a thread
/// of its own.
pub fn enter_netns(ns: impl AsFd) -> io::Result<()> {
    setns(ns, CloneFlags::CLONE_NEWNET)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_namespace_is_refused() {
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(enter_netns(&f).is_err());
    }
}
