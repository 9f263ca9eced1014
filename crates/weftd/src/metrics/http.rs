//! A tiny HTTP/1.x responder for the metrics: `GET /metrics` (and `HEAD`), one request per
//! connection. Bounded: request heads of at most 8 KiB, read within 5 s, at most 4
//! connections served at once (others are closed at once).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_control::ControlError;

use super::{encode, DaemonGauges};
use crate::control::{self, Controller};
use crate::ratelimit::RateLimit;
use crate::server::ClientSlots;

const MAX_HEAD: usize = 8 * 1024;
const READ_TIME: Duration = Duration::from_secs(5);
const MAX_SCRAPERS: usize = 4;

static ERRORS: RateLimit = RateLimit::new(5, Duration::from_secs(60));

/// Reads a request head (up to the blank line); `None` when it is too long, too slow or
/// cut short.
fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let deadline = Instant::now() + READ_TIME;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        let room = (MAX_HEAD - head.len()).min(chunk.len());
        if room == 0 {
            return None;
        }
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return None,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(head)
}

/// The status, content type and body for a request line.
pub fn route(
    request_line: &str,
    metrics: impl FnOnce() -> Result<String, ControlError>,
) -> (u16, &'static str, String, bool) {
    let mut parts = request_line.split_whitespace();
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    let text = "text/plain; charset=utf-8";
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) || parts.next().is_some() {
        return (400, text, "bad request\n".into(), true);
    }
    let head_only = match method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => return (405, text, "only GET and HEAD\n".into(), false),
    };
    let path = target.unwrap_or("").split('?').next().unwrap_or("");
    match path {
        "/metrics" => match metrics() {
            Ok(body) => (
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                body,
                head_only,
            ),
            Err(e) => (500, text, format!("{}\n", e.message), head_only),
        },
        "/" => (200, text, "weftd: metrics at /metrics\n".into(), head_only),
        _ => (
            404,
            text,
            "not found: metrics are at /metrics\n".into(),
            head_only,
        ),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Internal Server Error",
    }
}

fn serve(mut stream: TcpStream, controller: &Mutex<Controller>, clients: &ClientSlots) {
    let _ = stream.set_write_timeout(Some(READ_TIME));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let text = String::from_utf8_lossy(&head);
    let request_line = text.lines().next().unwrap_or("");
    let (status, content_type, body, head_only) = route(request_line, || {
        let snap = control::lock(controller).snapshot(None)?;
        Ok(encode(
            &snap,
            DaemonGauges {
                control_clients: clients.used(),
            },
        ))
    });
    let mut response = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    if !head_only {
        response.push_str(&body);
    }
    let _ = stream.write_all(response.as_bytes());
}

/// Serves the metrics on `listener` from a new thread.
pub fn spawn(
    listener: TcpListener,
    controller: Arc<Mutex<Controller>>,
    clients: Arc<ClientSlots>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let scrapers = ClientSlots::new(MAX_SCRAPERS);
    std::thread::Builder::new()
        .name("weftd-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        if let Some(suppressed) = ERRORS.allow() {
                            tracing::warn!(error = %e, suppressed, "metrics: accept failed");
                        }
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                let Some(slot) = scrapers.take() else {
                    continue;
                };
                let (controller, clients) = (Arc::clone(&controller), Arc::clone(&clients));
                let spawned = std::thread::Builder::new()
                    .name("weftd-scrape".into())
                    .spawn(move || {
                        let _slot = slot;
                        serve(stream, &controller, &clients);
                    });
                if let Err(e) = spawned {
                    if let Some(suppressed) = ERRORS.allow() {
                        tracing::warn!(error = %e, suppressed, "metrics: cannot start a thread");
                    }
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Result<String, ControlError> {
        Ok("m 1\n".into())
    }

    #[test]
    fn routes_metrics_and_refuses_the_rest() {
        assert_eq!(route("GET /metrics HTTP/1.1", ok).0, 200);
        assert_eq!(route("GET /metrics?x=1 HTTP/1.0", ok).0, 200);
        assert!(route("HEAD /metrics HTTP/1.1", ok).3, "HEAD has no body");
        assert_eq!(route("POST /metrics HTTP/1.1", ok).0, 405);
        assert_eq!(route("GET /nope HTTP/1.1", ok).0, 404);
        assert_eq!(route("GET /metrics", ok).0, 400);
        assert_eq!(route("", ok).0, 400);
        assert_eq!(route("GET /metrics SPDY/3", ok).0, 400);
        assert_eq!(route("GET /metrics HTTP/1.1 extra", ok).0, 400);
        assert_eq!(
            route("GET /metrics HTTP/1.1", || {
                Err(ControlError::new(weft_control::ErrorKind::Internal, "x"))
            })
            .0,
            500
        );
    }
}
