//! The state file: the configuration weftd restores on start, rewritten atomically after
//! every accepted change.
//!
//! Writing: a temporary file in the same directory, written in full and `fsync`ed, then
//! renamed over the state file, then the directory `fsync`ed, so that after a crash the file
//! holds either the old or the new state, never a mix. Reading: a file that does not parse,
//! or parses into an invalid configuration, is an error naming the file, the line and the
//! problem; it is never discarded silently (see [`move_aside`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use weft_control::state::State;

/// Why the state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// It exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// It is not a state document (bad JSON, unknown or missing field, wrong type).
    #[error("{path}: line {line}, column {column}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// It is a state document, but one weftd cannot run (an unknown port in a rule, a bad
    /// MAC, a VLAN out of range...).
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and where.
        message: String,
    },
}

/// Reads the state file; `Ok(None)` when there is none.
pub fn load(path: &Path) -> Result<Option<State>, StateFileError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateFileError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse(path, &bytes).map(Some)
}

/// Parses and validates state text (`path` only names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<State, StateFileError> {
    let state: State = serde_json::from_slice(bytes).map_err(|e| StateFileError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    crate::model::validate::state(&state).map_err(|e| StateFileError::Invalid {
        path: path.to_path_buf(),
        message: e.message,
    })?;
    Ok(state)
}

/// serde_json ends its messages with " at line L column C", which the error says already.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Writes `state` to `path` atomically (see the module documentation). The file is
/// readable by its owner only.
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the state file has no name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let mut text = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
    text.push(b'\n');
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&text)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The directory a path is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Renames the state file to `<name>.<tag>-<UTC time>` beside it (with `-N` added if
/// that exists) and returns the new path.
pub fn move_aside(path: &Path, tag: &str) -> io::Result<PathBuf> {
    let stamp = utc_stamp(SystemTime::now());
    let base = format!("{}.{tag}-{stamp}", path.display());
    let mut target = PathBuf::from(&base);
    let mut n = 1;
    while target.exists() {
        target = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    fs::rename(path, &target)?;
    File::open(parent_dir(path))?.sync_all()?;
    Ok(target)
}

/// `YYYYMMDDTHHMMSSZ` for a time.
pub fn utc_stamp(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's
/// `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests;
