//! [`RemoteFdbHandle`]: the control plane's way into a running port's remote FDB, so static
//! entries change without reopening the port (the halves keep running; the next burst sees
//! the change).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_packet::MacAddr;

use crate::error::OverlayError;
use crate::vxlan::port::lock;
use crate::vxlan::remote_fdb::{RemoteEntry, RemoteFdb};

/// A shared reference to one port's remote FDB. Each call takes the table's lock briefly
/// (the data path takes it once per burst).
#[derive(Debug, Clone)]
pub struct RemoteFdbHandle(Arc<Mutex<RemoteFdb>>);

impl RemoteFdbHandle {
    pub(crate) fn new(fdb: Arc<Mutex<RemoteFdb>>) -> RemoteFdbHandle {
        RemoteFdbHandle(fdb)
    }

    /// Adds or replaces a static entry.
    pub fn insert_static(&self, mac: MacAddr, endpoint: IpAddr) -> Result<(), OverlayError> {
        lock(&self.0).insert_static(mac, endpoint)
    }

    /// Removes the entry for `mac`, static or learned; true when there was one.
    pub fn remove(&self, mac: MacAddr) -> bool {
        lock(&self.0).remove(mac)
    }

    /// How long a learned entry lives without being seen again (the port's configured
    /// remote ageing time).
    pub fn ageing(&self) -> Duration {
        lock(&self.0).ageing()
    }

    /// Where `mac` lives, when known.
    pub fn lookup(&self, mac: MacAddr) -> Option<RemoteEntry> {
        lock(&self.0).lookup(mac)
    }

    /// Every entry, sorted by MAC, with the time since a learned one was last seen (expired
    /// ones are swept first, so an idle port does not list them).
    pub fn entries(&self) -> Vec<(MacAddr, RemoteEntry, Option<Duration>)> {
        let now = Instant::now();
        let mut fdb = lock(&self.0);
        fdb.tick(now);
        fdb.expire(now);
        let mut all: Vec<_> = fdb.entries().collect();
        drop(fdb);
        all.sort_by_key(|(mac, _, _)| *mac);
        all
    }
}
