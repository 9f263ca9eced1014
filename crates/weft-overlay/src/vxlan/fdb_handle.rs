//! [`RemoteFdbHandle`]: the control plane's way into a running port's remote FDB and flood
//! list, so that static entries, the directory's entries and the directory's VTEPs change
//! without reopening the port (the halves keep running; the next burst sees the change).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_packet::MacAddr;

use crate::error::OverlayError;
use crate::vxlan::flood_list::{FloodApplied, FloodList};
use crate::vxlan::port::lock;
use crate::vxlan::remote_fdb::directory::{DirectoryApplied, DirectorySet};
use crate::vxlan::remote_fdb::{RemoteEntry, RemoteFdb};

/// A shared reference to one port's remote FDB and flood list. Each call takes the lock
/// once, briefly (the data path takes it once per burst): a bulk update is one lock, never
/// one per entry.
#[derive(Debug, Clone)]
pub struct RemoteFdbHandle {
    fdb: Arc<Mutex<RemoteFdb>>,
    flood: Arc<FloodList>,
}

impl RemoteFdbHandle {
    pub(crate) fn new(fdb: Arc<Mutex<RemoteFdb>>, flood: Arc<FloodList>) -> RemoteFdbHandle {
        RemoteFdbHandle { fdb, flood }
    }

    /// Adds or replaces a static entry (in place of a directory or learned one too).
    pub fn insert_static(&self, mac: MacAddr, endpoint: IpAddr) -> Result<(), OverlayError> {
        lock(&self.fdb).insert_static(mac, endpoint)
    }

    /// Removes the entry for `mac`, static or learned; true when there was one. A
    /// directory entry stays (the directory owns it).
    pub fn remove(&self, mac: MacAddr) -> bool {
        lock(&self.fdb).remove(mac)
    }

    /// Applies the directory's changes in order, under one lock: `Some(endpoint)` sets or
    /// moves a MAC's directory entry, `None` removes it (only a directory entry). See
    /// [`RemoteFdb::apply_directory`].
    pub fn apply_directory(&self, changes: &[(MacAddr, Option<IpAddr>)]) -> DirectoryApplied {
        lock(&self.fdb).apply_directory(changes)
    }

    /// Makes `all` the directory's whole set (after a resync), under one lock: frames see
    /// the old set or the new one, never an empty table between. See
    /// [`RemoteFdb::replace_directory`].
    pub fn replace_directory(&self, all: &[(MacAddr, IpAddr)]) -> DirectoryApplied {
        // Deduplicated before taking the lock: the data path waits only for the table work.
        let set = DirectorySet::new(all);
        lock(&self.fdb).replace_directory_set(&set)
    }

    /// Makes `remotes` the directory's VTEPs for the port's VNI: the flood list becomes the
    /// configured remotes and these, and the receive half takes datagrams from all of them.
    /// Both halves see it at their next burst. The port's own address and other address
    /// families are left out and counted; more than [`crate::MAX_FLOOD_REMOTES`] in all is
    /// an error, and the list stays as it was.
    pub fn set_directory_remotes(&self, remotes: &[IpAddr]) -> Result<FloodApplied, OverlayError> {
        self.flood.set_directory(remotes)
    }

    /// The flood list now: configured remotes, then the directory's.
    pub fn flood_remotes(&self) -> Vec<IpAddr> {
        self.flood.remotes()
    }

    /// How long a learned entry lives without being seen again (the port's configured
    /// remote ageing time).
    pub fn ageing(&self) -> Duration {
        lock(&self.fdb).ageing()
    }

    /// Where `mac` lives, when known.
    pub fn lookup(&self, mac: MacAddr) -> Option<RemoteEntry> {
        lock(&self.fdb).lookup(mac)
    }

    /// Every entry, sorted by MAC, with the time since a learned one was last seen (expired
    /// ones are swept first, so an idle port does not list them).
    pub fn entries(&self) -> Vec<(MacAddr, RemoteEntry, Option<Duration>)> {
        let now = Instant::now();
        let mut fdb = lock(&self.fdb);
        fdb.tick(now);
        fdb.expire(now);
        let mut all: Vec<_> = fdb.entries().collect();
        drop(fdb);
        all.sort_by_key(|(mac, _, _)| *mac);
        all
    }
}
