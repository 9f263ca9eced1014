//! weftd's configuration file (TOML) and its embedded default.
//!
//! Every table rejects unknown keys, and every value is range-checked while it is read, so
//! that each error carries the line and column it comes from and says what was expected.
//! `docs/weftd.toml` documents every key; with no file, [`Config::default`] applies: one
//! switch `br0`, one worker, the control socket under the runtime directory, metrics on
//! 127.0.0.1:9490.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use weft_control::state::{SwitchSettings, SwitchState};

mod directory;
mod error;
pub use directory::DirectorySection;
pub use error::{ConfigTextError, Position, ValueError};

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory of the control socket, the vhost-user sockets, the pid and lock files
    /// (default `/run/weft` as root, `$XDG_RUNTIME_DIR/weft` otherwise).
    pub runtime_dir: Option<PathBuf>,
    /// The state file (default `<runtime_dir>/state.json`).
    pub state_file: Option<PathBuf>,
    /// Directories, besides `<runtime_dir>/vhost`, where control clients may put vhost-user
    /// sockets (`--vhost-socket`). Each must exist, with no symlink on its path, owned by
    /// root or weftd's user, not writable by others unless sticky: checked at start.
    pub vhost_socket_dirs: Vec<PathBuf>,
    /// Logging.
    pub log: LogConfig,
    /// The control socket and the optional TCP listener.
    pub control: ControlConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Worker threads.
    pub workers: WorkersConfig,
    /// vhost-user ports.
    pub vhost: VhostConfig,
    /// The directory (etcd) that VXLAN ports with `--directory` use; none without it.
    pub directory: Option<DirectorySection>,
    /// The switches of a first start (when there is no state file yet). Once a state file
    /// exists, it is what weftd restores, and these are ignored.
    #[serde(rename = "switch")]
    pub switches: Vec<Spanned<SwitchState>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            runtime_dir: None,
            state_file: None,
            vhost_socket_dirs: Vec::new(),
            log: LogConfig::default(),
            control: ControlConfig::default(),
            metrics: MetricsConfig::default(),
            workers: WorkersConfig::default(),
            vhost: VhostConfig::default(),
            directory: None,
            switches: vec![Spanned::new(
                0..0,
                SwitchState {
                    name: "br0".to_string(),
                    settings: SwitchSettings::default(),
                    ports: Vec::new(),
                    static_macs: Vec::new(),
                    rules: Vec::new(),
                    on_demand: false,
                },
            )],
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter (`info`, `weftd=debug,warn`, ...); the `WEFTD_LOG` environment
    /// variable overrides it.
    pub level: LogFilter,
    /// Where a detached weftd writes its log (default `<runtime_dir>/weftd.log`).
    pub file: Option<PathBuf>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: LogFilter("info".to_string()),
            file: None,
        }
    }
}

/// A log filter that `tracing-subscriber` accepts.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct LogFilter(pub String);

impl TryFrom<String> for LogFilter {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, ValueError> {
        tracing_subscriber::EnvFilter::try_new(&s)
            .map(|_| LogFilter(s))
            .map_err(ValueError::LogFilter)
    }
}

/// `[control]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// The control socket (default `<runtime_dir>/weftd.sock`).
    pub socket: Option<PathBuf>,
    /// Permission bits of the socket (default `0o600`).
    pub socket_mode: SocketMode,
    /// A group whose members may use the socket (its gid is given to the socket).
    pub socket_group: Option<GroupName>,
    /// Most clients connected at once, Unix and TCP together (1 to 1024, default 32).
    pub max_clients: Bounded<1, 1024>,
    /// A client that completes no request for this long is disconnected (1 to 86400 s,
    /// default 300).
    pub idle_timeout_secs: Bounded<1, 86400>,
    /// The TCP listener, only when configured.
    pub tcp: Option<TcpConfig>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            socket: None,
            socket_mode: SocketMode(0o600),
            socket_group: None,
            max_clients: Bounded(32),
            idle_timeout_secs: Bounded(300),
            tcp: None,
        }
    }
}

/// `[control.tcp]`: remote control, every request must carry the token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpConfig {
    /// Address to listen on, e.g. `127.0.0.1:9491`.
    pub listen: SocketAddr,
    /// A file holding the token (at least 16 characters; not readable by group or others).
    pub token_file: PathBuf,
}

/// Socket permission bits: at most `0o777`, owner read and write included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u32")]
pub struct SocketMode(pub u32);

impl TryFrom<u32> for SocketMode {
    type Error = ValueError;
    fn try_from(mode: u32) -> Result<Self, ValueError> {
        if mode > 0o777 {
            return Err(ValueError::SocketModeNotAMode(mode));
        }
        if mode & 0o600 != 0o600 {
            return Err(ValueError::SocketModeOwner(mode));
        }
        Ok(SocketMode(mode))
    }
}

/// A group that exists on this system.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct GroupName {
    /// Its name.
    pub name: String,
    /// Its id.
    pub gid: u32,
}

impl TryFrom<String> for GroupName {
    type Error = ValueError;
    fn try_from(name: String) -> Result<Self, ValueError> {
        match nix::unistd::Group::from_name(&name) {
            Ok(Some(g)) => Ok(GroupName {
                name,
                gid: g.gid.as_raw(),
            }),
            Ok(None) => Err(ValueError::NoGroup(name)),
            Err(source) => Err(ValueError::GroupLookup { name, source }),
        }
    }
}

