//! Descriptors systemd passes a service it starts (`sd_listen_fds(3)`): `$LISTEN_PID`,
//! `$LISTEN_FDS` (how many, from descriptor 3 on) and `$LISTEN_FDNAMES` (their names,
//! ':'-separated). weftd gets its file descriptor store back this way after a crash.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The first descriptor systemd passes.
const FIRST: RawFd = 3;

/// The most descriptors taken (systemd's store allows at most 65536 per unit).
const MAX_FDS: usize = 65_536;

/// Why the passed descriptors were not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ListenFdsError {
    /// A variable is not what systemd writes.
    #[error("${name} is {value:?}: not what systemd passes")]
    Malformed {
        /// Which variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
}

/// What the variables say: how many descriptors, and each one's name.
#[derive(Debug, PartialEq, Eq)]
pub struct Announced {
    /// The names, one per descriptor from 3 on ("unknown" where systemd gave none).
    pub names: Vec<String>,
}

/// The variables read: `None` when they are not for this process (no `$LISTEN_PID`, or
/// another process's).
pub fn parse(
    pid: Option<&str>,
    count: Option<&str>,
    names: Option<&str>,
    own_pid: u32,
) -> Result<Option<Announced>, ListenFdsError> {
    let malformed = |name, value: &str| ListenFdsError::Malformed {
        name,
        value: value.to_string(),
    };
    let Some(pid) = pid else {
        return Ok(None);
    };
    if pid
        .parse::<u32>()
        .map_err(|_| malformed("LISTEN_PID", pid))?
        != own_pid
    {
        return Ok(None);
    }
    let count_text = count.unwrap_or("0");
    let count = count_text
        .parse::<usize>()
        .ok()
        .filter(|n| *n <= MAX_FDS)
        .ok_or_else(|| malformed("LISTEN_FDS", count_text))?;
    let names: Vec<String> = match names {
        Some(n) if n.split(':').count() == count => n.split(':').map(str::to_string).collect(),
        // Without names (or with a wrong number of them) systemd's own reader says
        // "unknown" for each.
        _ => vec!["unknown".to_string(); count],
    };
    Ok(Some(Announced { names }))
}

/// Takes the descriptors systemd passed this process, with their names, and removes the
/// variables (no child inherits them, and nothing takes the descriptors twice). Call once,
/// first thing, before anything opens a descriptor. Each descriptor is made close-on-exec.
pub fn take() -> Result<Vec<(String, OwnedFd)>, ListenFdsError> {
    let var = |n| std::env::var(n).ok();
    let parsed = parse(
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
        std::process::id(),
    );
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(name);
    }
    let Some(passed) = parsed? else {
        return Ok(Vec::new());
    };
    let mut taken = Vec::with_capacity(passed.names.len());
    for (fd, name) in (FIRST..).zip(passed.names) {
        // SAFETY: F_GETFD only reads the descriptor's flags; it fails on a closed one.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            tracing::warn!(fd, %name, "systemd said it passed this descriptor, but it is not open");
            continue;
        }
        // SAFETY: systemd passed descriptor `fd` to this process ($LISTEN_PID is ours) and
        // nothing else in it owns it: the variables are gone, and this runs once, before
        // anything opens a descriptor that could reuse the number.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: F_SETFD on a descriptor this process owns changes only its own flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        taken.push((name, owned));
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_without_listen_pid() {
        assert_eq!(parse(None, Some("2"), Some("a:b"), 7), Ok(None));
    }

    #[test]
    fn another_process_s_descriptors_are_left_alone() {
        assert_eq!(parse(Some("8"), Some("2"), Some("a:b"), 7), Ok(None));
    }

    #[test]
    fn names_follow_the_descriptors() {
        let passed = parse(Some("7"), Some("3"), Some("weft-aa:weft-aa.0:x"), 7)
            .unwrap()
            .unwrap();
        assert_eq!(passed.names, ["weft-aa", "weft-aa.0", "x"]);
    }

    #[test]
    fn missing_or_miscounted_names_are_unknown() {
        for names in [None, Some("a"), Some("a:b:c")] {
            let passed = parse(Some("7"), Some("2"), names, 7).unwrap().unwrap();
            assert_eq!(passed.names, ["unknown", "unknown"]);
        }
    }

    #[test]
    fn malformed_variables_are_refused() {
        assert!(parse(Some("x"), Some("1"), None, 7).is_err());
        assert!(parse(Some("7"), Some("-1"), None, 7).is_err());
        assert!(parse(Some("7"), Some("9999999"), None, 7).is_err());
    }
}
