//! A real weftd in a temporary directory (its own runtime directory, state file and log),
//! driven through the real `weft` binary; killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use weft_control::Response;

use super::{code, stderr, stdout, weft_cmd};

/// A weftd in a temporary directory; killed when dropped.
pub(crate) struct Weftd {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) child: Child,
}

impl Weftd {
    pub(crate) fn start() -> Weftd {
        Self::start_with(None)
    }

    /// A weftd with vhost-user ports `br0:a` and `br0:b` on their default sockets.
    pub(crate) fn with_vhost_ports_a_and_b() -> Weftd {
        let weftd = Self::start();
        for port in ["a", "b"] {
            let o = weftd.weft(&["port", "add", &format!("br0:{port}"), "vhost-user"]);
            assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), weftd.log());
        }
        weftd
    }

    /// A weftd with `config` as its configuration file (TOML), or the embedded default.
    pub(crate) fn start_with(config: Option<&str>) -> Weftd {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = config {
            std::fs::write(dir.path().join("weftd.toml"), text).unwrap();
        }
        let child = Self::spawn(dir.path());
        let mut d = Weftd { dir, child };
        d.wait_up();
        d
    }

    /// A weftd on `dir`'s runtime directory and state file (and `dir/weftd.toml` when
    /// there is one), logging to `dir/weftd.log`.
    pub(crate) fn spawn(dir: &Path) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("weftd.log"))
            .unwrap();
        Command::new(super::weftd_binary())
            .args(super::config_args(dir))
            .arg("--foreground")
            .arg("--runtime-dir")
            .arg(dir.join("run"))
            .arg("--state-file")
            .arg(dir.join("state.json"))
            .args(["--metrics-listen", "off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// Waits until weftd answers.
    pub(crate) fn wait_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while code(&self.weft(&["hello"])) != 0 {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("weftd exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "weftd did not come up:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -9`, then a new weftd on the same state file (which restores the ports).
    pub(crate) fn kill_and_restart(&mut self) {
        self.child.kill().unwrap(); // SIGKILL: no cleanup runs
        self.child.wait().unwrap();
        self.child = Self::spawn(self.dir.path());
        self.wait_up();
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weftd.log")).unwrap_or_default()
    }

    pub(crate) fn vhost_socket(&self, port: &str) -> PathBuf {
        self.dir.path().join(format!("run/vhost/br0-{port}.sock"))
    }

    pub(crate) fn weft(&self, args: &[&str]) -> Output {
        weft_cmd()
            .arg("--socket")
            .arg(self.dir.path().join("run/weftd.sock"))
            .args(args)
            .output()
            .unwrap()
    }

    /// `weft --json ARGS`, which must succeed; the answer.
    pub(crate) fn json(&self, args: &[&str]) -> Response {
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
