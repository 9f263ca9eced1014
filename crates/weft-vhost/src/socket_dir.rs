//! A directory of vhost-user sockets held open, so that a socket is created, checked,
//! connected to and removed relative to the directory's descriptor, never by a path name
//! that could be swapped (a directory replaced by a symlink) between check and action.
//!
//! The directory is opened one component at a time with `O_NOFOLLOW | O_DIRECTORY`, so no
//! symlink is followed anywhere on its path. A socket is bound and connected through
//! `/proc/self/fd/<fd>/...`, which the kernel resolves through the held descriptor itself.
//! A name is one plain file name in the directory (no `/`, no `.` or `..`).
//!
//! Which directories a daemon allows is its own policy (weftd: `vhost_socket_dirs`); this
//! module only makes every operation stay inside the directory it holds.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag, AT_FDCWD};
use nix::sys::socket::{
    bind, connect, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// Device and inode of a file: what identifies it whatever its name.
pub type FileId = (u64, u64);

/// Why a socket directory or a socket in it could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SocketDirError {
    /// A component of the directory's path is a symlink (or not a directory).
    #[error(
        "{dir}: {component} is a symlink or not a directory; give the directory's real path \
         (no symlink anywhere on it)",
        dir = .dir.display(),
        component = .component.display()
    )]
    NotPlainDirectory {
        /// The directory asked for.
        dir: PathBuf,
        /// The path up to the component that is not a plain directory.
        component: PathBuf,
    },
    /// The directory's path has a `..` component.
    #[error("{0}: a socket directory's path may not contain `..`")]
    DotDot(PathBuf),
    /// The directory could not be opened.
    #[error("cannot open socket directory {dir}: {source}", dir = .dir.display())]
    Open {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The socket's name is not one plain file name.
    #[error(
        "{name:?} is not a plain file name: a socket is named by one file name in its \
         directory (no `/`, `.` or `..`)"
    )]
    BadName {
        /// The name.
        name: OsString,
    },
    /// Something other than a socket has the name.
    #[error("{0} exists and is not a socket (weft replaces only a stale socket)")]
    NotASocket(PathBuf),
    /// Another user's socket has the name.
    #[error("{path} is a socket of uid {owner}, not left by this user: choose another name", path = .path.display())]
    NotOurs {
        /// The socket.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// A system call failed.
    #[error("{what} {path}: {source}", path = .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The socket.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A directory held open for the sockets in it.
#[derive(Debug)]
pub struct SocketDir {
    fd: OwnedFd,
    path: PathBuf,
    id: FileId,
}

impl SocketDir {
    /// Opens `path` (absolute, or relative to the working directory) one component at a
    /// time, following no symlink. `..` is refused.
    pub fn open(path: &Path) -> Result<SocketDir, SocketDirError> {
        let open_err = |source: Errno| SocketDirError::Open {
            dir: path.to_path_buf(),
            source: source.into(),
        };
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut fd = openat(AT_FDCWD, ".", flags, Mode::empty()).map_err(open_err)?;
        let mut walked = PathBuf::new();
        for component in path.components() {
            match component {
                Component::RootDir => {
                    fd = openat(AT_FDCWD, "/", flags, Mode::empty()).map_err(open_err)?;
                    walked.push("/");
                }
                Component::CurDir => {}
                Component::ParentDir => return Err(SocketDirError::DotDot(path.to_path_buf())),
                // Only Windows paths have prefixes.
                Component::Prefix(_) => {
                    return Err(SocketDirError::NotPlainDirectory {
                        dir: path.to_path_buf(),
                        component: path.to_path_buf(),
                    })
                }
                Component::Normal(name) => {
                    walked.push(name);
                    fd = match openat(&fd, name, flags, Mode::empty()) {
                        Ok(next) => next,
                        Err(Errno::ELOOP | Errno::ENOTDIR) => {
                            return Err(SocketDirError::NotPlainDirectory {
                                dir: path.to_path_buf(),
                                component: walked,
                            })
                        }
                        Err(e) => return Err(open_err(e)),
                    };
                }
            }
        }
        let st = fstat(&fd).map_err(open_err)?;
        Ok(SocketDir {
            fd,
            path: path.to_path_buf(),
            id: file_id(&st),
        })
    }

    /// The path it was opened by (for messages; never used to reach a file).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's device and inode.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The directory's mode bits and owner, read from the held descriptor.
    pub fn mode_and_owner(&self) -> io::Result<(u32, u32)> {
        let st = fstat(&self.fd)?;
        Ok((st.st_mode, st.st_uid))
    }

    /// The path `name` in the directory has, for messages.
    pub fn display_path(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// Checks `name` is one plain file name.
    pub fn check_name(name: &OsStr) -> Result<(), SocketDirError> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
            return Err(SocketDirError::BadName {
                name: name.to_os_string(),
            });
        }
        Ok(())
    }

    /// What `name` is now: `None` when nothing has the name.
    fn stat(&self, name: &OsStr) -> Result<Option<FileStat>, SocketDirError> {
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(self.io("inspecting", name, e)),
        }
    }

    /// Creates a listening socket named `name`, replacing a socket this user left there (a
    /// stale one, or the one of a port being replaced); any other file there, or another
    /// user's socket, is refused. Which names a
    /// caller may take (never its own control socket) is the caller's to decide. Returns the listener and
    /// the socket file's id, for [`remove_socket`](Self::remove_socket).
    pub fn bind_listener(&self, name: &OsStr) -> Result<(UnixListener, FileId), SocketDirError> {
        let (fd, id) = self.bind_socket(name, SockType::Stream)?;
        Ok((UnixListener::from(fd), id))
    }

    /// As [`bind_listener`](Self::bind_listener), a `SOCK_SEQPACKET` socket (memif's
    /// control channel keeps each message's boundaries): the listening descriptor
    /// (non-blocking, close-on-exec) and the socket file's id.
    pub fn bind_seqpacket_listener(
        &self,
        name: &OsStr,
    ) -> Result<(OwnedFd, FileId), SocketDirError> {
        self.bind_socket(name, SockType::SeqPacket)
    }

    fn bind_socket(
        &self,
        name: &OsStr,
        kind: SockType,
    ) -> Result<(OwnedFd, FileId), SocketDirError> {
        Self::check_name(name)?;
        if let Some(st) = self.stat(name)? {
            if !is_socket(&st) {
                return Err(SocketDirError::NotASocket(self.display_path(name)));
            }
            // Only a socket this process's user could have left: another user's (in a
            // directory others may write, with the sticky bit) is theirs.
            if st.st_uid != nix::unistd::geteuid().as_raw() {
                return Err(SocketDirError::NotOurs {
                    path: self.display_path(name),
                    owner: st.st_uid,
                });
            }
            if self.remove_socket(name, file_id(&st))? {
                tracing::debug!(path = %self.display_path(name).display(), "replaced a stale socket");
            }
        }
        let fd =
            new_socket(kind, SockFlag::SOCK_NONBLOCK).map_err(|e| self.io("creating", name, e))?;
        let addr = UnixAddr::new(&proc_path(self.fd.as_fd(), Some(name)))
            .map_err(|e| self.io("naming", name, e))?;
        // EADDRINUSE: something took the name since it was checked; it is left alone.
        bind(fd.as_raw_fd(), &addr).map_err(|e| self.io("binding", name, e))?;
        let created = self.stat(name)?;
        let id = match created {
            Some(st) if is_socket(&st) => file_id(&st),
            _ => return Err(self.io("checking the new socket", name, Errno::ENOENT)),
        };
        listen(&fd, Backlog::MAXCONN).map_err(|e| self.io("listening on", name, e))?;
        Ok((fd, id))
    }

    /// The id of the socket `name` now (a socket bound by another process that hands its
    /// listener over to this one: removed on drop as though bound here). Anything but a
    /// socket there is refused.
    pub fn socket_id(&self, name: &OsStr) -> Result<FileId, SocketDirError> {
        Self::check_name(name)?;
        match self.stat(name)? {
            Some(st) if is_socket(&st) => Ok(file_id(&st)),
            Some(_) => Err(SocketDirError::NotASocket(self.display_path(name))),
            None => Err(self.io("finding", name, Errno::ENOENT)),
        }
    }

    /// Removes `name` if it is still the socket `id` (a socket made since by someone else,
    /// or anything that is not a socket, stays). True when it removed it.
    pub fn remove_socket(&self, name: &OsStr, id: FileId) -> Result<bool, SocketDirError> {
        Self::check_name(name)?;
        match self.stat(name)? {
            Some(st) if is_socket(&st) && file_id(&st) == id => {
                match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => Ok(true),
                    Err(e) => Err(self.io("removing", name, e)),
                }
            }
            _ => Ok(false),
        }
    }

    /// Connects (without blocking) to the socket `name`: the file is opened without
    /// following a symlink, checked to be a socket, and connected to through that
    /// descriptor, so neither a symlink nor a file swapped in after the check is reached.
    /// `NotFound` while nothing has the name.
    pub fn connect(&self, name: &OsStr) -> Result<UnixStream, SocketDirError> {
        self.connect_socket(name, SockType::Stream)
            .map(UnixStream::from)
    }

    /// As [`connect`](Self::connect), a `SOCK_SEQPACKET` socket (memif): the connected
    /// descriptor, non-blocking and close-on-exec.
    pub fn connect_seqpacket(&self, name: &OsStr) -> Result<OwnedFd, SocketDirError> {
        self.connect_socket(name, SockType::SeqPacket)
    }

    fn connect_socket(&self, name: &OsStr, kind: SockType) -> Result<OwnedFd, SocketDirError> {
        Self::check_name(name)?;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let file = openat(&self.fd, name, flags, Mode::empty())
            .map_err(|e| self.io("opening", name, e))?;
        let st = fstat(&file).map_err(|e| self.io("inspecting", name, e))?;
        if !is_socket(&st) {
            return Err(SocketDirError::NotASocket(self.display_path(name)));
        }
        let fd =
            new_socket(kind, SockFlag::SOCK_NONBLOCK).map_err(|e| self.io("creating", name, e))?;
        let addr = UnixAddr::new(&proc_path(file.as_fd(), None))
            .map_err(|e| self.io("naming", name, e))?;
        connect(fd.as_raw_fd(), &addr).map_err(|e| self.io("connecting to", name, e))?;
        Ok(fd)
    }

    fn io(&self, what: &'static str, name: &OsStr, e: Errno) -> SocketDirError {
        SocketDirError::Io {
            what,
            path: self.display_path(name),
            source: e.into(),
        }
    }
}

impl SocketDirError {
    /// True when the socket is not there (yet): nothing has the name, or nobody listens.
    pub fn is_absent(&self) -> bool {
        matches!(self, SocketDirError::Io { source, .. } if matches!(
            source.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused | io::ErrorKind::WouldBlock
        ))
    }
}

fn new_socket(kind: SockType, flags: SockFlag) -> Result<OwnedFd, Errno> {
    socket(
        AddressFamily::Unix,
        kind,
        flags | SockFlag::SOCK_CLOEXEC,
        None,
    )
}

/// `/proc/self/fd/<fd>[/<name>]`: a path the kernel resolves through the descriptor.
fn proc_path(fd: BorrowedFd<'_>, name: Option<&OsStr>) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if let Some(name) = name {
        p.push(name);
    }
    p
}

fn is_socket(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFSOCK
}

#[allow(clippy::useless_conversion)] // dev_t and ino_t are u64 on some targets only
fn file_id(st: &FileStat) -> FileId {
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

#[cfg(test)]
mod tests;
