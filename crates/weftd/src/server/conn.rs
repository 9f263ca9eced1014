//! One client connection: read bounded request lines, answer each, until the client goes,
//! misbehaves or idles.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_control::codec::DecodeError;
use weft_control::{
    decode_request, encode_response, ControlError, ErrorKind, RequestEnvelope, ResponseEnvelope,
    MAX_REQUEST_BYTES, PROTOCOL_VERSION,
};

use super::auth::token_matches;
use crate::control::{self, Controller, Session};
use crate::ratelimit::RateLimit;

/// A stream whose reads can time out.
pub trait Conn: Read + Write {
    /// Sets the read timeout (never zero; `None` blocks).
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Conn for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

impl Conn for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

/// What reading the next line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line, without its newline.
    Complete(Vec<u8>),
    /// The client closed after these bytes, without a newline.
    Unterminated(Vec<u8>),
    /// The client closed between lines.
    Closed,
    /// More than `max` bytes came without a newline.
    TooLong,
    /// The deadline passed first.
    TimedOut,
}

/// Reads newline-terminated lines of at most `max` bytes (newline included), never
/// holding much more than that.
pub struct LineReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    max: usize,
}

impl LineReader {
    /// A reader of lines up to `max` bytes.
    pub fn new(max: usize) -> Self {
        LineReader {
            buf: Vec::new(),
            scanned: 0,
            max,
        }
    }

    /// The next line, waiting until `deadline` at most.
    pub fn next_line(&mut self, conn: &mut dyn Conn, deadline: Instant) -> io::Result<Line> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(pos) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let end = self.scanned + pos;
                if end + 1 > self.max {
                    return Ok(Line::TooLong);
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                self.scanned = 0;
                return Ok(Line::Complete(line));
            }
            self.scanned = self.buf.len();
            if self.buf.len() >= self.max {
                return Ok(Line::TooLong);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Line::TimedOut);
            }
            conn.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
            let room = (self.max - self.buf.len()).min(chunk.len());
            match conn.read(&mut chunk[..room]) {
                Ok(0) if self.buf.is_empty() => return Ok(Line::Closed),
                Ok(0) => {
                    self.scanned = 0;
                    return Ok(Line::Unterminated(std::mem::take(&mut self.buf)));
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Line::TimedOut)
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a connection needs to answer requests.
pub struct Context<'a> {
    /// The control plane.
    pub controller: &'a Mutex<Controller>,
    /// The token every request must carry (TCP), or none (Unix socket).
    pub token: Option<&'a str>,
    /// Close a connection that completes no request for this long.
    pub idle_timeout: Duration,
    /// Whose permissions the files the client names are opened with.
    pub files_as: control::FileReader,
}

static BAD_REQUESTS: RateLimit = RateLimit::new(10, Duration::from_secs(60));
static REFUSED: RateLimit = RateLimit::new(30, Duration::from_secs(60));
static CHANGES: RateLimit = RateLimit::new(120, Duration::from_secs(60));

/// True for the requests that change the configuration (and the state file).
fn changes_configuration(request: &weft_control::Request) -> bool {
    use weft_control::Request as R;
    match request {
        R::SwitchAdd { .. }
        | R::SwitchDel { .. }
        | R::PortAdd { .. }
        | R::PortDel { .. }
        | R::PortSet { .. }
        | R::FdbAdd { .. }
        | R::FdbDel { .. }
        | R::FdbFlush { .. }
        | R::RemoteMacAdd { .. }
        | R::RemoteMacDel { .. }
        | R::RuleAdd { .. }
        | R::RouteAdd { .. }
        | R::RuleDel { .. } => true,
        R::ConfigApply { dry_run, .. } => !dry_run,
        R::Hello {}
        | R::SwitchList {}
        | R::PortList { .. }
        | R::PortShow { .. }
        | R::FdbShow { .. }
        | R::RemoteMacShow { .. }
        | R::DirectoryStatus {}
        | R::RuleList { .. }
        | R::Stats { .. }
        | R::CaptureStart { .. }
        | R::CaptureRead { .. }
        | R::CaptureStop { .. }
        | R::UpcallSubscribe { .. }
        | R::UpcallRead { .. }
        | R::UpcallUnsubscribe { .. }
        // Data, not configuration: a controller answers with one per packet it handles.
        | R::PacketOut { .. }
        | R::ConfigShow {} => false,
    }
}

/// An error response line.
pub fn error_line(id: u64, error: ControlError) -> String {
    encode_response(&ResponseEnvelope {
        version: PROTOCOL_VERSION,
        id,
        result: Err(error),
    })
}

/// The answer to one request line, and what it means for the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The response line.
    pub line: String,
    /// Close the connection after it (a wrong token; on TCP, any bad line).
    pub close: bool,
    /// A request was decoded and served (it counts as activity; a bad line does not).
    pub served: bool,
}

/// The answer to a line that is not a request: the typed error, and on TCP the close.
pub fn bad_line(DecodeError { id, error }: DecodeError, ctx: &Context<'_>) -> Reply {
    if let Some(suppressed) = BAD_REQUESTS.allow() {
        tracing::warn!(kind = ?error.kind, error = %error.message, suppressed, "bad request");
    }
    Reply {
        line: error_line(id.unwrap_or(0), error),
        // Over TCP nothing vouches for the client: one bad line and it goes.
        close: ctx.token.is_some(),
        served: false,
    }
}

