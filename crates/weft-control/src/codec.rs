//! Encoding and decoding of request and response lines.

use serde::{Deserialize, Serialize};

use crate::error::{ControlError, ErrorKind};
use crate::request::Request;
use crate::response::Response;
use crate::{MAX_REQUEST_BYTES, PROTOCOL_VERSION};

/// A request with its envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestEnvelope {
    /// Protocol version the client speaks.
    pub version: u32,
    /// Echoed in the response.
    pub id: u64,
    /// Shared secret, required on the TCP listener only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The request.
    pub request: Request,
}

/// A response with its envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseEnvelope {
    /// Protocol version of the daemon.
    pub version: u32,
    /// The request's id (0 when the request was too broken to have one).
    pub id: u64,
    /// The outcome.
    pub result: Result<Response, ControlError>,
}

/// The wire form: exactly one of `ok` and `error`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireResponse {
    version: u32,
    id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ok: Option<Response>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ControlError>,
}

/// A request that could not be decoded: the error to send back, and the request's id if
/// it could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The id, when the line had a readable one.
    pub id: Option<u64>,
    /// What was wrong.
    pub error: ControlError,
}

/// One request as a line (newline included).
pub fn encode_request(envelope: &RequestEnvelope) -> String {
    // Serializing these types cannot fail: no maps with non-string keys, no custom code.
    let mut line = serde_json::to_string(envelope).unwrap_or_default();
    line.push('\n');
    line
}

/// Decodes one request line (without or with its newline).
pub fn decode_request(line: &[u8]) -> Result<RequestEnvelope, DecodeError> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err(DecodeError {
            id: None,
            error: ControlError::new(
                ErrorKind::TooLarge,
                format!(
                    "request of {} bytes exceeds the limit of {MAX_REQUEST_BYTES}",
                    line.len()
                ),
            ),
        });
    }
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| DecodeError {
        id: None,
        error: ControlError::new(ErrorKind::BadRequest, format!("not valid JSON: {e}"))
            .with_hint("send one JSON object per line: {\"version\":1,\"id\":1,\"request\":{\"op\":\"hello\"}}"),
    })?;
    let id = value.get("id").and_then(serde_json::Value::as_u64);
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(DecodeError {
                id,
                error: ControlError::new(
                    ErrorKind::UnsupportedVersion,
                    format!(
                    "protocol version {v} is not supported; this daemon speaks {PROTOCOL_VERSION}"
                ),
                )
                .with_hint("use a weft CLI of the same release as weftd"),
            })
        }
        None => {
            return Err(DecodeError {
                id,
                error: ControlError::new(
                    ErrorKind::BadRequest,
                    "missing or invalid \"version\" (a number)",
                ),
            })
        }
    }
    crate::text_form::decode_shape_first(|| RequestEnvelope::deserialize(&value)).map_err(
        |(e, only_a_value)| {
            let place = place(&value);
            DecodeError {
                id,
                error: if only_a_value {
                    // A well-formed request with an address, MAC or VNI that is not one.
                    ControlError::new(ErrorKind::Invalid, format!("{place}{e}"))
                } else {
                    ControlError::new(
                        ErrorKind::BadRequest,
                        format!("invalid request: {place}{e}"),
                    )
                },
            }
        },
    )
}

/// Where in a configuration a value that does not decode is, by the names a user gave:
/// `switch "br0": port "vx": ` for one inside port `vx` of switch `br0` (`config_apply`),
/// `switch "br0": ` for one elsewhere in that switch; empty outside a configuration (a
/// request names its one switch and port itself). (The request's tagged enums buffer their
/// fields, so serde cannot say where it was; each switch and port is decoded on its own.)
fn place(envelope: &serde_json::Value) -> String {
    use crate::state::{PortState, SwitchState};
    let Some(switches) = envelope
        .pointer("/request/state/switches")
        .and_then(serde_json::Value::as_array)
    else {
        return String::new();
    };
    let named = |v: &serde_json::Value| {
        v.get("name")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    for switch in switches {
        if SwitchState::deserialize(switch).is_ok() {
            continue;
        }
        let Some(name) = named(switch) else {
            return String::new();
        };
        let mut place = format!("switch {name:?}: ");
        let ports = switch.get("ports").and_then(serde_json::Value::as_array);
        if let Some(port) = ports
            .into_iter()
            .flatten()
            .find(|p| PortState::deserialize(*p).is_err())
        {
            if let Some(port) = named(port) {
                place.push_str(&format!("port {port:?}: "));
            }
        }
        return place;
    }
    String::new()
}

/// One response as a line (newline included).
pub fn encode_response(envelope: &ResponseEnvelope) -> String {
    let (ok, error) = match &envelope.result {
        Ok(r) => (Some(r.clone()), None),
        Err(e) => (None, Some(e.clone())),
    };
    let wire = WireResponse {
        version: envelope.version,
        id: envelope.id,
        ok,
        error,
    };
    let mut line = serde_json::to_string(&wire).unwrap_or_default();
    line.push('\n');
    line
}

/// Decodes one response line.
pub fn decode_response(line: &[u8]) -> Result<ResponseEnvelope, ControlError> {
    let wire: WireResponse = serde_json::from_slice(line).map_err(|e| {
        ControlError::new(
            ErrorKind::BadRequest,
            format!("invalid response from weftd: {e}"),
        )
    })?;
    let result = match (wire.ok, wire.error) {
        (Some(ok), None) => Ok(ok),
        (None, Some(err)) => Err(err),
        _ => {
            return Err(ControlError::new(
                ErrorKind::BadRequest,
                "invalid response from weftd: needs exactly one of \"ok\" and \"error\"",
            ))
        }
    };
    Ok(ResponseEnvelope {
        version: wire.version,
        id: wire.id,
        result,
    })
}

/// Bytes as lowercase hex.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The inverse of [`hex_encode`]; `None` on odd length or a non-hex digit.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let digits = s.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    digits
        .chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests;
