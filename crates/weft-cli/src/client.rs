//! The connection to weftd: one request out, one response back, ids checked, time bounded.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weft_control::{
    decode_response, encode_request, Request, RequestEnvelope, Response, ResponseEnvelope,
    PROTOCOL_VERSION,
};

use crate::error::CliError;

/// The longest response line read (bytes). A `capture_read` of 256 jumbo frames in hex is
/// the biggest legitimate answer; anything longer is a broken daemon.
pub const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// How long a failed send waits for the line saying why weftd closed the connection.
const REFUSAL_WAIT: Duration = Duration::from_secs(1);
/// The longest such line read.
const MAX_REFUSAL_BYTES: u64 = 64 * 1024;

/// Where weftd listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Its Unix control socket.
    Unix(PathBuf),
    /// Its TCP listener, which wants a token.
    Tcp {
        /// `host:port`.
        addr: String,
        /// The shared secret.
        token: String,
    },
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
            Endpoint::Tcp { addr, .. } => write!(f, "{addr}"),
        }
    }
}

/// weftd's default socket: `/run/weft/weftd.sock` as root, else
/// `$XDG_RUNTIME_DIR/weft/weftd.sock` (`/run/user/UID/...` when the variable is unset).
pub fn default_socket_path() -> PathBuf {
    let uid = nix::unistd::geteuid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty());
    socket_path_for(uid.is_root(), uid.as_raw(), xdg.as_deref().map(Path::new))
}

/// The rule behind [`default_socket_path`], without the environment.
pub fn socket_path_for(is_root: bool, uid: u32, xdg_runtime_dir: Option<&Path>) -> PathBuf {
    let runtime = if is_root {
        PathBuf::from("/run")
    } else {
        match xdg_runtime_dir {
            Some(dir) => dir.to_path_buf(),
            None => PathBuf::from(format!("/run/user/{uid}")),
        }
    };
    runtime.join("weft").join("weftd.sock")
}

/// Something that answers requests: the real [`Client`], or a script in tests.
pub trait Daemon {
    /// Sends `request` and waits for its answer; `extra_wait` is added to the usual timeout
    /// (for requests that wait on purpose, like `capture_read`).
    fn call_waiting(
        &mut self,
        request: Request,
        extra_wait: Duration,
    ) -> Result<Response, CliError>;

    /// Sends `request` and waits for its answer.
    fn call(&mut self, request: Request) -> Result<Response, CliError> {
        self.call_waiting(request, Duration::ZERO)
    }
}

trait Stream: Read + Write + Send {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Stream for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

impl Stream for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

/// A connection to weftd. Requests on one connection are answered in order.
pub struct Client {
    conn: BufReader<Box<dyn Stream>>,
    token: Option<String>,
    next_id: u64,
    timeout: Duration,
}

impl Client {
    /// Connects; `timeout` bounds the connect and every answer.
    pub fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Client, CliError> {
        let connect_error = |source| CliError::Connect {
            endpoint: endpoint.to_string(),
            source,
        };
        let (stream, token): (Box<dyn Stream>, _) = match endpoint {
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path).map_err(connect_error)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_error)?;
                (Box::new(s), None)
            }
            Endpoint::Tcp { addr, token } => {
                let s = connect_tcp(addr, timeout).map_err(connect_error)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_error)?;
                (Box::new(s), Some(token.clone()))
            }
        };
        Ok(Client {
            conn: BufReader::new(stream),
            token,
            next_id: 1,
            timeout,
        })
    }

    fn send(&mut self, request: Request) -> Result<u64, CliError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = encode_request(&RequestEnvelope {
            version: PROTOCOL_VERSION,
            id,
            token: self.token.clone(),
            request,
        });
        let stream = self.conn.get_mut();
        let sent = stream
            .write_all(line.as_bytes())
            .and_then(|()| stream.flush());
        if let Err(e) = sent {
            return Err(self.refusal_or_broken("sending a request", &e));
        }
        Ok(id)
    }

    /// A daemon that refuses a connection (too many clients, permission) writes why and
    /// closes, so sending may fail first: that line, when it came, says more than the
    /// broken connection.
    fn refusal_or_broken(&mut self, doing: &str, e: &io::Error) -> CliError {
        let waited = self
            .conn
            .get_ref()
            .set_read_timeout(Some(REFUSAL_WAIT.min(self.timeout)));
        let mut line = Vec::new();
        let read = (&mut self.conn)
            .take(MAX_REFUSAL_BYTES)
            .read_until(b'\n', &mut line);
        if waited.is_ok() && read.is_ok_and(|n| n > 0) {
            if let Ok(ResponseEnvelope { result: Err(e), .. }) = decode_response(&line) {
                return CliError::Daemon(e);
            }
        }
        broken(doing, e)
    }

    fn receive(&mut self, wait: Duration) -> Result<Vec<u8>, CliError> {
        self.conn
            .get_ref()
            .set_read_timeout(Some(wait))
            .map_err(|e| broken("setting the timeout", &e))?;
        let mut line = Vec::new();
        let read = (&mut self.conn)
            .take(MAX_RESPONSE_BYTES)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => Err(CliError::Protocol(
                "weftd closed the connection without answering".into(),
            )),
            Ok(_) if line.last() != Some(&b'\n') => {
                if u64::try_from(line.len()).unwrap_or(u64::MAX) >= MAX_RESPONSE_BYTES {
                    Err(CliError::Protocol(format!(
                        "weftd's answer is longer than {MAX_RESPONSE_BYTES} bytes"
                    )))
                } else {
                    Err(CliError::Protocol(
                        "weftd closed the connection in the middle of an answer".into(),
                    ))
                }
            }
            Ok(_) => Ok(line),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(CliError::Timeout(wait))
            }
            Err(e) => Err(broken("reading the answer", &e)),
        }
    }
}

