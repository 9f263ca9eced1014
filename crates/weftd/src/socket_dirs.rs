//! Where control clients may put vhost-user sockets: `<runtime_dir>/vhost` and the
//! configuration's `vhost_socket_dirs`, each held open from the start (no symlink on its
//! path, not writable by others unless sticky), so that a socket is created, connected to
//! and removed only inside them, through the held descriptor (`weft_vhost::SocketDir`).
//!
//! A client's socket path must be one of these directories, spelled as configured, then one
//! plain file name: no `..`, no `//`, no symlinked parent (a path reaching an allowed
//! directory through a symlink is refused, not followed). weftd's own files (control
//! socket, state, pid, lock and log files) are never a socket name, whatever the directory.
//! Sockets are compared by the directory's device and inode and the name, never by string.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_vhost::{FileId, SocketDir};

mod error;
pub use error::SocketDirsError;

/// Longest Unix socket path (`sun_path` holds 108 bytes with its terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The directories vhost-user sockets may live in, held open.
#[derive(Debug, Clone)]
pub struct SocketDirs {
    /// The default directory first (`<runtime_dir>/vhost`).
    dirs: Vec<Arc<SocketDir>>,
    /// weftd's own files, by (directory, name): never a socket name.
    reserved: Vec<(FileId, OsString)>,
}

/// A socket: its held directory and its name there.
#[derive(Debug, Clone)]
pub struct SocketName {
    /// The directory, held open.
    pub dir: Arc<SocketDir>,
    /// The file name in it.
    pub name: OsString,
}

impl SocketName {
    /// What identifies the socket whatever the path's spelling: the directory's device and
    /// inode, and the name.
    pub fn key(&self) -> (FileId, OsString) {
        (self.dir.id(), self.name.clone())
    }

    /// The path, for messages and for the frontend.
    pub fn path(&self) -> PathBuf {
        self.dir.display_path(&self.name)
    }
}

impl SocketDirs {
    /// Opens the default directory (created by the caller) and the configured ones, each
    /// checked: absolute, an existing directory with no symlink on its path, owned by root
    /// or weftd's user, and not writable by group or others unless sticky (so nobody else
    /// can rename weftd's sockets or swap them). `reserved` are weftd's own files.
    pub fn open(
        default: &Path,
        configured: &[PathBuf],
        reserved: &[&Path],
    ) -> Result<SocketDirs, SocketDirsError> {
        let mut dirs: Vec<Arc<SocketDir>> = Vec::new();
        let default = default.to_path_buf();
        let all = std::iter::once((&default, "the vhost-user socket directory"))
            .chain(configured.iter().map(|d| (d, "vhost_socket_dirs")));
        for (path, what) in all {
            let dir = open_checked(path, what)?;
            if !dirs
                .iter()
                .any(|d| d.id() == dir.id() && d.path() == dir.path())
            {
                dirs.push(Arc::new(dir));
            }
        }
        let reserved = reserved
            .iter()
            .filter_map(|file| {
                let (parent, name) = (file.parent()?, file.file_name()?);
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                let meta = std::fs::metadata(parent).ok()?;
                Some(((meta.dev(), meta.ino()), name.to_os_string()))
            })
            .collect();
        Ok(SocketDirs { dirs, reserved })
    }

    /// The allowed directories, as configured, for messages.
    pub fn list(&self) -> String {
        self.dirs
            .iter()
            .map(|d| d.path().display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The socket a port names: `socket`, or `default_name` in the default directory.
    /// The error names the client's path, what is wrong with it and the fix.
    pub fn resolve(
        &self,
        default_name: &str,
        socket: Option<&str>,
    ) -> Result<SocketName, SocketDirsError> {
        let found = match socket {
            None => {
                let dir = self.dirs.first().ok_or(SocketDirsError::NoDefaultDir)?;
                SocketName {
                    dir: Arc::clone(dir),
                    name: OsString::from(default_name),
                }
            }
            Some(path) => self.find(path)?,
        };
        SocketDir::check_name(&found.name).map_err(SocketDirsError::Name)?;
        if self.reserved.contains(&found.key()) {
            return Err(SocketDirsError::Reserved(found.path()));
        }
        let len = found.path().as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(SocketDirsError::TooLong {
                path: found.path(),
                len,
                max: MAX_SOCKET_PATH,
            });
        }
        Ok(found)
    }

    /// The allowed directory `path` is in, and its name there.
    fn find(&self, path: &str) -> Result<SocketName, SocketDirsError> {
        let refuse = |why: &'static str| SocketDirsError::NotAllowed {
            path: path.to_string(),
            why,
            allowed: self.list(),
        };
        if !path.starts_with('/') {
            return Err(refuse("is not absolute"));
        }
        if path.contains("//") {
            return Err(refuse("contains `//`"));
        }
        if path.split('/').any(|c| c == "." || c == "..") {
            return Err(refuse("contains a `.` or `..` component"));
        }
        let Some((parent, name)) = path.rsplit_once('/') else {
            return Err(refuse("names no file"));
        };
        if name.is_empty() {
            return Err(refuse("names no file (it ends with `/`)"));
        }
        let parent = if parent.is_empty() { "/" } else { parent };
        let dir = self
            .dirs
            .iter()
            .find(|d| d.path().as_os_str().as_bytes() == parent.as_bytes())
            .ok_or_else(|| {
                refuse(
                    "is not directly inside an allowed directory (symlinks to one are not \
                     followed)",
                )
            })?;
        Ok(SocketName {
            dir: Arc::clone(dir),
            name: OsStr::new(name).to_os_string(),
        })
    }
}

/// Opens and checks one allowed directory; `what` names it in errors.
fn open_checked(path: &Path, what: &'static str) -> Result<SocketDir, SocketDirsError> {
    if !path.is_absolute() {
        return Err(SocketDirsError::DirNotAbsolute {
            what,
            path: path.to_path_buf(),
        });
    }
    let dir = SocketDir::open(path).map_err(|source| SocketDirsError::DirOpen { what, source })?;
    let (mode, owner) = dir
        .mode_and_owner()
        .map_err(|source| SocketDirsError::DirInspect {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    let euid = nix::unistd::geteuid().as_raw();
    if owner != 0 && owner != euid {
        return Err(SocketDirsError::DirForeign {
            what,
            path: path.to_path_buf(),
            owner,
        });
    }
    // Others writing a directory could rename weftd's sockets away or plant files; with the
    // sticky bit they can only add their own names, which weftd never removes (it replaces
    // only sockets, and removes only its own).
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(SocketDirsError::DirWritable {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(dir)
}

#[cfg(test)]
mod tests;
