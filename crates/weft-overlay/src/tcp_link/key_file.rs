//! Reading a key file for a client that names it: the daemon reading it is root, and the
//! path is the client's choice. Only a regular file is read (opened `O_NOFOLLOW |
//! O_NONBLOCK | O_CLOEXEC` and checked with `fstat` on that descriptor, so a FIFO or device
//! never blocks the reader and a symlink at the name is not followed), at most
//! [`MAX_KEY_LEN`] bytes of it. Refusals say what is wrong with the client's own path
//! without telling more about the file than whether it can be a key: never its size.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::auth::{KeyFileError, MAX_KEY_LEN, MIN_KEY_LEN};

/// A key file's bytes, and whether users other than its owner may read it.
#[derive(Clone)]
pub struct KeyFileBytes {
    /// The key, raw.
    pub bytes: Vec<u8>,
    /// Group or others may read the file (a key others may know).
    pub others_can_read: bool,
}

impl std::fmt::Debug for KeyFileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyFileBytes(..)")
    }
}

/// Reads the key file at `path` (see the module documentation).
pub fn read_key_file(path: &Path) -> Result<KeyFileBytes, KeyFileError> {
    read_opened_key_file(path, key_file_options().open(path))
}

/// How a key file is opened: for reading, without following a symlink at its name, without
/// blocking on a FIFO or device. For a caller that opens it another way (with a client's
/// permissions) and hands the result to [`read_opened_key_file`].
pub fn key_file_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    options
}

/// Reads the key file at `path` from `opened`, the result of opening it with
/// [`key_file_options`]; a failed open is refused with what it says about the client's own
/// path.
pub fn read_opened_key_file(
    path: &Path,
    opened: std::io::Result<std::fs::File>,
) -> Result<KeyFileBytes, KeyFileError> {
    let refuse = |problem: &str| KeyFileError {
        path: path.to_path_buf(),
        problem: problem.to_string(),
    };
    let file = opened.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => refuse("cannot be opened: no such file"),
            std::io::ErrorKind::PermissionDenied => refuse(
                "cannot be opened: permission denied (it is opened with the permissions of the user who asks: that user must be able to read it)",
            ),
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                refuse("is a symlink: give the key file's own path")
            }
            _ => refuse("cannot be opened"),
        })?;
    let meta = file.metadata().map_err(|_| refuse("cannot be inspected"))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "is a directory"
        } else if kind.is_fifo() {
            "is a FIFO"
        } else if kind.is_socket() {
            "is a socket"
        } else {
            "is a device"
        };
        return Err(refuse(&format!("{what}, not a regular file")));
    }
    let too_large = || {
        refuse(&format!(
            "is larger than {MAX_KEY_LEN} bytes: not a key file"
        ))
    };
    if meta.len() > u64::try_from(MAX_KEY_LEN).unwrap_or(u64::MAX) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_KEY_LEN + 1).unwrap_or(u64::MAX);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|_| refuse("cannot be read"))?;
    if bytes.len() > MAX_KEY_LEN {
        return Err(too_large());
    }
    if bytes.len() < MIN_KEY_LEN {
        return Err(refuse(&format!(
            "is shorter than {MIN_KEY_LEN} bytes: too short for a key"
        )));
    }
    Ok(KeyFileBytes {
        bytes,
        others_can_read: meta.permissions().mode() & 0o077 != 0,
    })
}
