//! Starting and stopping the daemon: paths, locks, the state file, the workers, the
//! listeners, detaching, signals.

mod paths;
mod process;
mod start_error;

use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use crate::config::Config;
use crate::control::pool::WorkerPool;
use crate::control::{self, Controller, DevicePaths};
use crate::devices::{TapMarks, VhostPolicy};
use crate::persist::{self, StateFileError};
use crate::server::{self, auth::UnixPolicy, ClientSlots, Shared};
use crate::socket_dirs::SocketDirs;
use crate::takeover::{self, give::Served};
pub use paths::Paths;
use paths::{ensure_dir, lock};
pub(crate) use process::sd_notify as notify_service_manager;
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
    /// Take over from the weftd running with this runtime directory: receive its ports
    /// (devices, vhost-user connections, learned addresses) and carry on serving them
    /// without a gap; the running weftd then exits. Its state is used, not the state file.
    /// `weft upgrade` runs this.
    #[arg(long, conflicts_with_all = ["reset_state", "check_config"])]
    pub takeover: bool,
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
    // First, before anything else could take their numbers: what systemd kept for this
    // service in its file descriptor store.
    let passed = match crate::systemd::listen_fds::take() {
        Ok(named) => named,
        Err(e) => return fail(e),
    };
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
    match start(&config, &paths, args, metrics_listen, ready, passed) {
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
            &paths.takeover_socket,
        ],
    )
    .map_err(StartError::SocketDirs)
}

/// What weftd serves on once its switches are built.
struct Listening {
    /// The runtime directory's lock, held until the process ends.
    lock: OwnedFd,
    control: UnixListener,
    /// The TCP control socket and its token.
    control_tcp: Option<(TcpListener, String)>,
    metrics: Option<TcpListener>,
}

