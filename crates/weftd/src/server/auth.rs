//! Who may use the control socket: the peer's credentials (`SO_PEERCRED`, and its
//! supplementary groups from `SO_PEERGROUPS`) on the Unix socket, a shared token on the TCP
//! listener. Both credentials are the ones the kernel recorded when the peer connected:
//! nothing is read about a process id afterwards (which may by then be another process).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

/// The credentials of a Unix socket peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Process id (at connect time).
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (at connect time; empty when the kernel cannot tell).
    pub groups: Vec<u32>,
}

/// Reads the peer's credentials.
pub fn peer(stream: &UnixStream) -> std::io::Result<Peer> {
    let c = getsockopt(stream, PeerCredentials).map_err(std::io::Error::from)?;
    // Before Linux 4.13 there is no SO_PEERGROUPS: members through a supplementary group
    // are then refused (the primary group still works), never let in on a guess.
    let groups = peer_groups(stream.as_fd()).unwrap_or_default();
    Ok(Peer {
        pid: c.pid(),
        uid: c.uid(),
        gid: c.gid(),
        groups,
    })
}

/// The most supplementary groups a process can have (Linux's `NGROUPS_MAX`).
const NGROUPS_MAX: usize = 65_536;

/// The peer's supplementary groups as recorded at connect (`SO_PEERGROUPS`).
pub fn peer_groups(socket: BorrowedFd<'_>) -> std::io::Result<Vec<u32>> {
    let mut groups = vec![0; 64];
    loop {
        match read_peer_groups(socket, &mut groups) {
            Ok(n) => {
                groups.truncate(n);
                return Ok(groups);
            }
            // Too small: the kernel said how many there are.
            Err(PeerGroups::Needs(n)) if n > groups.len() && n <= NGROUPS_MAX => {
                groups.resize(n, 0);
            }
            Err(PeerGroups::Needs(n)) => {
                return Err(std::io::Error::other(format!(
                    "the kernel reports {n} supplementary groups"
                )))
            }
            Err(PeerGroups::Failed(e)) => return Err(e),
        }
    }
}

enum PeerGroups {
    /// The buffer holds fewer than this many groups.
    Needs(usize),
    Failed(std::io::Error),
}

/// One `getsockopt(SO_PEERGROUPS)` into `buf`: the number of groups written.
fn read_peer_groups(socket: BorrowedFd<'_>, buf: &mut [u32]) -> Result<usize, PeerGroups> {
    const GID: usize = std::mem::size_of::<libc::gid_t>();
    let mut len = libc::socklen_t::try_from(buf.len() * GID)
        .map_err(|_| PeerGroups::Failed(std::io::Error::other("group buffer too large")))?;
    // SAFETY: `buf` is valid for writes of `len` bytes (`gid_t` is `u32` on Linux) for the
    // duration of the call, `len` is a valid `socklen_t` the kernel updates, and the
    // descriptor is borrowed, so open. The kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let bytes = usize::try_from(len).unwrap_or(usize::MAX);
    if rc == 0 {
        return Ok((bytes / GID).min(buf.len()));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ERANGE) {
        return Err(PeerGroups::Needs(bytes.div_ceil(GID)));
    }
    Err(PeerGroups::Failed(e))
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
    /// True for root and weftd's own user, who may use the slots kept for them.
    pub fn is_privileged(&self, peer: &Peer) -> bool {
        peer.uid == 0 || peer.uid == self.own_uid
    }

    /// True when `peer` may send requests.
    pub fn allows(&self, peer: &Peer) -> bool {
        if self.is_privileged(peer) {
            return true;
        }
        let Some(group) = self.group else {
            return false;
        };
        peer.gid == group || peer.groups.contains(&group)
    }
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
        let peer = |uid, gid| Peer {
            pid: 0,
            uid,
            gid,
            groups: vec![],
        };
        assert!(policy.allows(&peer(0, 0)));
        assert!(policy.allows(&peer(1000, 1000)));
        assert!(!policy.allows(&peer(1001, 1001)));
        let policy = UnixPolicy {
            own_uid: 1000,
            group: Some(50),
        };
        assert!(policy.allows(&peer(1001, 50)));
        assert!(!policy.allows(&peer(1001, 51)));
        let member = Peer {
            groups: vec![7, 50],
            ..peer(1001, 51)
        };
        assert!(policy.allows(&member), "through a supplementary group");
    }

    /// Connects as a child process with uid 1234, gid 4321 and `groups` as supplementary
    /// groups, which exits before the connection is accepted; returns what the accepting
    /// side reads then. `None` when not root (setgroups needs it).
    fn groups_seen_at_accept(groups: &[u32]) -> Option<Peer> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let open = |p: &std::path::Path, mode| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        open(dir.path(), 0o755);
        open(&path, 0o777);
        let script = format!(
            "import os, socket\nos.setgroups({groups:?})\nos.setgid(4321)\nos.setuid(1234)\nsocket.socket(socket.AF_UNIX).connect({:?})\n",
            path.to_str().unwrap()
        );
        let status = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .status()
            .expect("python3 runs the connecting peer");
        assert!(status.success());
        // The peer is gone: only what the kernel kept with the socket can tell its groups.
        let (stream, _) = listener.accept().unwrap();
        Some(peer(&stream).unwrap())
    }

    #[test]
    fn supplementary_groups_are_the_ones_the_peer_had_when_it_connected() {
        let Some(p) = groups_seen_at_accept(&[50, 7, 1_000_000]) else {
            return;
        };
        assert_eq!((p.uid, p.gid), (1234, 4321));
        let mut groups = p.groups.clone();
        groups.sort_unstable();
        assert_eq!(groups, vec![7, 50, 1_000_000]);
        let policy = UnixPolicy {
            own_uid: 0,
            group: Some(50),
        };
        assert!(policy.allows(&p), "a member through a supplementary group");
    }

    #[test]
    fn more_groups_than_the_first_buffer_are_all_read() {
        let many: Vec<u32> = (10_000..10_200).collect();
        let Some(p) = groups_seen_at_accept(&many) else {
            return;
        };
        let mut groups = p.groups.clone();
        groups.sort_unstable();
        assert_eq!(groups, many);
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
