//! Directory entries: what the control plane's directory says lives behind which VTEP of
//! the VNI. They change in bulk — a batch of changes ([`RemoteFdb::apply_directory`]) or the
//! whole set after a resync ([`RemoteFdb::replace_directory`]) — each under the one lock the
//! caller holds, so the data path never sees half a change. They never age, and are bounded
//! apart from the other kinds ([`RemoteFdb::set_max_directory`]).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::IpAddr;

use weft_packet::MacAddr;

use super::{EntrySource, RemoteEntry, RemoteFdb, Slot};
use crate::vxlan::config::usable_endpoint;

/// Default bound of directory entries: 1000 hosts of 100 MACs each fit, with room.
pub const DEFAULT_MAX_DIRECTORY: usize = 131_072;

/// What one directory update did, change by change: each change of a call lands in exactly
/// one of the counts (a full replacement's removals of the entries it no longer lists, or
/// lists at a refused endpoint, are `removed` on top).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectoryApplied {
    /// New directory entries (a learned entry replaced counts here too).
    pub added: usize,
    /// Directory entries moved to another endpoint.
    pub moved: usize,
    /// Already so; a removal of a MAC that has no directory entry; or, in a full
    /// replacement, an entry a later one for the same MAC supersedes.
    pub unchanged: usize,
    /// Directory entries removed.
    pub removed: usize,
    /// New entries refused: the directory part of the table is full.
    pub refused_full: usize,
    /// Entries refused because their endpoint is the port's own address, another address
    /// family's, unspecified or multicast; a directory entry the MAC had is removed (it
    /// left for there: a machine that moved to this host, say).
    pub refused_endpoint: usize,
    /// Entries ignored because the MAC has a static entry (which stays).
    pub shadowed_by_static: usize,
}

/// A full directory set made ready for [`RemoteFdb::replace_directory`]: the last word on
/// each MAC.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorySet {
    /// Each MAC once, in the order given.
    entries: Vec<(MacAddr, IpAddr)>,
    /// The same, by MAC.
    last: HashMap<MacAddr, IpAddr>,
    /// Entries a later one for the same MAC replaced.
    superseded: usize,
}

impl DirectorySet {
    pub(crate) fn new(all: &[(MacAddr, IpAddr)]) -> DirectorySet {
        let mut last = HashMap::with_capacity(all.len());
        // From the end: the last entry for a MAC is the one kept.
        let mut entries: Vec<_> = all
            .iter()
            .rev()
            .filter(|(mac, ip)| match last.entry(*mac) {
                Entry::Vacant(slot) => {
                    slot.insert(*ip);
                    true
                }
                Entry::Occupied(_) => false,
            })
            .copied()
            .collect();
        entries.reverse();
        DirectorySet {
            superseded: all.len() - entries.len(),
            entries,
            last,
        }
    }
}

/// Whether a directory entry may point to `endpoint` on a port on `local` (unknown: yes).
fn allowed(local: Option<IpAddr>, endpoint: IpAddr) -> bool {
    local.is_none_or(|local| usable_endpoint(local, endpoint))
}

impl RemoteFdb {
    /// Sets the bound of directory entries (entries past it are refused, and ones already
    /// in stay).
    pub fn set_max_directory(&mut self, max: usize) {
        self.max_directory = max;
    }

    /// The port's own endpoint, which directory entries may not point to (nor to another
    /// address family).
    pub fn set_local(&mut self, local: IpAddr) {
        self.local = Some(local);
    }

    /// Applies directory changes in order: `Some(endpoint)` sets or moves the MAC's
    /// directory entry, `None` removes it (only a directory entry: a static or learned one
    /// stays).
    pub fn apply_directory(&mut self, changes: &[(MacAddr, Option<IpAddr>)]) -> DirectoryApplied {
        self.reserve_directory(changes.iter().filter(|(_, to)| to.is_some()).count());
        let mut applied = DirectoryApplied::default();
        for &(mac, to) in changes {
            match to {
                Some(endpoint) => self.set_directory(mac, endpoint, &mut applied),
                None if self.remove_directory(mac) => applied.removed += 1,
                None => applied.unchanged += 1,
            }
        }
        applied
    }

