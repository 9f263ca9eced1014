//! A TCP client's admission: nothing vouches for it until a request carries the token, so
//! until then it holds one of a few handshake slots of its own (never a shared one), for a
//! fixed time that bytes trickling in do not extend. Its first request must come whole
//! within that time and carry the token; anything else (silence, a bad line, a wrong
//! token) ends the connection. Only then does it take a shared slot, outside those kept
//! for root, and is served like any client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_control::{decode_request, ControlError, ErrorKind, MAX_REQUEST_BYTES};

use super::conn::{self, Conn, Context, Line, LineReader};
use super::{ClientSlots, Slot};
use crate::control::{self, Session};

/// TCP connections that may be proving the token at once; the next is told
/// `limit_reached` and closed.
pub const HANDSHAKE_SLOTS: usize = 8;
/// The longest a TCP client may take to send its first request.
pub const MAX_HANDSHAKE_TIME: Duration = Duration::from_secs(10);

/// The time a new TCP connection has to send its first request: the idle timeout, at most
/// [`MAX_HANDSHAKE_TIME`].
pub fn handshake_time(idle_timeout: Duration) -> Duration {
    idle_timeout.min(MAX_HANDSHAKE_TIME)
}

/// What a TCP connection holds until it is admitted.
pub struct Admission<'a> {
    /// Its handshake slot, freed once admitted (or gone).
    pub handshake: Slot,
    /// When its first request must be in, fixed at accept.
    pub deadline: Instant,
    /// The shared slots it moves to.
    pub slots: &'a Arc<ClientSlots>,
}

/// Serves a TCP connection: admission, then requests until it ends.
pub fn serve(conn: &mut dyn Conn, ctx: &Context<'_>, admission: Admission<'_>) {
    let mut reader = LineReader::new(MAX_REQUEST_BYTES);
    let Some((line, last)) = first_line(conn, &mut reader, admission.deadline) else {
        return;
    };
    let envelope = match decode_request(&line) {
        Ok(e) => e,
        Err(e) => {
            let _ = conn.write_all(conn::bad_line(e, ctx).line.as_bytes());
            return;
        }
    };
    if let Some(refusal) = conn::check_token(&envelope, ctx) {
        let _ = conn.write_all(refusal.line.as_bytes());
        return;
    }
    let Some(_slot) = admission.slots.take_unreserved() else {
        let e = ControlError::new(ErrorKind::LimitReached, "too many clients").with_hint(format!(
            "{} (TCP clients may use {} of them; the others are kept for root on the control socket)",
            super::limit_hint(admission.slots.max),
            admission.slots.max - admission.slots.reserved()
        ));
        let _ = conn.write_all(conn::error_line(envelope.id, e).as_bytes());
        return;
    };
    drop(admission.handshake);
    let mut session = Session::new(ctx.files_as.clone());
    let reply = conn::answer(envelope, ctx, &mut session);
    if conn.write_all(reply.line.as_bytes()).is_ok() && !last {
        conn::serve_lines(conn, ctx, &mut reader, &mut session);
    }
    control::lock(ctx.controller).end_session(&mut session);
}

/// The first line that is not blank, if it comes whole before `deadline`; with true when
/// the client closed right after it.
fn first_line(
    conn: &mut dyn Conn,
    reader: &mut LineReader,
    deadline: Instant,
) -> Option<(Vec<u8>, bool)> {
    loop {
        let (line, last) = match reader.next_line(conn, deadline) {
            Ok(Line::Complete(l)) => (l, false),
            Ok(Line::Unterminated(l)) => (l, true),
            Ok(Line::TooLong) => {
                conn::too_long(conn);
                return None;
            }
            Ok(Line::Closed) | Ok(Line::TimedOut) | Err(_) => {
                tracing::debug!("TCP client sent no request in time; closing the connection");
                return None;
            }
        };
        if !line.iter().all(u8::is_ascii_whitespace) {
            return Some((line, last));
        }
        if last {
            return None;
        }
    }
}
