//! Opening a file a control client names with the client's own permissions, so that weftd
//! (root) never reads for a client what the client could not read itself (a confused
//! deputy): a key file in another user's private directory, or root's own files.
//!
//! As root, the file is opened on a short-lived thread of its own that first takes the
//! client's file-system identity (`setgroups`, `setfsgid`, `setfsuid` as raw system calls:
//! on Linux credentials belong to a thread, and glibc's wrappers would change every thread
//! of weftd). A file-system uid other than 0 drops the capabilities that bypass permission
//! checks, so the kernel checks every directory on the path and the file itself as it would
//! for the client. The thread ends with the open; no other thread ever holds those
//! credentials. weftd not running as root cannot take another identity: it then opens the
//! file as itself and lets the client have it only when the file's owner and mode give the
//! client read access.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whose permissions a file a request names is opened with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FileReader {
    /// weftd's own: root, a TCP client holding the token (root's equal, see SECURITY.md),
    /// or no client (a port restored from the state file weftd wrote).
    #[default]
    Weftd,
    /// A client on the control socket, by the credentials the kernel recorded at connect.
    Client {
        /// Effective user id.
        uid: u32,
        /// Effective group id.
        gid: u32,
        /// Supplementary groups.
        groups: Vec<u32>,
    },
}

impl FileReader {
    /// The reader for a control-socket client with these credentials (root reads as
    /// weftd).
    pub fn client(uid: u32, gid: u32, groups: &[u32]) -> FileReader {
        if uid == 0 {
            FileReader::Weftd
        } else {
            FileReader::Client {
                uid,
                gid,
                groups: groups.to_vec(),
            }
        }
    }

    /// Opens `path` with `options` as this reader.
    pub fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<File> {
        let FileReader::Client { uid, gid, groups } = self else {
            return options.open(path);
        };
        if !nix::unistd::geteuid().is_root() {
            let file = options.open(path)?;
            return if may_read(&file.metadata()?, *uid, *gid, groups) {
                Ok(file)
            } else {
                Err(io::Error::from(io::ErrorKind::PermissionDenied))
            };
        }
        let (path, options) = (path.to_path_buf(), options.clone());
        let (uid, gid, groups) = (*uid, *gid, groups.clone());
        std::thread::Builder::new()
            .name("weftd-open-as".into())
            .spawn(move || {
                take_identity(uid, gid, &groups)?;
                options.open(&path)
            })?
            .join()
            .map_err(|_| io::Error::other("the thread opening the file panicked"))?
    }
}

/// Whether a file with `meta` may be read by `uid` with groups `gid` and `groups`, by its
/// mode bits alone (the check when weftd cannot take the client's identity).
fn may_read(meta: &std::fs::Metadata, uid: u32, gid: u32, groups: &[u32]) -> bool {
    let mode = meta.mode();
    if meta.uid() == uid {
        mode & 0o400 != 0
    } else if meta.gid() == gid || groups.contains(&meta.gid()) {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    }
}

/// Gives the calling thread the file-system identity `uid`, `gid`, `groups`; fails unless
/// each step took.
fn take_identity(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    let count = libc::size_t::try_from(groups.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `groups` is a live slice of `count` gid_t (u32) values; the raw system call
    // changes only this thread's supplementary groups and reads nothing else.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, count, groups.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // setfsgid/setfsuid return the previous id whatever happens: asking again with the
    // same id returns the one in force, which says whether the change took.
    // SAFETY: plain system calls on this thread's credentials, no memory involved.
    let gid_now = unsafe {
        libc::setfsgid(gid);
        libc::setfsgid(gid)
    };
    // SAFETY: as above.
    let uid_now = unsafe {
        libc::setfsuid(uid);
        libc::setfsuid(uid)
    };
    if u32::try_from(gid_now).ok() != Some(gid) || u32::try_from(uid_now).ok() != Some(uid) {
        return Err(io::Error::from(io::ErrorKind::PermissionDenied));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOBODY: u32 = 65534;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn read_only() -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true);
        o
    }

    #[test]
    fn a_client_cannot_open_through_weftd_what_it_could_not_open_itself() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o711);
        let nobody = FileReader::client(NOBODY, NOBODY, &[]);
        // Root's own file.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        chmod(&secret, 0o600);
        let e = nobody.open(&secret, &read_only()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        // A readable file in a directory the client may not search.
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        chmod(&private, 0o700);
        let behind = private.join("key");
        std::fs::write(&behind, b"readable by all").unwrap();
        chmod(&behind, 0o644);
        let e = nobody.open(&behind, &read_only()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        // The client's own file opens; so does everything for weftd itself and for root.
        let own = dir.path().join("own");
        std::fs::write(&own, b"nobody's key").unwrap();
        chmod(&own, 0o600);
        nix::unistd::chown(&own, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
        nobody.open(&own, &read_only()).unwrap();
        FileReader::Weftd.open(&secret, &read_only()).unwrap();
        FileReader::client(0, 0, &[])
            .open(&behind, &read_only())
            .unwrap();
    }

    #[test]
    fn group_permission_is_granted_through_a_supplementary_group() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o711);
        let key = dir.path().join("key");
        std::fs::write(&key, b"group key").unwrap();
        chmod(&key, 0o640);
        nix::unistd::chown(&key, Some(0.into()), Some(4242.into())).unwrap();
        let member = FileReader::client(NOBODY, NOBODY, &[4242]);
        member.open(&key, &read_only()).unwrap();
        let outsider = FileReader::client(NOBODY, NOBODY, &[4243]);
        assert!(outsider.open(&key, &read_only()).is_err());
    }

    #[test]
    fn the_thread_that_asked_keeps_weftds_permissions() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        chmod(&secret, 0o600);
        let _ = FileReader::client(NOBODY, NOBODY, &[]).open(&secret, &read_only());
        // Root without the bypass would still be the owner here; use a file root does not
        // own and nobody may read, which only the capabilities open.
        nix::unistd::chown(&secret, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
        chmod(&secret, 0o000);
        read_only().open(&secret).unwrap();
    }

    #[test]
    fn without_root_the_mode_bits_decide() {
        let meta = |_: ()| std::fs::metadata("/").unwrap();
        // "/" is root's, mode 0755: others may read it.
        assert!(may_read(&meta(()), NOBODY, NOBODY, &[]));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        chmod(&f, 0o600);
        let m = std::fs::metadata(&f).unwrap();
        assert!(may_read(&m, m.uid(), 1, &[]), "the owner");
        assert!(
            !may_read(&m, m.uid() + 1, m.gid(), &[]),
            "the group, without g+r"
        );
        chmod(&f, 0o640);
        let m = std::fs::metadata(&f).unwrap();
        assert!(
            may_read(&m, m.uid() + 1, 1, &[m.gid()]),
            "a supplementary group"
        );
        assert!(!may_read(&m, m.uid() + 1, 1, &[]), "others, without o+r");
    }
}