/// An integer in `MIN..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u64")]
pub struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<const MIN: u64, const MAX: u64> TryFrom<u64> for Bounded<MIN, MAX> {
    type Error = ValueError;
    fn try_from(v: u64) -> Result<Self, ValueError> {
        if (MIN..=MAX).contains(&v) {
            Ok(Bounded(v))
        } else {
            Err(ValueError::OutOfRange {
                value: v,
                min: MIN,
                max: MAX,
            })
        }
    }
}

impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    /// The value as a `usize` (the bounds used here all fit).
    pub fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics` (default true).
    pub enabled: bool,
    /// Where (default `127.0.0.1:9490`).
    pub listen: SocketAddr,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 9490)),
        }
    }
}

/// `[workers]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// Worker threads (1 to 64, default 1).
    pub count: Bounded<1, 64>,
    /// CPUs to pin the workers to, one per worker (default: not pinned).
    pub cpus: Spanned<Vec<usize>>,
    /// What an idle worker does.
    pub idle: IdleMode,
    /// `adaptive`: how long an idle worker keeps polling before it sleeps (µs, default 50).
    pub spin_us: Bounded<0, 1_000_000>,
    /// `sleep`: how long it sleeps; `adaptive`: the longest it sleeps (µs, default 100 000).
    /// A port's frames or a command wake a sleeping worker sooner.
    pub sleep_us: Bounded<1, 1_000_000>,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            count: Bounded(1),
            cpus: Spanned::new(0..0, Vec::new()),
            idle: IdleMode::Adaptive,
            spin_us: Bounded(50),
            sleep_us: Bounded(100_000),
        }
    }
}

/// `[vhost]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VhostConfig {
    /// The most guest memory one vhost-user port may map, in GiB (1 to 131072, default
    /// 1024: 1 TiB). A frontend's larger memory table is refused.
    pub max_guest_memory_gib: Bounded<1, 131_072>,
    /// Lend the rest of a guest's contiguous frames to the switch in place, their headers
    /// copied (one copy guest to guest), or copy each whole into weftd's memory first
    /// (default true; see `docs/SECURITY.md`).
    pub lend_guest_memory: bool,
}

impl Default for VhostConfig {
    fn default() -> Self {
        VhostConfig {
            max_guest_memory_gib: Bounded(weft_vhost::DEFAULT_MAX_GUEST_MEMORY >> 30),
            lend_guest_memory: true,
        }
    }
}

/// What an idle worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleMode {
    /// Polls without pause (lowest latency, one busy core per worker).
    Poll,
    /// Sleeps `sleep_us` between empty polls.
    Sleep,
    /// Polls for `spin_us`, then sleeps, longer and longer up to `sleep_us`.
    Adaptive,
}

/// A configuration file that could not be used.
#[derive(Debug)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, with its line and column when it has one.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "configuration file {} is not valid:\n{}",
            self.path.display(),
            self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}

impl Config {
    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            message: format!("cannot read it: {e}"),
        })?;
        Config::parse(&text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Parses and checks configuration text; the error says where and what.
    pub fn parse(text: &str) -> Result<Config, ConfigTextError> {
        let config: Config = toml::from_str(text)?;
        config.check(text)?;
        Ok(config)
    }

    /// Checks what single values cannot: relations between keys, and the seed switches.
    fn check(&self, text: &str) -> Result<(), ConfigTextError> {
        let at = |span: std::ops::Range<usize>| {
            let (line, column) = line_col(text, span.start);
            Position { line, column }
        };
        let cpus = self.workers.cpus.get_ref();
        if !cpus.is_empty() && cpus.len() != self.workers.count.get() {
            return Err(ConfigTextError::CpusPerWorker {
                at: at(self.workers.cpus.span()),
                cpus: cpus.len(),
                workers: self.workers.count.0,
            });
        }
        for dir in &self.vhost_socket_dirs {
            let text = dir.to_string_lossy();
            if !dir.is_absolute()
                || text.contains("//")
                || text.split('/').any(|c| c == "." || c == "..")
            {
                return Err(ConfigTextError::SocketDirNotPlain(text.into_owned()));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for seed in &self.switches {
            let switch = seed.get_ref();
            if !names.insert(switch.name.as_str()) {
                return Err(ConfigTextError::SwitchTwice {
                    at: at(seed.span()),
                    name: switch.name.clone(),
                });
            }
            crate::model::validate::switch_state(switch).map_err(|source| {
                ConfigTextError::Switch {
                    at: at(seed.span()),
                    name: switch.name.clone(),
                    source,
                }
            })?;
        }
        crate::model::validate::totals(&self.seed_switches()).map_err(ConfigTextError::Totals)?;
        if self.switches.len() > crate::model::MAX_SWITCHES {
            return Err(ConfigTextError::TooManySwitches {
                count: self.switches.len(),
                max: crate::model::MAX_SWITCHES,
            });
        }
        Ok(())
    }

    /// The seed switches, without their spans.
    pub fn seed_switches(&self) -> Vec<SwitchState> {
        self.switches.iter().map(|s| s.get_ref().clone()).collect()
    }
}

#[cfg(test)]
mod tests;
