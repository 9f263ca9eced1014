//! Typed errors of the control protocol.

use serde::{Deserialize, Serialize};

/// What kind of failure a response reports. Clients branch on this, never on the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The line is not valid JSON, or not a request (unknown op, missing or unknown field,
    /// wrong type).
    BadRequest,
    /// The request's protocol version is not one the daemon speaks.
    UnsupportedVersion,
    /// The request line is longer than [`crate::MAX_REQUEST_BYTES`].
    TooLarge,
    /// The switch, port, rule, entry or capture named does not exist.
    NotFound,
    /// Something of that name exists already.
    AlreadyExists,
    /// The request is well formed but its content is not acceptable (bad name, VLAN id out
    /// of range, rule that fails validation...). Nothing was changed.
    Invalid,
    /// A limit was reached (ports, rules, clients, captures...). Nothing was changed.
    LimitReached,
    /// The client may not do this (missing or wrong token, credentials refused).
    PermissionDenied,
    /// The operating system refused (a TAP device could not be created, ...).
    System,
    /// A bug or an unexpected state in the daemon.
    Internal,
}

/// A failure, as sent to the client: the kind, a message saying what was wrong, and a hint
/// saying how to fix it when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(deny_unknown_fields)]
#[error("{message}")]
pub struct ControlError {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// What was wrong.
    pub message: String,
    /// How to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ControlError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ControlError {
            kind,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// [`ErrorKind::Invalid`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// [`ErrorKind::AlreadyExists`].
    pub fn exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, message)
    }
}
