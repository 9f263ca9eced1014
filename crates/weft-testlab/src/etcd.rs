//! A real etcd server for tests: one member in a temporary data directory, listening on a
//! free loopback port (or a given address), killed when dropped. It can be stopped and
//! started again on the same data and address, as when the store goes away and comes back.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or stopped) etcd.
pub struct Etcd {
    dir: tempfile::TempDir,
    client: SocketAddr,
    peer: SocketAddr,
    netns: Option<PathBuf>,
    child: Option<Child>,
}

/// Why etcd cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("etcd").is_file()))
        .unwrap_or(false);
    (!found).then(|| "etcd is missing: run scripts/install-test-deps".to_string())
}

/// A loopback address with a port nobody listens on now.
fn free_loopback() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    l.local_addr().expect("its address")
}

impl Etcd {
    /// etcd on two free loopback ports (clients, peers).
    pub fn start() -> Etcd {
        Self::start_at(free_loopback(), free_loopback(), None)
    }

    /// etcd listening for clients on `client` and for peers on `peer`, inside the
    /// network namespace at `netns` when given (`ip netns exec` by path).
    pub fn start_at(client: SocketAddr, peer: SocketAddr, netns: Option<&Path>) -> Etcd {
        let mut etcd = Etcd {
            dir: tempfile::tempdir().expect("a temporary directory"),
            client,
            peer,
            netns: netns.map(Path::to_path_buf),
            child: None,
        };
        etcd.resume();
        etcd
    }

    /// The client URL (`http://ADDR`).
    pub fn url(&self) -> String {
        format!("http://{}", self.client)
    }

    /// The client address.
    pub fn client_addr(&self) -> SocketAddr {
        self.client
    }

    /// Kills the server (SIGKILL: as a crash or a cut cable looks to clients).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data and addresses; waits until it answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "etcd is running");
        let peer = format!("http://{}", self.peer);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .expect("etcd's log");
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("etcd");
                c
            }
            None => Command::new("etcd"),
        };
        cmd.arg("--name")
            .arg("test")
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .arg("--listen-client-urls")
            .arg(self.url())
            .arg("--advertise-client-urls")
            .arg(self.url())
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("test={peer}"))
            // Keeps the history short, so that tests can compact it.
            .args(["--auto-compaction-retention", "0"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd's log"))
            .stderr(log);
        let child = cmd
            .spawn()
            .expect("etcd not found: run scripts/install-test-deps");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("etcd exited with {status}:\n{}", self.log());
            }
            if self.healthy() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not come up:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the server answers its health check.
    fn healthy(&self) -> bool {
        if self.netns.is_none()
            && TcpStream::connect_timeout(&self.client, Duration::from_millis(200)).is_err()
        {
            return false;
        }
        // A read succeeds once the member serves (`endpoint health` reports on stderr).
        self.etcdctl(&["get", "--keys-only", "health-check"])
            .is_some()
    }

    /// Runs `etcdctl ARGS` against the server; its standard output when it succeeds.
    pub fn etcdctl(&self, args: &[&str]) -> Option<String> {
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("etcdctl");
                c
            }
            None => Command::new("etcdctl"),
        };
        let out = cmd
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(self.url())
            .arg("--command-timeout=5s")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes `value` at `key` (panics when the server refuses).
    pub fn put(&self, key: &str, value: &str) {
        assert!(
            self.etcdctl(&["put", key, value]).is_some(),
            "etcdctl put {key} failed:\n{}",
            self.log()
        );
    }

    /// The keys under `prefix`, sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self
            .etcdctl(&["get", "--prefix", "--keys-only", prefix])
            .unwrap_or_default();
        out.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The value at `key`, if any.
    pub fn get(&self, key: &str) -> Option<String> {
        let out = self.etcdctl(&["get", "--print-value-only", key])?;
        let v = out.trim_end_matches('\n');
        (!v.is_empty()).then(|| v.to_string())
    }

    /// Compacts the history up to the current revision (watchers from before it must read
    /// everything again).
    pub fn compact(&self) {
        let status = self
            .etcdctl(&["endpoint", "status", "--write-out", "json"])
            .expect("etcdctl endpoint status");
        let json: serde_json::Value = serde_json::from_str(&status).expect("its JSON");
        let revision = json[0]["Status"]["header"]["revision"]
            .as_i64()
            .expect("a revision");
        self.etcdctl(&["compact", &revision.to_string()]);
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}
