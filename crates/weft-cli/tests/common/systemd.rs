//! A real systemd for weftd to run under: the machine's systemd binary as a user manager
//! (root's) in a private mount namespace, where `/run/systemd/system` says the system was
//! booted with systemd (the manager refuses to start otherwise; PID 1 here may be
//! something else). Its units live in `$XDG_RUNTIME_DIR/systemd/user`. Stopped, with
//! every unit, when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The systemd binary, when the machine has one.
pub(crate) fn binary() -> Option<PathBuf> {
    ["/lib/systemd/systemd", "/usr/lib/systemd/systemd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A running user manager; stopped when dropped.
pub(crate) struct UserManager {
    dir: tempfile::TempDir,
    child: Child,
}

impl UserManager {
    /// Starts one and waits until it answers `systemctl`.
    pub(crate) fn start() -> UserManager {
        let systemd = binary().expect("systemd is installed");
        let dir = tempfile::tempdir().unwrap();
        let xdg = dir.path().join("xdg");
        std::fs::create_dir_all(xdg.join("systemd/user")).unwrap();
        let log = std::fs::File::create(dir.path().join("manager.log")).unwrap();
        // Mounts made by the host later (network namespaces) still reach it (slave).
        let script = format!(
            "mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd && \
             mkdir /run/systemd/system && exec {} --user --log-target=console",
            systemd.display()
        );
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "slave", "sh", "-c", &script])
            .env("XDG_RUNTIME_DIR", &xdg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut manager = UserManager { dir, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let o = manager.systemctl(&["is-system-running"]);
            let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if state == "running" || state == "degraded" {
                break;
            }
            if let Some(status) = manager.child.try_wait().unwrap() {
                panic!("the user manager exited with {status}:\n{}", manager.log());
            }
            assert!(
                Instant::now() < deadline,
                "the user manager did not come up ({state}):\n{}",
                manager.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        manager
    }

    /// What the manager logged.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("manager.log")).unwrap_or_default()
    }

    /// Writes unit `name` (e.g. `weftd.service`).
    pub(crate) fn install_unit(&self, name: &str, text: &str) {
        let path = self.dir.path().join("xdg/systemd/user").join(name);
        std::fs::write(path, text).unwrap();
        let o = self.systemctl(&["daemon-reload"]);
        assert!(o.status.success(), "daemon-reload: {}", stderr(&o));
    }

    /// `systemctl --user ARGS`, in the manager's mount namespace.
    pub(crate) fn systemctl(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .args([
                "-t",
                &self.child.id().to_string(),
                "-m",
                "systemctl",
                "--user",
            ])
            .args(args)
            .env("XDG_RUNTIME_DIR", self.dir.path().join("xdg"))
            .output()
            .unwrap()
    }

    /// `systemctl --user ARGS`, which must succeed.
    pub(crate) fn systemctl_ok(&self, args: &[&str]) -> String {
        let o = self.systemctl(args);
        assert!(
            o.status.success(),
            "systemctl {args:?}: {}\n{}",
            stderr(&o),
            self.log()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A property of a unit (`systemctl show -p NAME --value`).
    pub(crate) fn property(&self, unit: &str, name: &str) -> String {
        self.systemctl_ok(&["show", "-p", name, "--value", unit])
            .trim()
            .to_string()
    }

    /// The unit's main process, once it is `active` with one other than `not` (30 s at
    /// most).
    pub(crate) fn wait_main_pid(&self, unit: &str, not: Option<u32>) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let active = self.property(unit, "ActiveState") == "active";
            let pid: u32 = self.property(unit, "MainPID").parse().unwrap_or(0);
            if active && pid != 0 && Some(pid) != not {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "{unit} is not active with a new main process: {}\n{}",
                self.systemctl_ok(&["status", "--no-pager", unit]),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The temporary directory (for units' files).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for UserManager {
    fn drop(&mut self) {
        // Stopping the manager stops its units (weftd among them).
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
