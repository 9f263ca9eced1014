//! Why a configuration is not valid: a value refused while the file is read
//! ([`ValueError`]), or the text as a whole ([`ConfigTextError`]).

use std::fmt;

use weft_control::ControlError;

/// Where in the configuration text, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line.
    pub line: usize,
    /// Column.
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// A single value that is not acceptable (the parser adds where it is).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// `log.level` is not a filter.
    #[error("invalid log filter: {0}; expected e.g. \"info\" or \"weftd=debug,warn\"")]
    LogFilter(#[source] tracing_subscriber::filter::ParseError),
    /// `socket_mode` has bits beyond the permission bits.
    #[error("socket_mode {0} is not a permission mode: write it in octal, e.g. 0o600 or 0o660")]
    SocketModeNotAMode(u32),
    /// `socket_mode` leaves the owner out.
    #[error("socket_mode 0o{0:o} must give the owner read and write (0o600 at least)")]
    SocketModeOwner(u32),
    /// `socket_group` names no group.
    #[error("no group {0:?} on this system: create it (groupadd {0}) or remove socket_group")]
    NoGroup(String),
    /// `socket_group` cannot be looked up.
    #[error("cannot look up group {name:?}: {source}")]
    GroupLookup {
        /// The group.
        name: String,
        /// Why.
        source: nix::Error,
    },
    /// A `[directory]` setting that cannot be used.
    #[error("{0}")]
    Directory(String),
    /// A number out of its range.
    #[error("{value} is out of range: expected {min} to {max}")]
    OutOfRange {
        /// The number.
        value: u64,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
    },
}

/// Configuration text that is not valid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigTextError {
    /// Not TOML, or a key or value the file may not have (says where).
    #[error("{0}")]
    Syntax(#[from] toml::de::Error),
    /// `workers.cpus` does not match `workers.count`.
    #[error("{at}: workers.cpus lists {cpus} CPU(s) for {workers} worker(s): give one CPU per worker, or none")]
    CpusPerWorker {
        /// Where `cpus` is.
        at: Position,
        /// CPUs listed.
        cpus: usize,
        /// Workers.
        workers: u64,
    },
    /// A `vhost_socket_dirs` entry that is not a plain absolute path.
    #[error("vhost_socket_dirs: {0:?} is not a plain absolute path: give the directory's full path, without `.`, `..` or `//`")]
    SocketDirNotPlain(String),
    /// Two seed switches of one name.
    #[error("{at}: switch {name:?} is defined twice")]
    SwitchTwice {
        /// Where the second is.
        at: Position,
        /// The name.
        name: String,
    },
    /// A seed switch that is not valid.
    #[error("{at}: switch {name:?}: {}", source.message)]
    Switch {
        /// Where it is.
        at: Position,
        /// Its name.
        name: String,
        /// What is wrong.
        source: ControlError,
    },
    /// The seed switches' tables together exceed weftd's bounds.
    #[error("{}", .0.message)]
    Totals(ControlError),
    /// Too many seed switches.
    #[error("{count} switches are configured; weftd runs at most {max}")]
    TooManySwitches {
        /// Configured.
        count: usize,
        /// The limit.
        max: usize,
    },
}
