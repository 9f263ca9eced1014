//! `[directory]`: the etcd cluster in which weft hosts find each other's tunnel endpoints and
//! MACs. Without the table there is no directory, and a VXLAN port with `--directory` is
//! refused.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use weft_directory::{DirectoryConfig, HostId, TlsFiles};

use super::{Bounded, ValueError};

/// `[directory]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectorySection {
    /// The cluster's client URLs, `http://host:2379` or `https://...` (1 to 16).
    pub endpoints: Endpoints,
    /// Every key sits under it (default `/weft/`).
    #[serde(default = "default_prefix")]
    pub prefix: KeyPrefix,
    /// This host's name in the directory (default: the host name).
    #[serde(default)]
    pub host: Option<HostName>,
    /// Seconds this host's entries outlive it when it stops renewing them (2 to 3600,
    /// default 30).
    #[serde(default = "default_ttl")]
    pub lease_ttl_secs: Bounded<2, 3600>,
    /// The CA certificate (PEM) that signed the cluster's; for `https://` endpoints.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// This host's client certificate (PEM), for a cluster that checks clients.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM; not readable by group or others).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// A user, for a cluster with authentication on.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password, in a file not readable by group or others.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Most entries held (1 to 16777216, default 1048576).
    #[serde(default = "default_max_entries")]
    pub max_entries: Bounded<1, 16_777_216>,
    /// How often this host's entries are brought up to date, ms (20 to 60000, default 200).
    #[serde(default = "default_interval")]
    pub publish_interval_ms: Bounded<20, 60_000>,
    /// Most writes per interval (1 to 100000, default 500).
    #[serde(default = "default_writes")]
    pub max_writes_per_interval: Bounded<1, 100_000>,
}

fn default_prefix() -> KeyPrefix {
    KeyPrefix("/weft/".into())
}
fn default_ttl() -> Bounded<2, 3600> {
    Bounded(30)
}
fn default_max_entries() -> Bounded<1, 16_777_216> {
    Bounded(1 << 20)
}
fn default_interval() -> Bounded<20, 60_000> {
    Bounded(200)
}
fn default_writes() -> Bounded<1, 100_000> {
    Bounded(500)
}

/// 1 to 16 `http://` or `https://` URLs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct Endpoints(pub Vec<String>);

impl TryFrom<Vec<String>> for Endpoints {
    type Error = ValueError;
    fn try_from(urls: Vec<String>) -> Result<Self, ValueError> {
        if urls.is_empty() || urls.len() > 16 {
            return Err(ValueError::Directory(format!(
                "{} endpoints: give 1 to 16, e.g. [\"http://192.0.2.10:2379\"]",
                urls.len()
            )));
        }
        for url in &urls {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
                return Err(ValueError::Directory(format!(
                    "endpoint {url:?} is not a URL: write http://HOST:PORT or https://HOST:PORT"
                )));
            }
        }
        Ok(Endpoints(urls))
    }
}

/// A key prefix: starts and ends with `/`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct KeyPrefix(pub String);

impl TryFrom<String> for KeyPrefix {
    type Error = ValueError;
    fn try_from(p: String) -> Result<Self, ValueError> {
        weft_directory::keys::check_prefix(&p).map_err(ValueError::Directory)?;
        Ok(KeyPrefix(p))
    }
}

/// A host name the directory takes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HostName(pub HostId);

impl TryFrom<String> for HostName {
    type Error = ValueError;
    fn try_from(name: String) -> Result<Self, ValueError> {
        HostId::new(&name).map(HostName).map_err(|_| {
            ValueError::Directory(format!(
                "host {name:?}: use 1 to 64 of letters, digits, '.', '_' and '-'"
            ))
        })
    }
}

impl DirectorySection {
    /// The client's settings: files read, the host name found.
    pub fn client_config(&self) -> Result<DirectoryConfig, String> {
        let host = match &self.host {
            Some(h) => h.0.clone(),
            None => {
                let name = nix::unistd::gethostname()
                    .map_err(|e| format!("reading the host name: {e}"))?;
                let name = name.to_string_lossy();
                let short = name.split('.').next().unwrap_or_default();
                HostId::new(short).map_err(|_| {
                    format!(
                        "the host name {name:?} cannot name this host in the directory: set \
                         [directory] host"
                    )
                })?
            }
        };
        let mut c = DirectoryConfig::new(self.endpoints.0.clone(), host);
        c.prefix = self.prefix.0.clone();
        c.lease_ttl = Duration::from_secs(self.lease_ttl_secs.0);
        c.max_entries = self.max_entries.get();
        c.publish_interval = Duration::from_millis(self.publish_interval_ms.0);
        c.max_writes_per_interval = self.max_writes_per_interval.get();
        let https = self.endpoints.0.iter().any(|e| e.starts_with("https://"));
        if https || self.ca_file.is_some() || self.cert_file.is_some() {
            if self.endpoints.0.iter().any(|e| e.starts_with("http://")) {
                return Err("mix of http:// and https:// endpoints: use one".into());
            }
            if let Some(key) = &self.key_file {
                private_file(key)?;
            }
            c.tls = Some(TlsFiles {
                ca: self.ca_file.clone(),
                cert: self.cert_file.clone(),
                key: self.key_file.clone(),
            });
        }
        match (&self.user, &self.password_file) {
            (Some(user), Some(file)) => {
                let password = private_file(file)?;
                c.user = Some((user.clone(), password.trim_end_matches('\n').to_string()));
            }
            (None, None) => {}
            _ => return Err("user and password_file go together".into()),
        }
        Ok(c)
    }
}

/// The contents of a file that must not be readable by group or others.
fn private_file(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is readable by group or others: chmod 600 it",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}
