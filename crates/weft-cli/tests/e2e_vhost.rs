//! End to end with a real vhost-user frontend through the CLI: a real weftd, two
//! `vhost-user` ports added with `weft port add`, DPDK `dpdk-testpmd` connecting a
//! virtio-user port to each and forwarding between them (`start tx_first 32`), and
//! `weft port show` counting the frames and showing the negotiated connection.
//!
//! Needs root (weftd's default runtime directory and hugepages), `dpdk-testpmd` (Debian
//! `dpdk-dev`) and 128 free 2 MB hugepages at /dev/hugepages (`scripts/install-test-deps`);
//! without them the test says SKIP and passes.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{code, stderr, stdout, weft_cmd};
use weft_control::Response;
use weft_testlab::testpmd;

/// The weftd binary of this workspace, built (or brought up to date) on first use.
fn weftd_binary() -> PathBuf {
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
}

/// Why this machine cannot run the test, if it cannot.
fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    testpmd::missing()
}

/// A weftd in a temporary directory; killed when dropped.
struct Weftd {
    dir: tempfile::TempDir,
    child: Child,
}

impl Weftd {
    fn start() -> Weftd {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("weftd.log")).unwrap();
        let child = Command::new(weftd_binary())
            .arg("--foreground")
            .arg("--runtime-dir")
            .arg(dir.path().join("run"))
            .arg("--state-file")
            .arg(dir.path().join("state.json"))
            .args(["--metrics-listen", "off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut d = Weftd { dir, child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while code(&d.weft(&["hello"])) != 0 {
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("weftd exited with {status}:\n{}", d.log());
            }
            assert!(
                Instant::now() < deadline,
                "weftd did not come up:\n{}",
                d.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weftd.log")).unwrap_or_default()
    }

    fn vhost_socket(&self, port: &str) -> PathBuf {
        self.dir.path().join(format!("run/vhost/br0-{port}.sock"))
    }

    fn weft(&self, args: &[&str]) -> Output {
        weft_cmd()
            .arg("--socket")
            .arg(self.dir.path().join("run/weftd.sock"))
            .args(args)
            .output()
            .unwrap()
    }

    /// `weft --json ARGS`, which must succeed; the answer.
    fn json(&self, args: &[&str]) -> Response {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let o = self.weft(&all);
        assert_eq!(code(&o), 0, "weft {args:?}: {}\n{}", stderr(&o), self.log());
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
    }
}

impl Drop for Weftd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `port show`'s answer for `br0:PORT`: its offloads and its received and sent frames.
fn port_show(weftd: &Weftd, port: &str) -> (Vec<String>, u64, u64) {
    match weftd.json(&["port", "show", &format!("br0:{port}")]) {
        Response::Port { port, counters } => {
            (port.offloads, counters.rx_packets, counters.tx_packets)
        }
        other => panic!("not a port: {other:?}"),
    }
}

#[test]
fn testpmd_traffic_through_vhost_user_ports_added_with_weft_is_counted() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP: {why}");
        return;
    }
    let weftd = Weftd::start();
    for port in ["a", "b"] {
        let o = weftd.weft(&["port", "add", &format!("br0:{port}"), "vhost-user"]);
        assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
    }
    let (sock_a, sock_b) = (weftd.vhost_socket("a"), weftd.vhost_socket("b"));
    assert!(sock_a.exists() && sock_b.exists());
    let (offloads, _, _) = port_show(&weftd, "a");
    assert!(offloads.iter().any(|o| o == "disconnected"), "{offloads:?}");

    let mut pmd = testpmd::spawn(
        &format!("weft-cli-e2e-{}", std::process::id()),
        &sock_a,
        &sock_b,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let running = |p: &str| port_show(&weftd, p).0.iter().any(|o| o == "running");
    while !(running("a") && running("b")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = running("a") && running("b");
    let (out, _) = testpmd::run_and_quit(&mut pmd, started);
    assert!(
        started,
        "testpmd never started both rings\n{out}\n{}",
        weftd.log()
    );

    for port in ["a", "b"] {
        let (offloads, rx, tx) = port_show(&weftd, port);
        eprintln!("br0:{port}: rx {rx}, tx {tx}, offloads {offloads:?}");
        // At least testpmd's first burst of 32 each way (see weft-vhost's dpdk_testpmd.rs
        // for why later rounds may lose frames on a loaded machine).
        assert!(rx >= 32 && tx >= 32, "br0:{port}: rx {rx}, tx {tx}\n{out}");
    }
    for port in ["a", "b"] {
        let o = weftd.weft(&["port", "del", &format!("br0:{port}")]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert!(
        !sock_a.exists() && !sock_b.exists(),
        "the sockets outlived their ports"
    );
}
