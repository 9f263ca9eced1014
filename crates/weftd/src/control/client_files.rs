//! Files a request names that weftd reads for the client (today: tcp-link key files), read
//! before the controller's lock is taken, so that a slow or hostile file (on a hung file
//! system, say) holds up only its own client, never the control plane or the metrics. The
//! reads themselves refuse anything but a small regular file at once
//! ([`weft_overlay::tcp_link::read_key_file`]), and open the file with the client's own
//! permissions ([`FileReader`]): weftd never reads for a client what it could not read.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use weft_control::state::{PortKind, PortState};
use weft_control::Request;
use weft_overlay::tcp_link::{
    key_file_options, read_key_file, read_opened_key_file, KeyFileBytes, KeyFileError,
};

use super::open_as::FileReader;

/// The key files a request names, read (or refused, with why).
#[derive(Debug, Default, Clone)]
pub struct ClientFiles {
    keys: HashMap<String, Result<KeyFileBytes, Arc<KeyFileError>>>,
}

impl ClientFiles {
    /// Reads every key file `request` names (absolute paths only: validation refuses the
    /// others before anything would read them) as `reader`.
    pub fn prefetch(request: &Request, reader: &FileReader) -> ClientFiles {
        let mut files = ClientFiles::default();
        match request {
            Request::PortAdd { kind, .. } => files.add(kind, reader),
            Request::ConfigApply { state, .. } => {
                for port in state.switches.iter().flat_map(|s| &s.ports) {
                    let PortState { kind, .. } = port;
                    files.add(kind, reader);
                }
            }
            _ => {}
        }
        files
    }

    fn add(&mut self, kind: &PortKind, reader: &FileReader) {
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
        let path_ref = Path::new(path);
        let opened = reader.open(path_ref, &key_file_options());
        let read = read_opened_key_file(path_ref, opened).map_err(Arc::new);
        self.keys.insert(path.clone(), read);
    }

    /// The key file at `path`: as read before the request took the lock, or read now as
    /// weftd (a port restored on start from the state file weftd wrote).
    pub fn key(&self, path: &str) -> Result<KeyFileBytes, KeyFileError> {
        match self.keys.get(path) {
            Some(Ok(bytes)) => Ok(bytes.clone()),
            // Handed out as often as the port is opened.
            Some(Err(e)) => Err(KeyFileError {
                path: e.path.clone(),
                problem: e.problem.clone(),
            }),
            None => read_key_file(Path::new(path)),
        }
    }
}
