//! What can go wrong in the CLI, the hint that goes with it, and the exit code it maps to.

use std::io;
use std::time::Duration;

use weft_control::{ControlError, ErrorKind};

/// Exit codes, documented in `weft --help`.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A local failure: a file could not be read or written, output could not be printed.
    pub const GENERIC: u8 = 1;
    /// The command line is wrong (clap's own code, also used for rule syntax errors).
    pub const USAGE: u8 = 2;
    /// The switch, port, rule, FDB entry or capture does not exist.
    pub const NOT_FOUND: u8 = 3;
    /// The request was refused: invalid content, the name exists already, or a limit was
    /// reached. Nothing was changed.
    pub const REFUSED: u8 = 4;
    /// weftd cannot be reached, or refused the client (socket permissions, token).
    pub const CONNECT: u8 = 5;
    /// weftd failed: an internal or system error, a protocol mismatch, no answer in time.
    pub const DAEMON: u8 = 6;
}

/// A failure of one `weft` invocation.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line is wrong in a way clap cannot see (rule syntax, MAC address, ...).
    #[error("{message}")]
    Usage {
        /// What was wrong.
        message: String,
        /// How to fix it.
        hint: Option<String>,
    },
    /// A local input file is not what it should be (a state or rule document).
    #[error("{message}")]
    InvalidInput {
        /// What was wrong, with the file name and position.
        message: String,
        /// How to fix it.
        hint: Option<String>,
    },
    /// The daemon's socket (or TCP address) could not be connected to.
    #[error(
        "cannot connect to weftd at {endpoint}: {}{}",
        io_reason(source),
        not_running_note(source)
    )]
    Connect {
        /// The socket path or `host:port`.
        endpoint: String,
        /// Why.
        source: io::Error,
    },
    /// The daemon answered with an error.
    #[error("{0}")]
    Daemon(ControlError),
    /// The daemon's answer broke the protocol, or the connection broke.
    #[error("{0}")]
    Protocol(String),
    /// The daemon did not answer in time.
    #[error("weftd did not answer within {}", secs(*.0))]
    Timeout(Duration),
    /// A local I/O failure.
    #[error("{context}: {}", io_reason(source))]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: io::Error,
    },
}

impl CliError {
    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::Usage {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        CliError::Io {
            context: context.into(),
            source,
        }
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage { .. } => exit::USAGE,
            CliError::InvalidInput { .. } => exit::REFUSED,
            CliError::Connect { .. } => exit::CONNECT,
            CliError::Daemon(e) => match e.kind {
                ErrorKind::NotFound => exit::NOT_FOUND,
                ErrorKind::Invalid
                | ErrorKind::AlreadyExists
                | ErrorKind::LimitReached
                | ErrorKind::TooLarge => exit::REFUSED,
                ErrorKind::PermissionDenied => exit::CONNECT,
                ErrorKind::BadRequest
                | ErrorKind::UnsupportedVersion
                | ErrorKind::System
                | ErrorKind::Internal => exit::DAEMON,
            },
            CliError::Protocol(_) | CliError::Timeout(_) => exit::DAEMON,
            CliError::Io { .. } => exit::GENERIC,
        }
    }

    /// How to fix it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            CliError::Usage { hint, .. } | CliError::InvalidInput { hint, .. } => hint.clone(),
            CliError::Daemon(e) => e.hint.clone(),
            CliError::Connect { source, .. } => match source.kind() {
                io::ErrorKind::PermissionDenied => Some(
                    "the control socket is private to weftd's user (mode 0600): run weft as that \
                     user, or configure a socket group in weftd and join it"
                        .into(),
                ),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => None,
                _ => Some("check --socket / WEFT_SOCKET, or --connect".into()),
            },
            CliError::Timeout(_) => {
                Some("weftd may be overloaded or stuck; raise --timeout or check its log".into())
            }
            CliError::Protocol(_) => {
                Some("use a weft CLI of the same release as weftd; check weftd's log".into())
            }
            CliError::Io { .. } => None,
        }
    }

    /// The error as the two lines `weft` prints on stderr.
    pub fn render(&self) -> String {
        let mut s = format!("weft: error: {self}\n");
        if let Some(hint) = self.hint() {
            s.push_str(&format!("hint: {hint}\n"));
        }
        s
    }
}

impl From<ControlError> for CliError {
    fn from(e: ControlError) -> Self {
        CliError::Daemon(e)
    }
}

/// An I/O error's reason without the "(os error N)" suffix people do not need.
pub fn io_reason(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn not_running_note(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            " — is weftd running? start it with `weftd` or point --socket at its socket"
        }
        _ => "",
    }
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_socket_says_weftd_is_not_running() {
        let e = CliError::Connect {
            endpoint: "/run/weft/weftd.sock".into(),
            source: io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            e.to_string(),
            "cannot connect to weftd at /run/weft/weftd.sock: No such file or directory — is \
             weftd running? start it with `weftd` or point --socket at its socket"
        );
        assert_eq!(e.exit_code(), exit::CONNECT);
    }

    #[test]
    fn daemon_error_kinds_map_to_documented_exit_codes() {
        let code = |kind| CliError::Daemon(ControlError::new(kind, "x")).exit_code();
        assert_eq!(code(ErrorKind::NotFound), 3);
        assert_eq!(code(ErrorKind::AlreadyExists), 4);
        assert_eq!(code(ErrorKind::Invalid), 4);
        assert_eq!(code(ErrorKind::LimitReached), 4);
        assert_eq!(code(ErrorKind::PermissionDenied), 5);
        assert_eq!(code(ErrorKind::Internal), 6);
        assert_eq!(code(ErrorKind::BadRequest), 6);
    }

    #[test]
    fn render_prints_message_then_hint() {
        let e = CliError::Daemon(ControlError::not_found("no switch \"br9\"").with_hint("list"));
        assert_eq!(e.render(), "weft: error: no switch \"br9\"\nhint: list\n");
    }

    #[test]
    fn os_error_suffix_is_dropped() {
        assert_eq!(
            io_reason(&io::Error::from_raw_os_error(13)),
            "Permission denied"
        );
    }
}
