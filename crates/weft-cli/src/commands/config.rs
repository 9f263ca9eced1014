//! `config apply`: reading a state file.

use std::path::Path;

use serde::de::Error as _;
use weft_control::response::Response;
use weft_control::state::State;

use crate::error::CliError;

/// Reads a state document: a bare `State` (what `weft config show` prints) or the answer
/// `weft --json config show` prints (`{"kind":"config","state":{...}}`).
pub(super) fn read_state(path: &Path) -> Result<State, CliError> {
    let text = super::read_input(path)?;
    parse_state(&text).map_err(|e| CliError::InvalidInput {
        message: format!("{} is not a valid weft state: {e}", path.display()),
        hint: Some(
            "start from the output of `weft config show`: \
             {\"version\":1,\"switches\":[{\"name\":\"br0\",\"ports\":[...]}]}"
                .into(),
        ),
    })
}

/// Parses a state document (see [`read_state`]).
pub(super) fn parse_state(text: &str) -> Result<State, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    if value.get("kind").is_none() {
        return serde_json::from_str(text);
    }
    match serde_json::from_str::<Response>(text)? {
        Response::Config { state } => Ok(state),
        _ => Err(serde_json::Error::custom(
            "this is a weft answer, but not of kind \"config\"",
        )),
    }
}
