//! weft's control protocol, shared by `weftd` and its clients (the `weft` CLI).
//!
//! One request per line, one response per line, JSON (JSON lines), over the daemon's Unix
//! socket (or, when configured, a TCP listener that wants a token). Every request carries the
//! protocol version and an id that its response echoes:
//!
//! ```text
//! → {"version":1,"id":7,"request":{"op":"switch_add","name":"br1"}}
//! ← {"version":1,"id":7,"ok":{"kind":"done"}}
//! ← {"version":1,"id":8,"error":{"kind":"not_found","message":"no switch \"br9\"","hint":"..."}}
//! ```
//!
//! Objects reject unknown fields, requests are bounded ([`MAX_REQUEST_BYTES`]), and every
//! failure is a typed [`ControlError`]. The same types describe the persisted state
//! ([`state::State`]), so `weft config show` prints what `weft config apply` takes.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod codec;
pub mod error;
pub mod request;
pub mod response;
pub mod rule;
pub mod state;
pub mod text_form;

pub use codec::{
    decode_request, decode_response, encode_request, encode_response, RequestEnvelope,
    ResponseEnvelope,
};
pub use error::{ControlError, ErrorKind};
pub use request::{CaptureDirection, Request};
pub use response::Response;
/// The MAC and VNI types the typed fields carry.
pub use weft_packet::{MacAddr, Vni};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest request line the daemon reads (bytes, newline included). Longer lines are
/// refused with [`ErrorKind::TooLarge`] and the connection is closed.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;
