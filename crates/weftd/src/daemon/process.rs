//! The process around the daemon: logging, detaching from the terminal, telling whoever
//! waits (the parent of a detached weftd, or systemd) that weftd is ready.

use std::fs::{self, OpenOptions};
use std::io::{IsTerminal, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;

use super::{fail, Paths, StartError};
use crate::config::Config;

pub(super) fn init_logging(config: &Config, foreground: bool) {
    let filter = std::env::var("WEFTD_LOG")
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(&config.log.level.0));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(foreground && std::io::stderr().is_terminal())
        .try_init();
}

/// Forks: the parent waits until the child is ready (or failed) and exits accordingly;
/// the child goes on in a new session and gets the write end of the readiness pipe.
pub(super) fn detach(paths: &Paths) -> Result<OwnedFd, ExitCode> {
    let (read_end, write_end) = nix::unistd::pipe().map_err(|e| fail(format!("pipe: {e}")))?;
    // SAFETY: no thread has been started yet (workers, listeners and loggers start after
    // this), so the child is a complete copy of a single-threaded process.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(fail(format!(
            "cannot detach (fork: {e}); run with --foreground"
        ))),
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(write_end);
            let mut answer = Vec::new();
            let _ = fs::File::from(read_end).read_to_end(&mut answer);
            if answer.starts_with(b"R") {
                println!(
                    "weftd: running (pid {child}); control socket {}; log {}; stop it with: kill $(cat {})",
                    paths.socket.display(),
                    paths.log_file.display(),
                    paths.pid_file.display()
                );
                std::process::exit(0);
            }
            // The child said why on the shared stderr; pass its exit status on.
            let code = match nix::sys::wait::waitpid(child, None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code,
                _ => 1,
            };
            std::process::exit(if code == 0 { 1 } else { code });
        }
        Ok(nix::unistd::ForkResult::Child) => {
            drop(read_end);
            let _ = nix::unistd::setsid();
            Ok(write_end)
        }
    }
}

/// Tells whoever waits that weftd is ready: the parent of a detached weftd (then stdio
/// leaves the terminal for /dev/null and the log file), or systemd (`NOTIFY_SOCKET`).
pub(super) fn announce_ready(ready: Option<OwnedFd>, paths: &Paths) -> Result<(), StartError> {
    if let Some(fd) = ready {
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&paths.log_file)
            .map_err(|source| StartError::LogFile {
                path: paths.log_file.clone(),
                source,
            })?;
        let null = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(StartError::DevNull)?;
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&log);
        let _ = fs::File::from(fd).write_all(b"R");
    }
    sd_notify("READY=1");
    Ok(())
}

/// Sends a state line to systemd, when it asked for them.
pub(crate) fn sd_notify(state: &str) {
    let sent = crate::systemd::NotifySocket::from_env().map(|socket| socket?.send(state, &[]));
    if let Some(Err(e)) = sent {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}
