//! Network namespaces, commands with timeouts, and traffic helpers for the end-to-end
//! tests. Every namespace and interface name carries the process id; guards remove what
//! they created even when a test fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// True when the end-to-end tests can run here (root, `/dev/net/tun`); otherwise prints a
/// SKIP line naming `test` and returns false. Missing tools are a failure, not a skip: the
/// test suite installs them (`scripts/install-test-deps`).
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/dev/net/tun").exists() {
        println!("SKIP {test}: needs root and /dev/net/tun (network namespaces, TAP devices, kernel vxlan)");
        return false;
    }
    for tool in ["ip", "iperf3", "ping", "bridge", "ethtool"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        assert!(found, "{tool} is missing: run scripts/install-test-deps");
    }
    true
}

/// True when `program --version` runs (the program is installed).
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// One end-to-end test at a time per test binary: they share two cores and measure.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A name unique to this process and call: `w<pid><tag><n>`, at most 15 bytes.
pub fn unique(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("w{}{tag}{n}", std::process::id() % 100_000);
    assert!(name.len() <= 15, "{name} is too long for an interface name");
    name
}

/// Runs a command to completion within `timeout`, killing it when it overruns.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: no answer within {timeout:?}"));
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    child.wait_with_output().map_err(|e| format!("{what}: {e}"))
}

/// Runs a command that must succeed within `timeout`; returns its stdout.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> String {
    let what = format!("{cmd:?}");
    let out = run(cmd, timeout).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip(args: &[&str]) -> String {
    run_ok(Command::new("ip").args(args), Duration::from_secs(10))
}

/// A network namespace, deleted on drop (with every interface in it).
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = unique(tag);
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn path(&self) -> PathBuf {
        weft_tap::netns::named(&self.name)
    }

    /// A command run inside the namespace.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// `ip ARGS` inside the namespace; must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        run_ok(self.cmd("ip").args(args), Duration::from_secs(10))
    }

    /// Pings `dst` `count` times with `size`-byte payloads (don't fragment); true when all
    /// answers came.
    pub fn ping(&self, dst: &str, count: u32, size: usize) -> bool {
        let out = run(
            self.cmd("ping").args([
                "-c",
                &count.to_string(),
                "-i",
                "0.2",
                "-W",
                "2",
                "-M",
                "do",
                "-s",
                &size.to_string(),
                dst,
            ]),
            Duration::from_secs(u64::from(count) + 10),
        );
        matches!(out, Ok(o) if o.status.success())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(
            Command::new("ip").args(["netns", "del", &self.name]),
            Duration::from_secs(10),
        );
    }
}

/// A background process, killed on drop.
pub struct Background(Child);

impl Background {
    pub fn spawn(cmd: &mut Command) -> Background {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        Background(child)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs iperf3 from `client` to a one-off server on `server_ip` in `server`, with `args`
/// added (`-t 2`, `-R`, `-u -b 200M`...). Returns the JSON report; panics on an error.
pub fn iperf3(server: &Netns, server_ip: &str, client: &Netns, args: &[&str]) -> serde_json::Value {
    let _server = Background::spawn(server.cmd("iperf3").args(["-s", "-1", "-B", server_ip]));
    let mut last = String::new();
    for _ in 0..25 {
        let out = run(
            client
                .cmd("iperf3")
                .args(["-c", server_ip, "-J", "--connect-timeout", "2000"])
                .args(args),
            Duration::from_secs(40),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let report: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        match report.get("error").and_then(|e| e.as_str()) {
            // The server is not listening yet.
            Some(e) if e.contains("connect") => {
                last = e.to_string();
                std::thread::sleep(Duration::from_millis(200));
            }
            Some(e) => panic!("iperf3 {args:?}: {e}"),
            None if out.status.success() => return report,
            None => panic!(
                "iperf3 {args:?} failed: {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    panic!("iperf3 {args:?}: server never answered: {last}");
}

/// Bytes the receiver got in a TCP iperf3 report.
pub fn tcp_bytes_received(report: &serde_json::Value) -> u64 {
    report["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0)
}

/// (bytes received, loss percent) of a UDP iperf3 report.
pub fn udp_result(report: &serde_json::Value) -> (u64, f64) {
    let sum = &report["end"]["sum"];
    let bytes = report["end"]["sum_received"]["bytes"]
        .as_u64()
        .or_else(|| sum["bytes"].as_u64())
        .unwrap_or(0);
    (bytes, sum["lost_percent"].as_f64().unwrap_or(100.0))
}

/// Deterministic test data: xorshift bytes from `seed`.
pub fn test_data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// FNV-1a over `data`: the checksum both ends compare.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Sends `data` over TCP from namespace `from` to `to_ip:port` in namespace `to` (sockets
/// opened inside the namespaces by helper threads) and returns (length, checksum) of what
/// the receiver got. Bounded by `timeout`.
pub fn tcp_transfer(
    from: &Netns,
    to: &Netns,
    to_ip: &str,
    data: &[u8],
    timeout: Duration,
) -> (usize, u64) {
    tcp_transfer_paced(from, to, to_ip, data, (data.len(), Duration::ZERO), timeout)
}

/// [`tcp_transfer`], sending `pace.0` bytes at a time with a pause of `pace.1` after each
/// (a stream that lasts, whatever the machine's speed).
pub fn tcp_transfer_paced(
    from: &Netns,
    to: &Netns,
    to_ip: &str,
    data: &[u8],
    pace: (usize, Duration),
    timeout: Duration,
) -> (usize, u64) {
    let addr: SocketAddr = format!("{to_ip}:7777").parse().expect("address");
    let deadline = Instant::now() + timeout;
    let to_path = to.path();
    let from_path = from.path();
    std::thread::scope(|s| {
        let receiver = s.spawn(move || {
            weft_tap::netns::run_in(Some(&to_path), || {
                let listener = TcpListener::bind(addr).expect("bind");
                listener.set_nonblocking(true).expect("nonblocking");
                let mut stream = loop {
                    match listener.accept() {
                        Ok((s, _)) => break s,
                        Err(_) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(10))
                        }
                        Err(e) => panic!("accept: {e}"),
                    }
                };
                stream.set_nonblocking(false).expect("blocking");
                stream.set_read_timeout(Some(timeout)).expect("timeout");
                let mut got = Vec::with_capacity(data.len());
                stream.read_to_end(&mut got).expect("receive");
                Ok((got.len(), fnv1a(&got)))
            })
            .expect("receiver namespace")
        });
        weft_tap::netns::run_in(Some(&from_path), || {
            let mut stream = loop {
                match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(s) => break s,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    Err(e) => panic!("connect to {addr}: {e}"),
                }
            };
            stream.set_write_timeout(Some(timeout)).expect("timeout");
            for chunk in data.chunks(pace.0.max(1)) {
                stream.write_all(chunk).expect("send");
                std::thread::sleep(pace.1);
            }
            stream
                .shutdown(std::net::Shutdown::Write)
                .expect("shutdown");
            Ok(())
        })
        .expect("sender namespace");
        receiver.join().expect("receiver thread")
    })
}

impl Background {
    /// Sends SIGINT (a capture then writes out what it buffered) and waits up to `timeout`
    /// for the process to end; killed on drop if it has not.
    pub fn interrupt(&mut self, timeout: Duration) {
        let pid = self.0.id().to_string();
        let _ = run(
            Command::new("kill").args(["-INT", &pid]),
            Duration::from_secs(5),
        );
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
