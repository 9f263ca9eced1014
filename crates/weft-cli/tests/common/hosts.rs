//! Several hosts on one machine: network namespaces joined by an underlay bridge, each
//! running its own weftd, as the overlay, migration and directory tests need them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use weft_control::Response;
use weft_testlab::lab::{self, Netns};

/// The underlay: a bridge `ub` in a namespace of its own, and host namespaces each joined
/// to it by a veth: `u0` in the host with address `{prefix}.{i + 1}`/24, `uh{i}` on the
/// bridge (a test may cut it).
pub(crate) struct Underlay {
    pub(crate) bridge: Netns,
    pub(crate) hosts: Vec<Netns>,
    pub(crate) addresses: Vec<String>,
}

impl Underlay {
    /// `count` hosts on subnet `prefix` (three octets, e.g. `10.99.0`); `tag` names the
    /// namespaces.
    pub(crate) fn new(prefix: &str, count: usize, tag: &str) -> Underlay {
        let bridge = Netns::new(&format!("{tag}u"));
        bridge.ip(&["link", "add", "ub", "type", "bridge"]);
        bridge.ip(&["link", "set", "ub", "up"]);
        let hosts: Vec<Netns> = (0..count).map(|_| Netns::new(&format!("{tag}h"))).collect();
        let addresses: Vec<String> = (1..=count).map(|i| format!("{prefix}.{i}")).collect();
        for (i, ns) in hosts.iter().enumerate() {
            let peer = format!("uh{i}");
            bridge.ip(&["link", "add", &peer, "type", "veth", "peer", "name", "u0"]);
            bridge.ip(&["link", "set", "u0", "netns", &ns.name]);
            bridge.ip(&["link", "set", &peer, "master", "ub", "up"]);
            ns.ip(&["addr", "add", &format!("{}/24", addresses[i]), "dev", "u0"]);
            ns.ip(&["link", "set", "u0", "up"]);
        }
        Underlay {
            bridge,
            hosts,
            addresses,
        }
    }
}

/// An endpoint: a namespace holding the far end of a TAP port named `ifname`, with
/// address `ip`.
pub(crate) struct Endpoint {
    pub(crate) ns: Netns,
    pub(crate) ifname: String,
    pub(crate) ip: String,
}

impl Endpoint {
    /// The interface's MAC, lower case.
    pub(crate) fn mac(&self) -> String {
        let path = format!("/sys/class/net/{}/address", self.ifname);
        let out = lab::run_ok(self.ns.cmd("cat").arg(path), Duration::from_secs(10));
        out.trim().to_lowercase()
    }
}

/// A weftd running inside a host's namespace, with its own runtime directory and state
/// file, metrics off; killed when dropped.
pub(crate) struct Host {
    pub(crate) dir: tempfile::TempDir,
    child: Child,
}

impl Host {
    /// Starts `binary` in `ns` with `args` added, and waits until it answers.
    pub(crate) fn start(binary: &Path, ns: &Netns, args: &[&str]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("weftd.log")).unwrap();
        let mut child = ns
            .cmd(binary.to_str().unwrap())
            .arg("--foreground")
            .arg("--runtime-dir")
            .arg(dir.path().join("run"))
            .arg("--state-file")
            .arg(dir.path().join("state.json"))
            .args(["--metrics-listen", "off"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        super::wait_until_answering(
            &mut child,
            &dir.path().join("run/weftd.sock"),
            &dir.path().join("weftd.log"),
        );
        Host { dir, child }
    }

    /// What weftd logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weftd.log")).unwrap_or_default()
    }

    /// `weft ARGS` against this host's weftd (20 s at most).
    pub(crate) fn weft(&self, args: &[&str]) -> Output {
        let socket = self.dir.path().join("run").join("weftd.sock");
        let mut c = Command::new("timeout");
        c.args(["-k", "2", "20", env!("CARGO_BIN_EXE_weft"), "--socket"])
            .arg(socket)
            .args(args)
            .env_remove("WEFT_SOCKET");
        lab::run(&mut c, Duration::from_secs(25)).unwrap()
    }

    /// `weft --json ARGS`, which must succeed; the answer.
    pub(crate) fn json(&self, args: &[&str]) -> Response {
        super::json_answer(args, |a| self.weft(a), || self.log())
    }

    /// A TAP port `switch:ifname` whose far end is in a new namespace (named after `tag`)
    /// with address `ip`/24 and no IPv6 (so it is silent unless a test makes it speak).
    pub(crate) fn endpoint(&self, switch: &str, ifname: &str, ip: &str, tag: &str) -> Endpoint {
        let ns = Netns::new(tag);
        let port = format!("{switch}:{ifname}");
        self.json(&["port", "add", &port, "tap", "--netns", &ns.name]);
        let no_ipv6 = format!("echo 1 > /proc/sys/net/ipv6/conf/{ifname}/disable_ipv6");
        lab::run_ok(ns.cmd("sh").args(["-c", &no_ipv6]), Duration::from_secs(10));
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", ifname]);
        ns.ip(&["link", "set", ifname, "up"]);
        Endpoint {
            ns,
            ifname: ifname.to_string(),
            ip: ip.to_string(),
        }
    }

    /// SIGKILL: weftd gets no chance to tidy up (its directory lease is left to expire).
    pub(crate) fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The default socket of vhost-user port `br0:PORT`.
    pub(crate) fn vhost_socket(&self, port: &str) -> PathBuf {
        self.dir.path().join(format!("run/vhost/br0-{port}.sock"))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
