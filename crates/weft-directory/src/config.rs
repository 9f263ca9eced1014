//! How to reach the store and how much to take from it.

use std::path::PathBuf;
use std::time::Duration;

use crate::keys::HostId;

/// Client certificate, key and CA for a store that speaks TLS (PEM files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed the store's certificates.
    pub ca: Option<PathBuf>,
    /// This host's certificate, for a store that checks clients.
    pub cert: Option<PathBuf>,
    /// Its private key.
    pub key: Option<PathBuf>,
}

/// A directory client's settings.
#[derive(Debug, Clone)]
pub struct DirectoryConfig {
    /// The store's endpoints (`http://host:2379`, or `https://` with [`TlsFiles`]).
    pub endpoints: Vec<String>,
    /// Every key sits under it; starts and ends with `/`.
    pub prefix: String,
    /// This host's name in the directory.
    pub host: HostId,
    /// How long this host's entries outlive it: the lease's time to live.
    pub lease_ttl: Duration,
    /// TLS, when the endpoints are `https://`.
    pub tls: Option<TlsFiles>,
    /// User name and password, for a store with authentication on.
    pub user: Option<(String, String)>,
    /// Most entries held (tunnel endpoints and MAC claims of the VNIs carried).
    pub max_entries: usize,
    /// How often this host's entries are brought up to date.
    pub publish_interval: Duration,
    /// Most writes per interval.
    pub max_writes_per_interval: usize,
    /// How long to wait for the store to answer one request.
    pub request_timeout: Duration,
}

impl DirectoryConfig {
    /// Settings with the defaults for everything but where the store is and who this is.
    pub fn new(endpoints: Vec<String>, host: HostId) -> DirectoryConfig {
        DirectoryConfig {
            endpoints,
            prefix: "/weft/".to_string(),
            host,
            lease_ttl: Duration::from_secs(30),
            tls: None,
            user: None,
            max_entries: 1 << 20,
            publish_interval: Duration::from_millis(200),
            max_writes_per_interval: 500,
            request_timeout: Duration::from_secs(5),
        }
    }
}
