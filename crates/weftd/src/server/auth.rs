//! Who may use the control socket: the peer's credentials (`SO_PEERCRED`) on the Unix
//! socket, a shared token on the TCP listener.

use std::os::unix::net::UnixStream;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

/// The credentials of a Unix socket peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Process id (at connect time).
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// Reads the peer's credentials.
pub fn peer(stream: &UnixStream) -> std::io::Result<Peer> {
    let c = getsockopt(stream, PeerCredentials).map_err(std::io::Error::from)?;
    Ok(Peer {
        pid: c.pid(),
        uid: c.uid(),
        gid: c.gid(),
    })
}

/// Who may use the Unix socket: root, weftd's own user, and members of one group.
#[derive(Debug, Clone, Copy)]
pub struct UnixPolicy {
    /// weftd's effective uid.
    pub own_uid: u32,
    /// The configured group.
    pub group: Option<u32>,
}

impl UnixPolicy {
    /// True when `peer` may send requests.
    pub fn allows(&self, peer: &Peer) -> bool {
        if peer.uid == 0 || peer.uid == self.own_uid {
            return true;
        }
        let Some(group) = self.group else {
            return false;
        };
        peer.gid == group || supplementary_groups(peer.pid).is_some_and(|g| g.contains(&group))
    }
}

/// The supplementary groups of a process, from `/proc/<pid>/status`.
fn supplementary_groups(pid: i32) -> Option<Vec<u32>> {
    if pid <= 0 {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    Some(
        line.split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect(),
    )
}

/// Compares a presented token with the expected one in time independent of where they
/// differ.
pub fn token_matches(presented: Option<&str>, expected: &str) -> bool {
    let Some(p) = presented else { return false };
    let (p, e) = (p.as_bytes(), expected.as_bytes());
    let mut diff = u8::from(p.len() != e.len());
    for (i, b) in e.iter().enumerate() {
        diff |= b ^ p.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_own_user_are_allowed_others_only_through_the_group() {
        let policy = UnixPolicy {
            own_uid: 1000,
            group: None,
        };
        let peer = |uid, gid| Peer { pid: 0, uid, gid };
        assert!(policy.allows(&peer(0, 0)));
        assert!(policy.allows(&peer(1000, 1000)));
        assert!(!policy.allows(&peer(1001, 1001)));
        let policy = UnixPolicy {
            own_uid: 1000,
            group: Some(50),
        };
        assert!(policy.allows(&peer(1001, 50)));
        assert!(!policy.allows(&peer(1001, 51)));
    }

    #[test]
    fn tokens_must_match_exactly() {
        assert!(token_matches(Some("secret-token-123"), "secret-token-123"));
        assert!(!token_matches(Some("secret-token-12"), "secret-token-123"));
        assert!(!token_matches(
            Some("secret-token-1234"),
            "secret-token-123"
        ));
        assert!(!token_matches(Some("Secret-token-123"), "secret-token-123"));
        assert!(!token_matches(None, "secret-token-123"));
    }
}
