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