fn start(
    config: &Config,
    paths: &Paths,
    args: &RunArgs,
    metrics_listen: Option<SocketAddr>,
    ready: Option<OwnedFd>,
    passed: Vec<(String, OwnedFd)>,
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
    if args.takeover {
        drop(passed);
        return take_over(config, paths, metrics_listen, ready);
    }
    let mut passed = crate::systemd::fd_store::decode(passed);
    for e in &passed.errors {
        tracing::warn!(error = %e, "systemd's file descriptor store passed something unusable: closed");
    }
    if !passed.records.is_empty() {
        tracing::info!(
            ports = passed.records.len(),
            "systemd kept devices of a weftd before this one: re-attaching"
        );
    }
    let kept = std::mem::take(&mut passed.records);
    let flock = lock(paths)?;
    let lock_fd = flock
        .as_fd()
        .try_clone_to_owned()
        .map_err(StartError::Descriptor)?;
    // Held (never unlocked) until the process ends; the descriptor above goes to the
    // weftd that takes over, if one does.
    std::mem::forget(flock);
    let devices = device_paths(config, paths)?;
    let (state, first_start) = initial_state(config, paths, args.reset_state)?;
    let signals = block_signals()?;

    // The control socket is bound before any port is restored, so that no port can take
    // its path (a restored port naming it is refused: kept, marked failed).
    let control = server::bind_unix(
        &paths.socket,
        mode,
        config.control.socket_group.as_ref().map(|g| g.gid),
    )?;
    let pool = WorkerPool::start(&config.workers).map_err(StartError::Workers)?;
    let (controller, failures) =
        Controller::start_with_kept(pool, devices, state, first_start, kept).map_err(|e| {
            let _ = fs::remove_file(&paths.socket);
            StartError::Build(e)
        })?;
    for f in &failures {
        tracing::warn!(switch = %f.switch, port = %f.port, reason = %f.reason, "port could not be recreated; it is kept, marked failed");
    }
    let control_tcp = match &config.control.tcp {
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
    let listening = Listening {
        lock: lock_fd,
        control,
        control_tcp,
        metrics,
    };
    serve(
        config, paths, controller, listening, &signals, ready, &passed,
    )
}

/// Where the controller's devices live, the directories made and checked.
fn device_paths(config: &Config, paths: &Paths) -> Result<DevicePaths, StartError> {
    ensure_dir(&paths.vhost_dir, 0o700, "the vhost-user socket directory")?;
    ensure_dir(&paths.taps_dir, 0o700, "the TAP marks directory")?;
    Ok(DevicePaths {
        state_file: paths.state_file.clone(),
        vhost: VhostPolicy {
            sockets: socket_dirs(config, paths)?,
            max_guest_memory: config.vhost.max_guest_memory_gib.0 << 30,
            lend_guest_memory: config.vhost.lend_guest_memory,
        },
        taps: TapMarks::in_dir(paths.taps_dir.clone()),
    })
}

/// Signals go to the main thread's sigwait only: blocked before any thread starts, so that
/// every thread inherits the mask.
fn block_signals() -> Result<SigSet, StartError> {
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals.thread_block().map_err(StartError::Signals)?;
    Ok(signals)
}

/// `--takeover`: everything from the running weftd, then serve as it did.
fn take_over(
    config: &Config,
    paths: &Paths,
    metrics_listen: Option<SocketAddr>,
    ready: Option<OwnedFd>,
) -> Result<ExitCode, StartError> {
    let started = std::time::Instant::now();
    let devices = device_paths(config, paths)?;
    // Everything that can fail is checked before the hand-over: after it, this weftd is
    // the only one.
    let token = config
        .control
        .tcp
        .as_ref()
        .map(|tcp| server::read_token(&tcp.token_file))
        .transpose()?;
    let mut received = takeover::take::receive(&paths.takeover_socket, &paths.lock_file)
        .map_err(StartError::Takeover)?;
    let signals = block_signals()?;
    let state = received.offer.state.clone();
    let inherited = std::mem::take(&mut received.inherited);
    let from = format!(
        "weftd {} (pid {})",
        received.offer.version, received.offer.pid
    );
    let built = WorkerPool::start(&config.workers)
        .map_err(|e| e.to_string())
        .and_then(|pool| {
            Controller::take_over(pool, devices, state, inherited, &from).map_err(|e| e.message)
        });
    let controller = match built {
        Ok(c) => c,
        Err(reason) => {
            received.abandon(&reason);
            // Nothing taken over may be closed or reset here: the old weftd serves it again.
            eprintln!("weftd: cannot take over: {reason}\nweftd: the running weftd carries on");
            std::process::exit(1);
        }
    };
    let restored = controller.restore_learned(&received.offer.fdb);
    if let Err(e) = received.adopted() {
        eprintln!("weftd: the running weftd did not confirm the hand-over ({e}); giving up");
        std::process::exit(1);
    }
    if ready.is_none() {
        received.take_stdio();
    }
    tracing::info!(
        from_pid = received.offer.pid,
        from_version = %received.offer.version,
        ports = received.offer.ports,
        learned = restored,
        ms = started.elapsed().as_millis(),
        "took over from the running weftd"
    );
    if let Some(socket) = &received.offer.notify_socket {
        // systemd runs the old weftd, which told it this one is its main process now; this
        // one says when it is ready.
        if std::env::var_os("NOTIFY_SOCKET").is_none() {
            std::env::set_var("NOTIFY_SOCKET", socket);
        }
    }
    let control_tcp = match (received.control_tcp.take(), &config.control.tcp, token) {
        (Some(l), Some(_), Some(token)) => Some((l, token)),
        (_, Some(tcp), Some(token)) => Some((
            TcpListener::bind(tcp.listen).map_err(|source| StartError::ControlListen {
                addr: tcp.listen,
                source,
            })?,
            token,
        )),
        _ => None,
    };
    let metrics = match (received.metrics.take(), metrics_listen) {
        (Some(l), Some(_)) => Some(l),
        (_, Some(addr)) => Some(
            TcpListener::bind(addr).map_err(|source| StartError::MetricsListen { addr, source })?,
        ),
        (_, None) => None,
    };
    let listening = Listening {
        lock: received.lock,
        control: received.control,
        control_tcp,
        metrics,
    };
    let passed = crate::systemd::Passed::default();
    serve(
        config, paths, controller, listening, &signals, ready, &passed,
    )
}

/// Serves the control socket, TCP control, metrics and takeovers until a signal stops
/// weftd.
fn serve(
    config: &Config,
    paths: &Paths,
    controller: Controller,
    listening: Listening,
    signals: &SigSet,
    ready: Option<OwnedFd>,
    passed: &crate::systemd::Passed,
) -> Result<ExitCode, StartError> {
    let mut controller = controller;
    // Only now: after a takeover, systemd takes this weftd's records once the old one
    // named it the main process.
    if let Some(mut store) = crate::systemd::FdStore::from_env() {
        store.held(passed);
        tracing::info!("ports' devices are kept in systemd's file descriptor store");
        controller.use_fd_store(store);
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
    let dup = |fd: BorrowedFd<'_>| fd.try_clone_to_owned().map_err(StartError::Descriptor);
    // What a takeover gets; standard output and error are taken once they are final (a
    // detached weftd's are set when it is ready).
    let lock = dup(listening.lock.as_fd())?;
    let control = dup(listening.control.as_fd())?;
    let control_tcp = listening
        .control_tcp
        .as_ref()
        .map(|(l, _)| dup(l.as_fd()))
        .transpose()?;
    let metrics = listening
        .metrics
        .as_ref()
        .map(|l| dup(l.as_fd()))
        .transpose()?;
    // The lock stays held for the life of the process.
    std::mem::forget(listening.lock);
    server::spawn_unix(listening.control, policy, shared.clone()).map_err(StartError::Thread)?;
    if let Some((l, token)) = listening.control_tcp {
        tracing::info!(listen = %l.local_addr().map(|a| a.to_string()).unwrap_or_default(), "control over TCP (token required)");
        server::spawn_tcp(l, token, shared.clone()).map_err(StartError::Thread)?;
    }
    if let Some(l) = listening.metrics {
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
    let served = Served {
        lock,
        control,
        stdio: [
            dup(std::io::stdout().as_fd())?,
            dup(std::io::stderr().as_fd())?,
        ],
        control_tcp,
        metrics,
    };
    takeover::give::spawn(&paths.takeover_socket, Arc::clone(&controller), served)
        .map_err(StartError::Thread)?;
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
    let _ = fs::remove_file(&paths.takeover_socket);
    guard.shutdown();
    tracing::info!("stopped");
    std::process::exit(0)
}
