//! Where weftd keeps its files, and the directories and lock that guard them.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{RunArgs, StartError};
use crate::config::Config;

/// Where weftd keeps its files.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The runtime directory.
    pub runtime_dir: PathBuf,
    /// The control socket.
    pub socket: PathBuf,
    /// The vhost-user socket directory.
    pub vhost_dir: PathBuf,
    /// The state file.
    pub state_file: PathBuf,
    /// The pid file.
    pub pid_file: PathBuf,
    /// The lock held while weftd runs.
    pub lock_file: PathBuf,
    /// The log of a detached weftd.
    pub log_file: PathBuf,
    /// Where a new weftd asks this one to hand over (`weftd --takeover`).
    pub takeover_socket: PathBuf,
    /// Marks of the TAP devices weft created (see `devices::TapMarks`).
    pub taps_dir: PathBuf,
}

impl Paths {
    /// Resolves the paths from the options, the configuration and the environment.
    pub fn resolve(args: &RunArgs, config: &Config) -> Result<Paths, StartError> {
        let runtime_dir = match args
            .runtime_dir
            .clone()
            .or_else(|| config.runtime_dir.clone())
        {
            Some(d) => d,
            None if nix::unistd::geteuid().is_root() => PathBuf::from("/run/weft"),
            None => match std::env::var_os("XDG_RUNTIME_DIR") {
                Some(d) if !d.is_empty() => PathBuf::from(d).join("weft"),
                _ => return Err(StartError::NoRuntimeDir),
            },
        };
        Ok(Paths {
            socket: config
                .control
                .socket
                .clone()
                .unwrap_or_else(|| runtime_dir.join("weftd.sock")),
            vhost_dir: runtime_dir.join("vhost"),
            state_file: args
                .state_file
                .clone()
                .or_else(|| config.state_file.clone())
                .unwrap_or_else(|| runtime_dir.join("state.json")),
            pid_file: runtime_dir.join("weftd.pid"),
            takeover_socket: runtime_dir.join("takeover.sock"),
            taps_dir: runtime_dir.join("taps"),
            lock_file: runtime_dir.join("weftd.lock"),
            log_file: config
                .log
                .file
                .clone()
                .unwrap_or_else(|| runtime_dir.join("weftd.log")),
            runtime_dir,
        })
    }
}

/// Creates a directory owner-only (or as given), or checks an existing one is safe: not
/// writable by others, who could otherwise swap weftd's files. `what` names it in errors.
pub(super) fn ensure_dir(path: &Path, mode: u32, what: &'static str) -> Result<(), StartError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.is_dir() {
                return Err(StartError::NotADirectory(path.to_path_buf()));
            }
            if meta.permissions().mode() & 0o022 != 0 {
                return Err(StartError::UnsafeDirectory {
                    path: path.to_path_buf(),
                    what,
                });
            }
            Ok(())
        }
        Err(_) => fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(path)
            .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(mode)))
            .map_err(|source| StartError::CreateDir {
                path: path.to_path_buf(),
                source,
            }),
    }
}

/// Takes the runtime directory's lock: one weftd per runtime directory.
pub(super) fn lock(paths: &Paths) -> Result<nix::fcntl::Flock<fs::File>, StartError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&paths.lock_file)
        .map_err(|source| StartError::OpenLock {
            path: paths.lock_file.clone(),
            source,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        let pid = fs::read_to_string(&paths.pid_file).unwrap_or_default();
        StartError::Locked {
            pid: pid.trim().to_string(),
            runtime_dir: paths.runtime_dir.clone(),
        }
    })
}
