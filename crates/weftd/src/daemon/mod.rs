//! Starting and stopping the daemon: paths, locks, the state file, the workers, the
//! listeners, detaching, signals.

mod paths;
mod process;
mod start_error;

use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use crate::config::Config;
use crate::control::pool::WorkerPool;
use crate::control::{self, Controller};
use crate::devices::VhostPolicy;
use crate::persist::{self, StateFileError};
use crate::server::{self, auth::UnixPolicy, ClientSlots, Shared};
use crate::socket_dirs::SocketDirs;
pub use paths::Paths;
use paths::{ensure_dir, lock};
use process::{announce_ready, detach, init_logging, sd_notify};
pub use start_error::StartError;

/// Options of `weftd` (the daemon).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct RunArgs {
    /// Configuration file (TOML). Without one, the embedded default: switch br0, one
    /// worker, metrics on 127.0.0.1:9490.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Stay in the foreground and log to stderr. Without it, weftd detaches once it is
    /// ready and logs to <runtime-dir>/weftd.log.
    #[arg(long)]
    pub foreground: bool,
    /// Directory of the control socket, vhost-user sockets, pid and lock files (default:
    /// /run/weft as root, $XDG_RUNTIME_DIR/weft otherwise).
    #[arg(long, value_name = "DIR")]
    pub runtime_dir: Option<PathBuf>,
    /// The state file (default: <runtime-dir>/state.json).
    #[arg(long, value_name = "FILE")]
    pub state_file: Option<PathBuf>,
    /// Move the state file aside (to <file>.corrupt-<time> when it is unusable,
    /// <file>.reset-<time> otherwise) and start from the configuration's switches.
    #[arg(long)]
    pub reset_state: bool,
    /// Where to serve metrics (ADDR:PORT), or "off"; overrides [metrics].
    #[arg(long, value_name = "ADDR|off")]
    pub metrics_listen: Option<String>,
    /// Check the configuration file and the state file, then exit.
    #[arg(long)]
    pub check_config: bool,
}

/// Prints a startup failure and gives the exit code for it.
fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("weftd: {message}");
    ExitCode::FAILURE
}

/// The refusal for an unusable state file: what is wrong, and the two ways on.
fn state_refusal(e: &StateFileError, path: &Path) -> String {
    format!(
        "the state file is not usable: {e}\n\
         weftd: it was left as it is. Either fix it (it is JSON, in the format `weft config show --json` prints), \
         or start weftd with --reset-state: the file is then moved aside to {}.corrupt-<time> and weftd starts \
         from its configuration's switches.",
        path.display()
    )
}

