//! The `vhost` crate's request handler for an adopted connection, with the negotiation
//! the frontend made restored.
//!
//! Why this detour: `BackendReqHandler` keeps what was negotiated (the features offered
//! and acknowledged, the protocol features acknowledged, and from them whether REPLY_ACK
//! is on) in private fields, set only by the requests themselves. A handler made with
//! `from_stream` on the adopted connection would think nothing was negotiated: it would
//! stop answering requests that ask for an acknowledgement (the frontend would hang) and
//! refuse `SET_VRING_ENABLE`. The crate offers no way to set them. So the handler is made
//! on one end of a socket pair, the frontend's four negotiation requests are written into
//! the other end by hand (`GET_FEATURES`, `SET_FEATURES` with what the frontend
//! acknowledged, `GET_PROTOCOL_FEATURES`, `SET_PROTOCOL_FEATURES` likewise) and handled —
//! reaching the new device model as they reached the old one, and refused by it as a
//! frontend's would be — their replies read and dropped; then the adopted connection is
//! duplicated onto the handler's descriptor number (`dup3`), so that the handler, which
//! reads and writes by that number, now talks to the frontend. The crate's endpoint keeps
//! no buffered bytes between messages, so nothing of the socket pair is left over.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vhost::vhost_user::message::FrontendReq;
use vhost::vhost_user::BackendReqHandler;

use super::HandoverError;
use crate::control::Device;
use crate::server::lock;

/// Header flags: protocol version 1; a reply.
const VERSION: u32 = 0x1;
const REPLY: u32 = 0x4;
/// A request's header: request, flags, payload size.
const HEADER_LEN: usize = 12;

/// A handler on `conn` that has negotiated `features` and `protocol` into `device`.
pub(super) fn handler_for(
    conn: &UnixStream,
    device: &Arc<Mutex<Device>>,
    features: u64,
    protocol: u64,
) -> Result<BackendReqHandler<Mutex<Device>>, HandoverError> {
    let (ours, mut theirs) =
        UnixStream::pair().map_err(HandoverError::io("creating a socket pair"))?;
    // Replies are written before `handle_request` returns; a read that waits is a bug.
    theirs
        .set_read_timeout(Some(Duration::from_secs(1)))
        .map_err(HandoverError::io("setting up a socket pair"))?;
    let number = ours.as_raw_fd();
    let mut handler = BackendReqHandler::from_stream(ours, Arc::clone(device));
    let steps = [
        (FrontendReq::GET_FEATURES, None),
        (FrontendReq::SET_FEATURES, Some(features)),
        (FrontendReq::GET_PROTOCOL_FEATURES, None),
        (FrontendReq::SET_PROTOCOL_FEATURES, Some(protocol)),
    ];
    for (request, value) in steps {
        let code = request as u32;
        let mut frame = Vec::with_capacity(HEADER_LEN + 8);
        frame.extend_from_slice(&code.to_le_bytes());
        frame.extend_from_slice(&VERSION.to_le_bytes());
        let size: u32 = if value.is_some() { 8 } else { 0 };
        frame.extend_from_slice(&size.to_le_bytes());
        if let Some(v) = value {
            frame.extend_from_slice(&v.to_le_bytes());
        }
        theirs
            .write_all(&frame)
            .map_err(HandoverError::io("replaying the negotiation"))?;
        if let Err(e) = handler.handle_request() {
            let reason = lock(device).take_refusal().unwrap_or_else(|| e.to_string());
            return Err(HandoverError::Refused {
                request: format!("{request:?}"),
                reason,
            });
        }
        if value.is_none() {
            // A GET: its reply, a header and a u64.
            let mut reply = [0u8; HEADER_LEN + 8];
            theirs
                .read_exact(&mut reply)
                .map_err(HandoverError::io("reading a replayed reply"))?;
            let word =
                |i: usize| u32::from_le_bytes([reply[i], reply[i + 1], reply[i + 2], reply[i + 3]]);
            if word(0) != code || word(4) & REPLY == 0 {
                return Err(HandoverError::Negotiation(format!(
                    "unexpected reply to {request:?}"
                )));
            }
        }
    }
    // SAFETY: no memory is involved. `dup3` makes descriptor `number`, which the handler's
    // stream owns (and keeps: the handler is alive and returned), refer to the adopted
    // connection instead of our end of the socket pair (closed by this). Nothing else owns
    // or closes `number`; `conn` stays its own descriptor. O_CLOEXEC as every descriptor
    // the port makes.
    let r = unsafe { libc::dup3(conn.as_raw_fd(), number, libc::O_CLOEXEC) };
    if r < 0 {
        return Err(HandoverError::Io {
            what: "moving the connection under the handler",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(handler)
}