impl Daemon for Client {
    fn call_waiting(
        &mut self,
        request: Request,
        extra_wait: Duration,
    ) -> Result<Response, CliError> {
        let id = self.send(request)?;
        let line = self.receive(self.timeout.saturating_add(extra_wait))?;
        let envelope = decode_response(&line).map_err(|e| CliError::Protocol(e.message))?;
        // A request too broken to have an id is answered with id 0; only errors come so.
        match envelope.result {
            Err(e) if envelope.id == id || envelope.id == 0 => Err(CliError::Daemon(e)),
            Ok(r) if envelope.id == id => Ok(r),
            _ => Err(CliError::Protocol(format!(
                "weftd answered request {} to request {id}",
                envelope.id
            ))),
        }
    }
}

fn connect_tcp(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn broken(doing: &str, e: &io::Error) -> CliError {
    CliError::Protocol(format!(
        "connection to weftd broke while {doing}: {}",
        crate::error::io_reason(e)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_uses_run_weft() {
        assert_eq!(
            socket_path_for(true, 0, Some(Path::new("/run/user/0"))),
            PathBuf::from("/run/weft/weftd.sock")
        );
    }

    #[test]
    fn users_use_their_runtime_dir() {
        assert_eq!(
            socket_path_for(false, 1000, Some(Path::new("/tmp/rt"))),
            PathBuf::from("/tmp/rt/weft/weftd.sock")
        );
        assert_eq!(
            socket_path_for(false, 1000, None),
            PathBuf::from("/run/user/1000/weft/weftd.sock")
        );
    }

    /// The line weftd writes to a client it refuses for the limit before closing.
    fn limit_line() -> String {
        weft_control::encode_response(&ResponseEnvelope {
            version: PROTOCOL_VERSION,
            id: 0,
            result: Err(weft_control::ControlError::new(
                weft_control::ErrorKind::LimitReached,
                "too many clients",
            )
            .with_hint("weftd serves 32 clients at once (control.max_clients)")),
        })
    }

    fn assert_limit_shown(e: &CliError) {
        assert!(
            matches!(e, CliError::Daemon(d) if d.kind == weft_control::ErrorKind::LimitReached),
            "{e:?}"
        );
        let text = e.render();
        assert!(text.contains("too many clients"), "{text}");
        assert!(text.contains("max_clients"), "{text}");
        assert!(!text.contains("same release"), "{text}");
    }

    #[test]
    fn a_unix_client_refused_for_the_limit_shows_why_not_a_broken_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weftd.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut client = Client::connect(&Endpoint::Unix(path), Duration::from_secs(5)).unwrap();
        // Refused and closed before the request is sent: sending fails with EPIPE.
        let (mut refused, _) = listener.accept().unwrap();
        refused.write_all(limit_line().as_bytes()).unwrap();
        drop(refused);
        let e = client.call(Request::Hello {}).unwrap_err();
        assert_limit_shown(&e);
    }

    #[test]
    fn a_tcp_client_refused_for_the_limit_shows_why() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let endpoint = Endpoint::Tcp {
            addr,
            token: "0123456789abcdef".into(),
        };
        let mut client = Client::connect(&endpoint, Duration::from_secs(5)).unwrap();
        let (mut refused, _) = listener.accept().unwrap();
        refused.write_all(limit_line().as_bytes()).unwrap();
        drop(refused);
        std::thread::sleep(Duration::from_millis(50));
        let e = client.call(Request::Hello {}).unwrap_err();
        assert_limit_shown(&e);
    }

    #[test]
    fn connecting_to_a_missing_socket_is_a_connect_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.sock");
        let e = Client::connect(&Endpoint::Unix(path), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(e, CliError::Connect { .. }), "{e:?}");
    }
}