/// The refusal of a request without the right token, when one is wanted (`None`: fine).
pub fn check_token(envelope: &RequestEnvelope, ctx: &Context<'_>) -> Option<Reply> {
    let expected = ctx.token?;
    if token_matches(envelope.token.as_deref(), expected) {
        return None;
    }
    if let Some(suppressed) = BAD_REQUESTS.allow() {
        tracing::warn!(suppressed, "TCP request with a missing or wrong token");
    }
    let e = ControlError::new(ErrorKind::PermissionDenied, "missing or wrong token")
        .with_hint("put the token of weftd's token_file in each request's \"token\"");
    Some(Reply {
        line: error_line(envelope.id, e),
        close: true,
        served: false,
    })
}

/// The response line to one request line. Never panics, whatever the bytes.
pub fn respond(line: &[u8], ctx: &Context<'_>, session: &mut Session) -> Reply {
    let envelope = match decode_request(line) {
        Ok(e) => e,
        Err(e) => return bad_line(e, ctx),
    };
    if let Some(refusal) = check_token(&envelope, ctx) {
        return refusal;
    }
    answer(envelope, ctx, session)
}

/// Serves a decoded request whose token (if any is wanted) was checked.
pub fn answer(envelope: RequestEnvelope, ctx: &Context<'_>, session: &mut Session) -> Reply {
    let op = op_name(&envelope.request);
    let changes = changes_configuration(&envelope.request);
    let result = control::serve(ctx.controller, envelope.request, session);
    match &result {
        // Accepted changes are the audit trail; refusals say why. Both are rate limited:
        // a client can send many.
        Ok(_) if changes => {
            if let Some(suppressed) = CHANGES.allow() {
                tracing::info!(op, id = envelope.id, suppressed, "configuration changed");
            }
        }
        Ok(_) => tracing::debug!(op, id = envelope.id, "request done"),
        Err(e) => {
            if let Some(suppressed) = REFUSED.allow() {
                tracing::info!(op, id = envelope.id, kind = ?e.kind, error = %e.message, suppressed, "request refused");
            }
        }
    }
    let line = encode_response(&ResponseEnvelope {
        version: PROTOCOL_VERSION,
        id: envelope.id,
        result,
    });
    Reply {
        line,
        close: false,
        served: true,
    }
}

/// The request's `op`, for logs.
fn op_name(request: &weft_control::Request) -> String {
    serde_json::to_value(request)
        .ok()
        .and_then(|v| v.get("op").and_then(|o| o.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// Serves one connection until it ends; ends the captures it started.
pub fn serve(conn: &mut dyn Conn, ctx: &Context<'_>) {
    let mut reader = LineReader::new(MAX_REQUEST_BYTES);
    let mut session = Session::new(ctx.files_as.clone());
    serve_lines(conn, ctx, &mut reader, &mut session);
    control::lock(ctx.controller).end_session(&mut session);
}

/// The line after line part of [`serve`], for a connection that may have been served
/// already (a TCP client's first request). The idle deadline moves only when a request is
/// served: blank or bad lines do not keep a connection open.
pub fn serve_lines(
    conn: &mut dyn Conn,
    ctx: &Context<'_>,
    reader: &mut LineReader,
    session: &mut Session,
) {
    let mut deadline = Instant::now() + ctx.idle_timeout;
    loop {
        let (line, last) = match reader.next_line(conn, deadline) {
            Ok(Line::Complete(l)) => (l, false),
            Ok(Line::Unterminated(l)) => (l, true),
            Ok(Line::Closed) => break,
            Ok(Line::TooLong) => {
                too_long(conn);
                break;
            }
            Ok(Line::TimedOut) => {
                tracing::debug!("client idle for too long; closing the connection");
                break;
            }
            Err(e) => {
                tracing::debug!(error = %e, "client read failed");
                break;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            if last {
                break;
            }
            continue;
        }
        let reply = respond(&line, ctx, session);
        if reply.served {
            deadline = Instant::now() + ctx.idle_timeout;
        }
        if conn.write_all(reply.line.as_bytes()).is_err() || reply.close || last {
            break;
        }
    }
}

/// Tells a client its line is over the limit (the connection is then closed).
pub fn too_long(conn: &mut dyn Conn) {
    if let Some(suppressed) = BAD_REQUESTS.allow() {
        tracing::warn!(suppressed, "request line too long; closing the connection");
    }
    let e = ControlError::new(
        ErrorKind::TooLarge,
        format!("request line longer than {MAX_REQUEST_BYTES} bytes"),
    )
    .with_hint("send one request per line, each under the limit");
    let _ = conn.write_all(error_line(0, e).as_bytes());
}

/// Sends one error line on a connection about to be refused, without waiting on it.
pub fn refuse(conn: &mut dyn Write, error: ControlError) {
    let _ = conn.write_all(error_line(0, error).as_bytes());
}

#[cfg(test)]
mod tests;