/// Runs the daemon until SIGTERM or SIGINT.
pub fn run(args: &RunArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => return fail(e),
        },
        None => Config::default(),
    };
    let paths = match Paths::resolve(args, &config) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let metrics_listen = match args.metrics_listen.as_deref() {
        None => config.metrics.enabled.then_some(config.metrics.listen),
        Some("off") => None,
        Some(addr) => match addr.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                return fail(format!(
                    "--metrics-listen {addr:?}: expected ADDR:PORT (e.g. 127.0.0.1:9490) or off"
                ))
            }
        },
    };
    if args.check_config {
        return check(&config, &paths);
    }
    init_logging(&config, args.foreground);
    let ready = if args.foreground {
        None
    } else {
        match detach(&paths) {
            Ok(fd) => Some(fd),
            Err(code) => return code,
        }
    };
    match start(&config, &paths, args.reset_state, metrics_listen, ready) {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// `--check-config`: the configuration parsed already; check the state file too.
fn check(config: &Config, paths: &Paths) -> ExitCode {
    // The configured socket directories (the default one is made at start).
    if let Some(first) = config.vhost_socket_dirs.first() {
        if let Err(e) = SocketDirs::open(first, &config.vhost_socket_dirs, &[]) {
            return fail(e);
        }
    }
    match persist::load(&paths.state_file) {
        Ok(Some(state)) => println!(
            "weftd: configuration OK; state file {} OK ({} switch(es))",
            paths.state_file.display(),
            state.switches.len()
        ),
        Ok(None) => println!(
            "weftd: configuration OK ({} switch(es) on a first start); no state file at {} yet",
            config.switches.len(),
            paths.state_file.display()
        ),
        Err(e) => return fail(state_refusal(&e, &paths.state_file)),
    }
    ExitCode::SUCCESS
}

/// The state to start from, and whether it must be written (a first start).
fn initial_state(
    config: &Config,
    paths: &Paths,
    reset: bool,
) -> Result<(weft_control::state::State, bool), StartError> {
    let seeds = || weft_control::state::State {
        version: 1,
        switches: config.seed_switches(),
    };
    match persist::load(&paths.state_file) {
        Ok(Some(state)) if !reset => {
            tracing::info!(file = %paths.state_file.display(), switches = state.switches.len(), "restoring the saved configuration");
            Ok((state, false))
        }
        Ok(None) => {
            tracing::info!(file = %paths.state_file.display(), "no state file: starting from the configuration's switches");
            Ok((seeds(), true))
        }
        Ok(Some(_)) => {
            let aside = persist::move_aside(&paths.state_file, "reset").map_err(|source| {
                StartError::MoveAside {
                    path: paths.state_file.clone(),
                    source,
                }
            })?;
            tracing::warn!(moved_to = %aside.display(), "--reset-state: the state file was moved aside");
            Ok((seeds(), true))
        }
        Err(e) if reset => {
            let aside = persist::move_aside(&paths.state_file, "corrupt").map_err(|source| {
                StartError::MoveAside {
                    path: paths.state_file.clone(),
                    source,
                }
            })?;
            tracing::warn!(error = %e, moved_to = %aside.display(), "--reset-state: the unusable state file was moved aside");
            eprintln!(
                "weftd: the unusable state file was moved to {}",
                aside.display()
            );
            Ok((seeds(), true))
        }
        Err(source) => Err(StartError::UnusableState {
            path: paths.state_file.clone(),
            source,
        }),
    }
}

/// The directories vhost-user sockets may be in, opened and checked; weftd's own files are
/// never a socket's name.
fn socket_dirs(config: &Config, paths: &Paths) -> Result<SocketDirs, StartError> {
    SocketDirs::open(
        &paths.vhost_dir,
        &config.vhost_socket_dirs,
        &[
            &paths.socket,
            &paths.state_file,
            &paths.pid_file,
            &paths.lock_file,
            &paths.log_file,
        ],
    )
    .map_err(StartError::SocketDirs)
}

fn start(
    config: &Config,
    paths: &Paths,
    reset: bool,
    metrics_listen: Option<SocketAddr>,
    ready: Option<OwnedFd>,
) -> Result<ExitCode, StartError> {
    let mode = config.control.socket_mode.0;
    // Others reach the socket only if they may traverse the directory.
    let dir_mode = if mode & 0o077 != 0 { 0o711 } else { 0o700 };
    ensure_dir(&paths.runtime_dir, dir_mode, "the runtime directory")?;
    if let Ok(meta) = fs::metadata(&paths.runtime_dir) {
        if mode & 0o077 != 0 && meta.permissions().mode() & 0o011 == 0 {
            tracing::warn!(
                dir = %paths.runtime_dir.display(),
                "socket_mode lets others use the socket, but they cannot reach it: the runtime directory is owner-only (chmod 711 it)"
            );
        }
    }
    if let Some(parent) = paths
        .state_file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        ensure_dir(parent, 0o700, "the state file's directory")?;
    }
    let _lock = lock(paths)?;
    ensure_dir(&paths.vhost_dir, 0o700, "the vhost-user socket directory")?;
    let vhost = VhostPolicy {
        sockets: socket_dirs(config, paths)?,
        max_guest_memory: config.vhost.max_guest_memory_gib.0 << 30,
        lend_guest_memory: config.vhost.lend_guest_memory,
    };
    let (state, first_start) = initial_state(config, paths, reset)?;

    // Signals go to the main thread's sigwait only: block them before any thread starts,
    // so every thread inherits the mask.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().map_err(StartError::Signals)?;

    // The control socket is bound before any port is restored, so that no port can take
    // its path (a restored port naming it is refused: kept, marked failed).
    let listener = server::bind_unix(
        &paths.socket,
        mode,
        config.control.socket_group.as_ref().map(|g| g.gid),
    )?;
    let pool = WorkerPool::start(&config.workers).map_err(StartError::Workers)?;
    let (controller, failures) =
        Controller::start(pool, paths.state_file.clone(), vhost, state, first_start).map_err(
            |e| {
                let _ = fs::remove_file(&paths.socket);
                StartError::Build(e)
            },
        )?;
    for f in &failures {
        tracing::warn!(switch = %f.switch, port = %f.port, reason = %f.reason, "port could not be recreated; it is kept, marked failed");
    }
    let controller = Arc::new(Mutex::new(controller));
    // Kept until weftd stops: its client revokes the lease, so other hosts drop this one.
    let _directory = match &config.directory {
        Some(section) => {
            let client = section.client_config().map_err(StartError::Directory)?;
            tracing::info!(endpoints = ?client.endpoints, host = %client.host, "directory");
            Some(
                crate::directory::DirectoryService::start(client, Arc::clone(&controller))
                    .map_err(|e| StartError::Directory(e.to_string()))?,
            )
        }
        None => None,
    };
    let slots = ClientSlots::new(config.control.max_clients.get());
    let shared = Shared {
        controller: Arc::clone(&controller),
        slots: Arc::clone(&slots),
        idle_timeout: Duration::from_secs(config.control.idle_timeout_secs.0),
    };

    let policy = UnixPolicy {
        own_uid: nix::unistd::geteuid().as_raw(),
        group: config.control.socket_group.as_ref().map(|g| g.gid),
    };
    let tcp = match &config.control.tcp {
        Some(tcp) => {
            let token = server::read_token(&tcp.token_file)?;
            let l = TcpListener::bind(tcp.listen).map_err(|source| StartError::ControlListen {
                addr: tcp.listen,
                source,
            })?;
            Some((l, token))
        }
        None => None,
    };
    let metrics = match metrics_listen {
        Some(addr) => Some(
            TcpListener::bind(addr).map_err(|source| StartError::MetricsListen { addr, source })?,
        ),
        None => None,
    };
    server::spawn_unix(listener, policy, shared.clone()).map_err(StartError::Thread)?;
    if let Some((l, token)) = tcp {
        tracing::info!(listen = %config.control.tcp.as_ref().map(|t| t.listen.to_string()).unwrap_or_default(), "control over TCP (token required)");
        server::spawn_tcp(l, token, shared.clone()).map_err(StartError::Thread)?;
    }
    if let Some(l) = metrics {
        tracing::info!(listen = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(), "metrics at /metrics");
        crate::metrics::http::spawn(l, Arc::clone(&controller), Arc::clone(&slots))
            .map_err(StartError::Thread)?;
    }
    fs::write(&paths.pid_file, format!("{}\n", std::process::id())).map_err(|source| {
        StartError::PidFile {
            path: paths.pid_file.clone(),
            source,
        }
    })?;
    announce_ready(ready, paths)?;
    tracing::info!(
        pid = std::process::id(),
        socket = %paths.socket.display(),
        state_file = %paths.state_file.display(),
        workers = config.workers.count.0,
        "weftd ready"
    );

    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => {
                tracing::info!("SIGHUP ignored: weftd does not reload its file; change the configuration with `weft config apply`");
            }
            Ok(signal) => {
                tracing::info!(%signal, "stopping");
                break;
            }
            Err(e) => {
                tracing::error!(error = %e, "sigwait failed; stopping");
                break;
            }
        }
    }
    sd_notify("STOPPING=1");
    // Wait for the request in progress, if any, and hold the lock so that no other
    // starts; the process ends with it held.
    let mut guard = control::lock(&controller);
    let _ = fs::remove_file(&paths.socket);
    let _ = fs::remove_file(&paths.pid_file);
    guard.shutdown();
    tracing::info!("stopped");
    std::process::exit(0)
}
