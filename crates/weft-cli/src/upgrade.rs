//! `weft upgrade`: replace the running weftd with a new binary without a traffic gap. The
//! new weftd is started with the running one's own options and `--takeover`: it receives
//! every port (devices, vhost-user connections, learned addresses) and the running weftd
//! exits. If the new one cannot take over, the running one carries on.
//!
//! weft learns who is running from the control socket itself (the peer's pid, then its
//! command line in /proc), so it needs no file of its own and works for any runtime
//! directory weftd was given.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use weft_control::{Request, Response};

use crate::client::{Client, Daemon, Endpoint};
use crate::error::CliError;

/// `weft upgrade`'s options.
#[derive(Debug, Clone, Args)]
pub struct UpgradeArgs {
    /// The new weftd binary (default: `weftd` beside this weft, else the one on PATH).
    #[arg(long, value_name = "PATH")]
    pub weftd: Option<PathBuf>,
    /// How long the new weftd may take to be ready.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = crate::cli::parse_secs)]
    pub wait: Duration,
}

/// What happened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Upgraded {
    /// The weftd that ran before.
    pub old_pid: u32,
    /// The weftd that runs now.
    pub new_pid: u32,
    /// Its version (`weftd --version`).
    pub new_version: String,
    /// From starting the new weftd to its answering on the control socket.
    pub elapsed_ms: u64,
}

/// The new weftd, started, and the thread relaying its error output here.
struct Started {
    pid: u32,
    relay: std::thread::JoinHandle<()>,
}

/// Starts `binary` with `args` as an orphan: through a shell that puts it in the
/// background and exits at once, so that its parent is the nearest subreaper — the
/// service manager under systemd, else init — and not this short-lived process. systemd
/// treats a main process named by `MAINPID=` as its own only when it is its child: it can
/// then wait for its exit and stop it with SIGTERM, where for another's child it goes
/// straight to SIGKILL. Its standard error is relayed here.
fn spawn_orphan(binary: &Path, args: &[OsString]) -> Result<Started, CliError> {
    let failed = |e| {
        CliError::io(
            format!(
                "starting {} (give the new binary with --weftd PATH)",
                binary.display()
            ),
            e,
        )
    };
    let mut launcher = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#""$0" "$@" </dev/null >/dev/null & echo $!"#)
        .arg(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(failed)?;
    let mut from = launcher
        .stderr
        .take()
        .ok_or_else(|| failed(std::io::Error::other("no pipe for the new weftd's errors")))?;
    let relay = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut std::io::stderr());
    });
    let mut printed = String::new();
    if let Some(mut out) = launcher.stdout.take() {
        std::io::Read::read_to_string(&mut out, &mut printed).map_err(failed)?;
    }
    launcher.wait().map_err(failed)?;
    let pid = printed.trim().parse::<u32>().map_err(|_| {
        failed(std::io::Error::other(format!(
            "the shell that starts it printed {printed:?}, not a process id"
        )))
    })?;
    Ok(Started { pid, relay })
}

/// Whether process `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name's closing parenthesis.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}

/// Options of the running weftd that must not be passed on.
const DROPPED: [&str; 3] = ["--takeover", "--reset-state", "--check-config"];

/// Upgrades the weftd serving the control socket at `socket`.
pub fn upgrade(socket: &Path, args: &UpgradeArgs) -> Result<Upgraded, CliError> {
    let old_pid = daemon_pid(socket)?;
    let old_args = command_line(old_pid)?;
    let binary = args.weftd.clone().unwrap_or_else(default_weftd);
    let passed = takeover_args(old_args);
    let foreground = passed.iter().any(|a| a == "--foreground");
    let started = Instant::now();
    // Its output comes here until it is ready: then a detached weftd writes to its log, and
    // one in the foreground where the old one wrote (it was handed the old one's).
    let child_pid = spawn_orphan(&binary, &passed)?;
    let mut relay = Some(child_pid.relay);
    let child_pid = child_pid.pid;
    // Detached, the new weftd's first process exits once the daemon is ready or failed; in
    // the foreground it is the daemon, and is ready when it answers on the socket.
    let deadline = started + args.wait;
    loop {
        let answering = daemon_pid(socket).ok();
        if foreground && answering == Some(child_pid) {
            break;
        }
        if !alive(child_pid) {
            if let Some(relay) = relay.take() {
                let _ = relay.join();
            }
            let answering = daemon_pid(socket).ok();
            if answering.is_some_and(|p| p != old_pid) {
                break;
            }
            return Err(CliError::usage(
                format!(
                    "the new weftd ({}) did not take over; the running weftd (pid {old_pid}) \
                     carries on",
                    binary.display()
                ),
                "its error is printed above",
            ));
        }
        if Instant::now() > deadline {
            return Err(CliError::usage(
                format!(
                    "the new weftd (pid {child_pid}) was not ready within {:?}",
                    args.wait
                ),
                "see its log; weft upgrade --wait SECS waits longer",
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if let Some(relay) = relay {
        // Ends when the new weftd lets go of the pipe (it writes elsewhere once ready).
        let _ = relay.join();
    }
    let new_pid = daemon_pid(socket)?;
    let new_version = Command::new(&binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Ok(Upgraded {
        old_pid,
        new_pid,
        new_version,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The new weftd's arguments: the running one's (without its program name and the options
/// that would change its state), and `--takeover`.
fn takeover_args(old: Vec<OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = old
        .into_iter()
        .skip(1)
        .filter(|a| !DROPPED.iter().any(|d| a.as_encoded_bytes() == d.as_bytes()))
        .collect();
    args.push("--takeover".into());
    args
}

/// The pid of the weftd answering on the control socket (`hello`). (Not the socket's peer
/// credentials: those name the process that bound it, which a takeover does not change.)
fn daemon_pid(socket: &Path) -> Result<u32, CliError> {
    let endpoint = Endpoint::Unix(socket.to_path_buf());
    match Client::connect(&endpoint, Duration::from_secs(5))?.call(Request::Hello {})? {
        Response::Hello { pid: Some(pid), .. } => Ok(pid),
        Response::Hello { pid: None, .. } => Err(CliError::usage(
            "the running weftd does not say its pid: it is too old to hand over",
            "restart it with the new binary instead",
        )),
        other => Err(crate::commands::unexpected("hello", &other)),
    }
}

/// The command line of process `pid`.
fn command_line(pid: u32) -> Result<Vec<OsString>, CliError> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| {
        CliError::io(
            format!("reading weftd's command line (pid {pid}): weft upgrade runs as root on weftd's host"),
            e,
        )
    })?;
    Ok(raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect())
}

/// `weftd` beside the running weft, else `weftd` (found on PATH).
fn default_weftd() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("weftd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("weftd"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_weftd_gets_the_running_ones_options_without_those_that_reset_it() {
        let old = [
            "/usr/bin/weftd",
            "--runtime-dir",
            "/run/x",
            "--reset-state",
            "--foreground",
            "--takeover",
        ]
        .map(OsString::from)
        .to_vec();
        assert_eq!(
            takeover_args(old),
            ["--runtime-dir", "/run/x", "--foreground", "--takeover"].map(OsString::from)
        );
    }

    #[test]
    fn this_process_command_line_is_read_from_proc() {
        let args = command_line(std::process::id()).unwrap();
        assert_eq!(args.len(), std::env::args_os().count());
    }
}
