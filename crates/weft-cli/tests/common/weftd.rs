//! A real weftd in a temporary directory, driven through the real `weft` binary: runtime
//! directory `run/`, state file `run/state.json` (one of weftd's own files inside its runtime
//! directory, as in a default installation), configuration `weftd.toml` when a test gives
//! one, log `weftd.log`. Killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use weft_control::Response;

use super::{code, stderr, stdout, weft_cmd};

/// A weftd in a temporary directory; killed when dropped.
pub(crate) struct Weftd {
    pub(crate) dir: tempfile::TempDir,
    child: Option<Child>,
    /// The weftd that took over (`weft upgrade`), not a child of this process.
    adopted: Option<u32>,
    /// Environment weftd is started with, beside the test's.
    env: Vec<(String, String)>,
}

impl Weftd {
    /// A weftd with its embedded default configuration.
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
        Self::start_configured(|_| config.map(str::to_owned))
    }

    /// A weftd with the configuration `config` makes from the temporary directory's path
    /// (after `run/` was created there, so that it can name it), or the embedded default.
    pub(crate) fn start_configured(config: impl FnOnce(&Path) -> Option<String>) -> Weftd {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        if let Some(text) = config(dir.path()) {
            std::fs::write(dir.path().join("weftd.toml"), text).unwrap();
        }
        let mut d = Weftd {
            dir,
            child: None,
            adopted: None,
            env: Vec::new(),
        };
        d.spawn();
        d
    }

    /// A weftd with its embedded configuration and `env` in its environment (given to
    /// every weftd this handle starts).
    pub(crate) fn start_with_env(env: &[(&str, &str)]) -> Weftd {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        let mut d = Weftd {
            dir,
            child: None,
            adopted: None,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        };
        d.spawn();
        d
    }

    /// `rel` inside the temporary directory.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Starts weftd on the temporary directory and waits until it answers.
    pub(crate) fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("weftd.log"))
            .unwrap();
        let child = Command::new(super::weftd_binary())
            .args(super::config_args(self.dir.path()))
            .arg("--foreground")
            .arg("--runtime-dir")
            .arg(self.path("run"))
            .arg("--state-file")
            .arg(self.path("run/state.json"))
            .args(["--metrics-listen", "off"])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let child = self.child.as_mut().unwrap();
        super::wait_until_answering(
            child,
            &self.dir.path().join("run/weftd.sock"),
            &self.dir.path().join("weftd.log"),
        );
    }

    /// The running weftd's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("weftd runs").id()
    }

    /// SIGTERM (a clean stop), and the exit waited for.
    pub(crate) fn stop(&mut self) {
        let mut child = self.child.take().expect("weftd runs");
        let term = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        child.wait().unwrap();
    }

    /// `kill -9`, then a new weftd on the same state file (which restores the ports).
    pub(crate) fn kill_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap(); // SIGKILL: no cleanup runs
            child.wait().unwrap();
        }
        if let Some(pid) = self.adopted.take() {
            kill_pid(pid, "-KILL");
        }
        self.spawn();
    }

    /// `weft upgrade` to this workspace's weftd; the output. On success the weftd that took
    /// over is the one this handle stops.
    pub(crate) fn upgrade(&mut self) -> Output {
        let o = self.weft(&[
            "--json",
            "upgrade",
            "--weftd",
            &super::weftd_binary().to_string_lossy(),
        ]);
        if o.status.success() {
            let done: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
            let pid = u32::try_from(done["new_pid"].as_u64().unwrap()).unwrap();
            if let Some(mut child) = self.child.take() {
                // It exited on handing over: reap it.
                let _ = child.wait();
            }
            self.adopted = Some(pid);
        }
        o
    }

    /// The pid of the weftd answering now.
    pub(crate) fn answering_pid(&self) -> u32 {
        match self.json(&["hello"]) {
            Response::Hello { pid: Some(pid), .. } => pid,
            other => panic!("hello answered {other:?}"),
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.path("weftd.log")).unwrap_or_default()
    }

    pub(crate) fn vhost_socket(&self, port: &str) -> PathBuf {
        self.path(&format!("run/vhost/br0-{port}.sock"))
    }

    pub(crate) fn weft(&self, args: &[&str]) -> Output {
        weft_cmd()
            .arg("--socket")
            .arg(self.path("run/weftd.sock"))
            .args(args)
            .output()
            .unwrap()
    }

    /// The device counter `name` of port `br0:PORT` (`weft port show`), 0 when it has none.
    pub(crate) fn device_counter(&self, port: &str, name: &str) -> u64 {
        match self.json(&["port", "show", &format!("br0:{port}")]) {
            Response::Port { counters, .. } => counters
                .device
                .iter()
                .find(|(n, _)| n.as_str() == name)
                .map_or(0, |(_, v)| *v),
            other => panic!("not a port: {other:?}"),
        }
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
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(pid) = self.adopted.take() {
            kill_pid(pid, "-KILL");
        }
    }
}

/// `kill SIGNAL pid`, then waits (up to 5 s) until the process is gone.
fn kill_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}/status")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .contains("State:\tZ")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
