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
    tls: Option<Pki>,
    /// `user:password` for etcdctl, once authentication is on.
    root: Option<String>,
    child: Option<Child>,
}

/// A test PKI (PEM files in etcd's directory): a CA, a server certificate for 127.0.0.1
/// and a client certificate, all signed by the CA.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The server's certificate and key.
    pub server: (PathBuf, PathBuf),
    /// A client's certificate and key (key mode 0600).
    pub client: (PathBuf, PathBuf),
}

/// Makes a [`Pki`] in `dir` with openssl.
fn make_pki(dir: &Path) -> Pki {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("openssl not found");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=weft test CA",
    ]);
    for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth")] {
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n"),
        )
        .expect("writing an extension file");
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join("client.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    Pki {
        ca: dir.join("ca.pem"),
        server: (dir.join("server.pem"), dir.join("server.key")),
        client: (dir.join("client.pem"), key),
    }
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
            tls: None,
            root: None,
            child: None,
        };
        etcd.resume();
        etcd
    }

    /// etcd on loopback serving clients over TLS only, and only clients with a certificate
    /// its CA signed.
    pub fn start_tls() -> Etcd {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pki = make_pki(dir.path());
        let mut etcd = Etcd {
            dir,
            client: free_loopback(),
            peer: free_loopback(),
            netns: None,
            tls: Some(pki),
            root: None,
            child: None,
        };
        etcd.resume();
        etcd
    }

    /// The client URL (`http://ADDR`, or `https://ADDR` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.client)
    }

    /// The test PKI of an etcd started with [`Etcd::start_tls`].
    pub fn pki(&self) -> Option<&Pki> {
        self.tls.as_ref()
    }

    /// Turns authentication on: a `root` user (password `root-password`) and a user `name`
    /// with `password` whose role may read and write everything under `prefix`.
    pub fn enable_auth(&mut self, name: &str, password: &str, prefix: &str) {
        let ok = |etcd: &Etcd, args: &[&str]| {
            assert!(
                etcd.etcdctl(args).is_some(),
                "etcdctl {args:?} failed\n{}",
                etcd.log()
            );
        };
        ok(self, &["user", "add", "root:root-password"]);
        ok(self, &["role", "add", "weft"]);
        ok(
            self,
            &[
                "role",
                "grant-permission",
                "weft",
                "--prefix=true",
                "readwrite",
                prefix,
            ],
        );
        ok(self, &["user", "add", &format!("{name}:{password}")]);
        ok(self, &["user", "grant-role", name, "weft"]);
        ok(self, &["auth", "enable"]);
        self.root = Some("root:root-password".into());
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
            .args(["--auto-compaction-retention", "0"]);
        if let Some(pki) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&pki.server.0)
                .arg("--key-file")
                .arg(&pki.server.1)
                .arg("--trusted-ca-file")
                .arg(&pki.ca)
                .arg("--client-cert-auth");
        }
        cmd.stdin(Stdio::null())
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
        cmd.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(self.url())
            .arg("--command-timeout=5s");
        if let Some(pki) = &self.tls {
            cmd.arg("--cacert")
                .arg(&pki.ca)
                .arg("--cert")
                .arg(&pki.client.0)
                .arg("--key")
                .arg(&pki.client.1);
        }
        if let Some(root) = &self.root {
            cmd.arg("--user").arg(root);
        }
        let out = cmd.args(args).stdin(Stdio::null()).output().ok()?;
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
