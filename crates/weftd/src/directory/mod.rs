//! The directory in weftd: the client ([`weft_directory::Directory`]), the feed that hands
//! its news to the VXLAN ports with `--directory` ([`feed::Feed`]), and the thread that
//! tells it, every publish interval, which ports take part and what this host has behind
//! them.

mod feed;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use weft_directory::{Directory, DirectoryConfig};

use crate::control::{lock, Controller};
pub use feed::Feed;

/// What the control plane keeps of the directory.
pub struct DirectoryLink {
    /// The client.
    pub client: Directory,
    /// Its endpoints.
    pub endpoints: Vec<String>,
    /// This host's name in it.
    pub host: String,
    feed: Arc<Feed>,
}

impl DirectoryLink {
    /// The VNIs carried now.
    pub fn vnis(&self) -> Vec<u32> {
        self.feed.vnis().into_iter().map(|v| v.get()).collect()
    }
}

/// The running directory: stops its thread and its client when dropped.
pub struct DirectoryService {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DirectoryService {
    /// Starts the client and the thread that feeds it from `controller`; the link is
    /// given to the controller for `directory_status` and `port add` checks.
    pub fn start(
        config: DirectoryConfig,
        controller: Arc<Mutex<Controller>>,
    ) -> Result<DirectoryService, weft_directory::DirectoryError> {
        let feed = Arc::new(Feed::default());
        let endpoints = config.endpoints.clone();
        let host = config.host.to_string();
        let interval = config.publish_interval;
        let client = Directory::start(config, feed.clone())?;
        let link = Arc::new(DirectoryLink {
            client,
            endpoints,
            host,
            feed: Arc::clone(&feed),
        });
        lock(&controller).set_directory(Arc::clone(&link));
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("weft-directory-feed".into())
            .spawn(move || {
                while !stopping.load(Ordering::Acquire) {
                    let (ports, desired) = lock(&controller).directory_snapshot();
                    feed.set_ports(&ports);
                    link.client.set_desired(desired);
                    std::thread::sleep(interval.min(Duration::from_secs(1)));
                }
            })
            .map_err(weft_directory::DirectoryError::Runtime)?;
        Ok(DirectoryService {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for DirectoryService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
