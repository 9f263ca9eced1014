//! Files a request names that weftd reads for the client (today: tcp-link key files), read
//! before the controller's lock is taken, so that a slow or hostile file (on a hung file
//! system, say) holds up only its own client, never the control plane or the metrics. The
//! reads themselves refuse anything but a small regular file at once
//! ([`weft_overlay::tcp_link::read_key_file`]).

use std::collections::HashMap;
use std::path::Path;

use weft_control::state::{PortKind, PortState};
use weft_control::Request;
use weft_overlay::tcp_link::{read_key_file, KeyFileBytes};

/// The key files a request names, read (or refused, with why).
#[derive(Debug, Default, Clone)]
pub struct ClientFiles {
    keys: HashMap<String, Result<KeyFileBytes, String>>,
}

impl ClientFiles {
    /// Reads every key file `request` names (absolute paths only: validation refuses the
    /// others before anything would read them).
    pub fn prefetch(request: &Request) -> ClientFiles {
        let mut files = ClientFiles::default();
        match request {
            Request::PortAdd { kind, .. } => files.add(kind),
            Request::ConfigApply { state, .. } => {
                for port in state.switches.iter().flat_map(|s| &s.ports) {
                    let PortState { kind, .. } = port;
                    files.add(kind);
                }
            }
            _ => {}
        }
        files
    }

    fn add(&mut self, kind: &PortKind) {
        let PortKind::TcpLink {
            key_file: Some(path),
            ..
        } = kind
        else {
            return;
        };
        if !Path::new(path).is_absolute() || self.keys.contains_key(path) {
            return;
        }
        let read = read_key_file(Path::new(path)).map_err(|e| e.to_string());
        self.keys.insert(path.clone(), read);
    }

    /// The key file at `path`: as read before the request took the lock, or read now (a
    /// port restored on start, when no client waits).
    pub fn key(&self, path: &str) -> Result<KeyFileBytes, String> {
        match self.keys.get(path) {
            Some(read) => read.clone(),
            None => read_key_file(Path::new(path)).map_err(|e| e.to_string()),
        }
    }
}
