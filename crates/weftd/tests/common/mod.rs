//! A real weftd in a temporary directory, driven over its socket with raw JSON lines. The
//! process is killed and the directory removed when the test ends, failed or not.
// Each test file uses part of this module, and it is private to each.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const WEFTD: &str = env!("CARGO_BIN_EXE_weftd");

/// A free TCP port on 127.0.0.1 (free when asked; good enough for a test).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    pub metrics_port: u16,
    pub extra_args: Vec<String>,
}

impl Daemon {
    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }
    pub fn socket(&self) -> PathBuf {
        self.run_dir().join("weftd.sock")
    }
    pub fn state_file(&self) -> PathBuf {
        self.dir.path().join("state").join("state.json")
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weftd.stderr")).unwrap_or_default()
    }

    /// The command line, without starting it.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(WEFTD);
        cmd.arg("--foreground")
            .arg("--runtime-dir")
            .arg(self.run_dir())
            .arg("--state-file")
            .arg(self.state_file())
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{}", self.metrics_port))
            .args(&self.extra_args)
            .env("WEFTD_LOG", "weftd=debug");
        cmd
    }

    /// A daemon not started yet.
    pub fn new() -> Daemon {
        Daemon {
            dir: tempfile::tempdir().unwrap(),
            child: None,
            metrics_port: free_port(),
            extra_args: Vec::new(),
        }
    }

    /// A daemon not started yet, with this configuration file.
    pub fn with_config(text: &str) -> Daemon {
        let mut d = Daemon::new();
        let path = d.dir.path().join("weftd.toml");
        std::fs::write(&path, text).unwrap();
        d.extra_args = vec!["--config".into(), path.to_str().unwrap().into()];
        d
    }

    /// Starts a daemon with the embedded default and waits until it answers.
    pub fn start() -> Daemon {
        let mut d = Daemon::new();
        d.launch();
        d
    }

    /// Starts the process and waits until it answers `hello`.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "already running");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("weftd.stderr"))
            .unwrap();
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("weftd exited with {status} while starting:\n{}", self.log());
            }
            if let Ok(mut c) = self.try_client() {
                if c.request(json!({"op": "hello"}))["ok"]["kind"] == "hello" {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "weftd did not come up:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs weftd to completion with these extra arguments (for refusals to start).
    pub fn run_to_exit(&self, extra: &[&str]) -> Output {
        let mut cmd = self.command();
        cmd.args(extra).stdin(Stdio::null());
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("weftd did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    pub fn try_client(&self) -> std::io::Result<Client> {
        Client::connect(&self.socket())
    }

    pub fn client(&self) -> Client {
        self.try_client().unwrap()
    }

    /// One request on a fresh connection.
    pub fn request(&self, request: Value) -> Value {
        self.client().request(request)
    }

    /// One request that must succeed; its `ok`.
    pub fn ok(&self, request: Value) -> Value {
        let r = self.request(request.clone());
        assert!(r.get("ok").is_some(), "{request} failed: {r}");
        r["ok"].clone()
    }

    /// One request that must fail; its error kind.
    pub fn err_kind(&self, request: Value) -> String {
        let r = self.request(request.clone());
        r["error"]["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{request} did not fail: {r}"))
            .to_string()
    }

    fn signal(&mut self, signal: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("not running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("weftd did not stop on {signal}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM; weftd must exit 0.
    pub fn stop(&mut self) {
        let status = self.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(
            status.success(),
            "weftd exited with {status}:\n{}",
            self.log()
        );
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
    }

    pub fn config(&self) -> Value {
        self.ok(json!({"op": "config_show"}))["state"].clone()
    }

    pub fn scrape(&self, path: &str) -> (String, String) {
        http_get(self.metrics_port, path)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A raw HTTP GET: (status line and headers, body).
pub fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}

pub struct Client {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl Client {
    pub fn connect(path: &Path) -> std::io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client {
            stream,
            reader,
            next_id: 1,
        })
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next response line, parsed (panics on timeout or close).
    pub fn read_response(&mut self) -> Value {
        self.try_read_line()
            .map(|l| serde_json::from_str(&l).unwrap_or_else(|e| panic!("bad response {l:?}: {e}")))
            .expect("no response")
    }

    /// The next line, or None when the daemon closed the connection.
    pub fn try_read_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(line),
            Err(e) => panic!("reading a response: {e}"),
        }
    }

    /// Sends a request with the envelope and returns the whole response.
    pub fn request(&mut self, request: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"version": 1, "id": id, "request": request}).to_string();
        self.send_raw(format!("{line}\n").as_bytes()).unwrap();
        let r = self.read_response();
        assert_eq!(r["id"], id, "response id: {r}");
        r
    }

    /// `hello`, answered ok? False on a refusal, a closed connection or any other answer.
    pub fn hello_works(&mut self) -> bool {
        let line = format!(
            "{}\n",
            json!({"version": 1, "id": 1, "request": {"op": "hello"}})
        );
        if self.send_raw(line.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        matches!(self.reader.read_line(&mut answer), Ok(n) if n > 0)
            && answer.contains("\"kind\":\"hello\"")
    }

    /// True once the daemon has closed the connection: reads reach EOF, or a reset (a
    /// close with our unread bytes still in its queue resets the connection).
    pub fn closed_by_daemon(&mut self) -> bool {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// Checks Prometheus text: HELP/TYPE before samples, numeric values, escaped labels.
pub fn check_exposition(text: &str) -> Result<usize, String> {
    let mut typed = std::collections::BTreeSet::new();
    let mut samples = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let parts: Vec<&str> = rest.splitn(3, ' ').collect();
            match parts.as_slice() {
                ["HELP", _, _] => {}
                ["TYPE", name, kind] if ["counter", "gauge"].contains(kind) => {
                    if !typed.insert(name.to_string()) {
                        return Err(format!("typed twice: {line}"));
                    }
                }
                _ => return Err(format!("bad comment: {line}")),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or(format!("no value: {line}"))?;
        value
            .parse::<f64>()
            .map_err(|_| format!("bad value: {line}"))?;
        let name = series.split('{').next().unwrap_or("");
        if !typed.contains(name) {
            return Err(format!("untyped: {line}"));
        }
        let labels = &series[name.len()..];
        let well_formed = labels.is_empty() || (labels.starts_with('{') && labels.ends_with("\"}"));
        if !well_formed {
            return Err(format!("bad labels: {line}"));
        }
        samples += 1;
    }
    Ok(samples)
}
