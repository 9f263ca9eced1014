//! Why a socket directory or a client's socket path is refused. Each names the directory
//! or path, what is wrong and the fix.

use std::io;
use std::path::PathBuf;

/// A socket directory that cannot be used, or a socket path that is not allowed.
#[derive(Debug, thiserror::Error)]
pub enum SocketDirsError {
    /// A configured directory is relative.
    #[error("{what}: {} is not an absolute path: give the directory's full path", path.display())]
    DirNotAbsolute {
        /// Which directory.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// A directory cannot be opened (absent, a symlink on its path...).
    #[error("{what}: {source}")]
    DirOpen {
        /// Which directory.
        what: &'static str,
        /// Why.
        source: weft_vhost::SocketDirError,
    },
    /// A directory's mode and owner cannot be read.
    #[error("{what}: cannot inspect {}: {source}", path.display())]
    DirInspect {
        /// Which directory.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A directory belongs to someone else.
    #[error("{what}: {} belongs to uid {owner}, who could swap weftd's sockets in it: give a directory owned by root or weftd's user", path.display())]
    DirForeign {
        /// Which directory.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// Others may write a directory that is not sticky.
    #[error("{what}: {} is writable by group or others without the sticky bit: chmod go-w it (or +t), or choose another directory", path.display())]
    DirWritable {
        /// Which directory.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// No directory to put a default socket in.
    #[error("no vhost-user socket directory is configured")]
    NoDefaultDir,
    /// The socket's file name is not one.
    #[error(transparent)]
    Name(weft_vhost::SocketDirError),
    /// The socket is one of weftd's own files.
    #[error("socket path {} is one of weftd's own files (its control socket, state, pid, lock or log file): give another socket name", .0.display())]
    Reserved(PathBuf),
    /// The socket's path is too long for a Unix socket.
    #[error("socket path {} is {len} bytes long: a Unix socket path has at most {max}; give a shorter socket (--vhost-socket PATH)", path.display())]
    TooLong {
        /// The path.
        path: PathBuf,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The client's path is not one plain name inside an allowed directory.
    #[error("socket path {path:?} {why}: give a path inside one of: {allowed}; or add the directory to vhost_socket_dirs in weftd.toml")]
    NotAllowed {
        /// The client's path.
        path: String,
        /// What is wrong with it.
        why: &'static str,
        /// The allowed directories.
        allowed: String,
    },
}