    /// Makes `all` the directory's whole set: its entries are set, directory entries it
    /// does not list are removed (first, so that they do not hold room the new ones need).
    /// A MAC given more than once takes its last endpoint (the others count as unchanged).
    pub fn replace_directory(&mut self, all: &[(MacAddr, IpAddr)]) -> DirectoryApplied {
        self.replace_directory_set(&DirectorySet::new(all))
    }

    /// [`RemoteFdb::replace_directory`] with the set made ready beforehand (outside the
    /// table's lock).
    pub(crate) fn replace_directory_set(&mut self, set: &DirectorySet) -> DirectoryApplied {
        // Kept: the directory entries `set` lists at an endpoint it may have (one it may not
        // is refused below, and must not hold room meanwhile).
        let local = self.local;
        let keep = |mac: &MacAddr| set.last.get(mac).is_some_and(|ip| allowed(local, *ip));
        let before = self.entries.len();
        self.entries
            .retain(|mac, s| s.entry.source != EntrySource::Directory || keep(mac));
        let removed = before - self.entries.len();
        self.directory -= removed;
        self.reserve_directory(set.entries.len());
        let mut applied = DirectoryApplied {
            removed,
            unchanged: set.superseded,
            ..DirectoryApplied::default()
        };
        for &(mac, endpoint) in &set.entries {
            self.set_directory(mac, endpoint, &mut applied);
        }
        applied
    }

    /// Sets one directory entry.
    fn set_directory(&mut self, mac: MacAddr, endpoint: IpAddr, applied: &mut DirectoryApplied) {
        let usable = allowed(self.local, endpoint);
        let existing = self.entries.get(&mac).map(|s| s.entry.source);
        match existing {
            Some(EntrySource::Static) => applied.shadowed_by_static += 1,
            _ if !usable => {
                self.remove_directory(mac);
                applied.refused_endpoint += 1;
            }
            Some(EntrySource::Directory) => {
                if let Some(s) = self.entries.get_mut(&mac) {
                    if s.entry.endpoint == endpoint {
                        applied.unchanged += 1;
                    } else {
                        s.entry.endpoint = endpoint;
                        applied.moved += 1;
                    }
                }
            }
            _ if self.directory >= self.max_directory => applied.refused_full += 1,
            // New, or in place of a learned entry (the directory is authoritative).
            Some(EntrySource::Learned) | None => {
                if let Some(source) = existing {
                    self.uncount(source);
                }
                let entry = RemoteEntry {
                    endpoint,
                    source: EntrySource::Directory,
                };
                let seen = self.now;
                self.entries.insert(mac, Slot { entry, seen });
                self.directory += 1;
                applied.added += 1;
            }
        }
    }

    /// Removes the MAC's directory entry; true when it had one.
    fn remove_directory(&mut self, mac: MacAddr) -> bool {
        let is_directory = self
            .entries
            .get(&mac)
            .is_some_and(|s| s.entry.source == EntrySource::Directory);
        if is_directory {
            self.entries.remove(&mac);
            self.directory -= 1;
        }
        is_directory
    }

    /// Grows the map, here on the control plane, for up to `incoming` more directory
    /// entries, keeping room for every static and learned entry the bounds allow: learning
    /// on the data path then never grows it.
    fn reserve_directory(&mut self, incoming: usize) {
        let directory = self
            .directory
            .saturating_add(incoming)
            .min(self.max_directory);
        let want = self
            .max_static
            .saturating_add(self.max_learned)
            .saturating_add(directory);
        // Best effort: if this fails the inserts grow the map themselves.
        let _ = self
            .entries
            .try_reserve(want.saturating_sub(self.entries.len()));
    }
}
