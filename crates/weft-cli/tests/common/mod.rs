//! A fake weftd for tests: a thread on a Unix socket (or TCP port) in a temporary directory,
//! answering each request line with what a handler says, and recording what it was sent.

#![allow(dead_code)] // each test file uses a different part

pub(crate) mod hosts;
pub(crate) mod systemd;
pub(crate) mod taps;
pub(crate) mod weftd;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread;

use weft_control::{
    decode_request, encode_response, ControlError, Request, RequestEnvelope, Response,
    ResponseEnvelope, PROTOCOL_VERSION,
};

/// What the fake answers to one raw line: the raw reply (newline included), or `None` to
/// close the connection without answering.
pub(crate) type RawHandler = dyn Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync;

pub(crate) struct FakeDaemon {
    _dir: tempfile::TempDir,
    pub(crate) socket: PathBuf,
    pub(crate) tcp: Option<String>,
    pub(crate) seen: Arc<Mutex<Vec<RequestEnvelope>>>,
}

impl FakeDaemon {
    /// A fake that answers decoded requests with `handler`.
    pub(crate) fn start<F>(handler: F) -> FakeDaemon
    where
        F: Fn(&Request) -> Result<Response, ControlError> + Send + Sync + 'static,
    {
        Self::start_with(handler, false)
    }

    /// The same, also listening on 127.0.0.1 (any port).
    pub(crate) fn start_tcp<F>(handler: F) -> FakeDaemon
    where
        F: Fn(&Request) -> Result<Response, ControlError> + Send + Sync + 'static,
    {
        Self::start_with(handler, true)
    }

    fn start_with<F>(handler: F, tcp: bool) -> FakeDaemon
    where
        F: Fn(&Request) -> Result<Response, ControlError> + Send + Sync + 'static,
    {
        let seen: Arc<Mutex<Vec<RequestEnvelope>>> = Arc::default();
        let record = Arc::clone(&seen);
        let raw = move |line: &[u8]| {
            let reply = match decode_request(line) {
                Ok(env) => {
                    let result = handler(&env.request);
                    let id = env.id;
                    record.lock().unwrap().push(env);
                    ResponseEnvelope {
                        version: PROTOCOL_VERSION,
                        id,
                        result,
                    }
                }
                Err(e) => ResponseEnvelope {
                    version: PROTOCOL_VERSION,
                    id: e.id.unwrap_or(0),
                    result: Err(e.error),
                },
            };
            Some(encode_response(&reply).into_bytes())
        };
        let mut fake = Self::start_raw(raw);
        fake.seen = seen;
        if tcp {
            fake.tcp = Some(fake.listen_tcp_again());
        }
        fake
    }

    /// A fake that answers raw lines.
    pub(crate) fn start_raw<F>(handler: F) -> FakeDaemon
    where
        F: Fn(&[u8]) -> Option<Vec<u8>> + Send + Sync + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("weftd.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let h: Arc<RawHandler> = Arc::new(handler);
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let h = Arc::clone(&h);
                thread::spawn(move || serve(conn, &*h));
            }
        });
        FakeDaemon {
            _dir: dir,
            socket,
            tcp: None,
            seen: Arc::default(),
        }
    }

    fn listen_tcp_again(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let socket = self.socket.clone();
        // Relay TCP connections to the Unix socket: same handler, same records.
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let unix = std::os::unix::net::UnixStream::connect(&socket).unwrap();
                let (mut a, mut b) = (conn.try_clone().unwrap(), unix.try_clone().unwrap());
                thread::spawn(move || {
                    let _ = std::io::copy(&mut a, &mut b);
                });
                let (mut c, mut d) = (unix, conn);
                thread::spawn(move || {
                    let _ = std::io::copy(&mut c, &mut d);
                });
            }
        });
        addr
    }

    /// The requests received so far.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.request.clone())
            .collect()
    }

    /// `weft --socket SOCKET args...`.
    pub(crate) fn weft(&self, args: &[&str]) -> Output {
        weft_cmd()
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }
}

fn serve<S: Read + Write>(conn: S, handler: &RawHandler) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        match handler(&line) {
            Some(reply) => {
                if reader.get_mut().write_all(&reply).is_err() {
                    return;
                }
            }
            None => return,
        }
    }
}

/// The `weft` binary, with no socket from the environment.
pub(crate) fn weft_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
    c.env_remove("WEFT_SOCKET");
    c
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// `--config DIR/weftd.toml` when a test wrote that file, else nothing (the embedded
/// default configuration).
pub(crate) fn config_args(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let config = dir.join("weftd.toml");
    if config.exists() {
        vec!["--config".into(), config.into_os_string()]
    } else {
        Vec::new()
    }
}

/// The weftd binary of this workspace, built (or brought up to date) on first use in this
/// test process, in the profile the `weft` binary under test was built in.
/// `$WEFT_TEST_WEFTD`, when set, names one built already: `scripts/test` builds every test
/// target first, weftd's binary among them (for weftd's own tests), with the features the
/// whole workspace unifies; `cargo build -p weftd` would build its dependencies again with
/// weftd's own.
pub(crate) fn weftd_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("WEFT_TEST_WEFTD") {
                let path = PathBuf::from(path);
                assert!(
                    path.exists(),
                    "WEFT_TEST_WEFTD={} does not exist",
                    path.display()
                );
                return path;
            }
            let weft = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
            let dir = weft.parent().expect("weft lives in a directory");
            let mut build = Command::new(env!("CARGO"));
            build.args(["build", "--quiet", "-p", "weftd", "--bin", "weftd"]);
            if dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().expect("running cargo to build weftd");
            assert!(status.success(), "cargo build -p weftd failed");
            dir.join("weftd")
        })
        .clone()
}

/// Waits (30 s at most) until the weftd `child`, logging to `log`, answers `weft hello` on
/// `socket`; panics with its log when it exits or does not answer in time.
pub(crate) fn wait_until_answering(child: &mut std::process::Child, socket: &Path, log: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let log = || std::fs::read_to_string(log).unwrap_or_default();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("weftd exited with {status} while starting:\n{}", log());
        }
        let hello = weft_cmd().arg("--socket").arg(socket).arg("hello").output();
        if hello.is_ok_and(|o| o.status.success()) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "weftd did not come up:\n{}",
            log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `weft --json ARGS` run by `weft`, which must succeed; the answer. `log` gives weftd's log
/// for the failure message.
pub(crate) fn json_answer(
    args: &[&str],
    weft: impl FnOnce(&[&str]) -> Output,
    log: impl FnOnce() -> String,
) -> Response {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = weft(&all);
    assert!(
        o.status.success(),
        "weft {args:?} failed: {}\nweftd log:\n{}",
        stderr(&o),
        log()
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("weft {args:?} printed no answer ({e}): {}", stdout(&o)))
}

/// (sent, received) from the summary of a finished `ping -q`.
pub(crate) fn ping_summary(out: &Output) -> (u64, u64) {
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {text}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}
