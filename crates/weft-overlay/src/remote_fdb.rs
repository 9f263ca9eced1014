//! The remote FDB of one VNI: which remote tunnel endpoint a MAC lives behind.
//!
//! Static entries come from configuration; learned entries (only when the port learns) come
//! from decapsulated traffic. Both are bounded: a static insert past the bound is an error,
//! a learned entry past the bound is refused and counted (never evicting a static entry, and
//! never letting a flood of source MACs grow the table). Learning never overrides a static
//! entry. Allocated once: the map's capacity is reserved for the bounds at creation.

use std::collections::HashMap;
use std::net::IpAddr;

use weft_packet::MacAddr;

use crate::error::OverlayError;

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteEntry {
    /// The remote tunnel endpoint.
    pub endpoint: IpAddr,
    /// Configured (true) or learned.
    pub is_static: bool,
}

/// What [`RemoteFdb::learn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnOutcome {
    /// A new entry, or a learned entry moved to another endpoint.
    Learned,
    /// Already known there (or a static entry, which learning leaves alone).
    Unchanged,
    /// The learned part of the table is full.
    Full,
}

/// MAC → remote endpoint, bounded.
#[derive(Debug, Clone)]
pub struct RemoteFdb {
    entries: HashMap<MacAddr, RemoteEntry>,
    max_static: usize,
    max_learned: usize,
    learned: usize,
}

impl RemoteFdb {
    /// A table of at most `max_static` configured and `max_learned` learned entries.
    pub fn new(max_static: usize, max_learned: usize) -> RemoteFdb {
        RemoteFdb {
            entries: HashMap::with_capacity(max_static.saturating_add(max_learned)),
            max_static,
            max_learned,
            learned: 0,
        }
    }

    /// Adds or replaces a static entry (a learned one for the MAC becomes static).
    pub fn insert_static(&mut self, mac: MacAddr, endpoint: IpAddr) -> Result<(), OverlayError> {
        let entry = RemoteEntry {
            endpoint,
            is_static: true,
        };
        match self.entries.get_mut(&mac) {
            Some(e) => {
                if !e.is_static {
                    self.learned -= 1;
                }
                *e = entry;
            }
            None => {
                if self.static_len() >= self.max_static {
                    return Err(OverlayError::FdbFull(self.max_static));
                }
                self.entries.insert(mac, entry);
            }
        }
        Ok(())
    }

    /// Removes an entry; true when there was one.
    pub fn remove(&mut self, mac: MacAddr) -> bool {
        match self.entries.remove(&mac) {
            Some(e) => {
                if !e.is_static {
                    self.learned -= 1;
                }
                true
            }
            None => false,
        }
    }

    /// Records that `mac` was seen behind `endpoint`.
    pub fn learn(&mut self, mac: MacAddr, endpoint: IpAddr) -> LearnOutcome {
        if !mac.is_unicast() {
            return LearnOutcome::Unchanged;
        }
        match self.entries.get_mut(&mac) {
            Some(e) if e.is_static || e.endpoint == endpoint => LearnOutcome::Unchanged,
            Some(e) => {
                e.endpoint = endpoint;
                LearnOutcome::Learned
            }
            None if self.learned >= self.max_learned => LearnOutcome::Full,
            None => {
                self.entries.insert(
                    mac,
                    RemoteEntry {
                        endpoint,
                        is_static: false,
                    },
                );
                self.learned += 1;
                LearnOutcome::Learned
            }
        }
    }

    /// Where `mac` lives, when known.
    pub fn lookup(&self, mac: MacAddr) -> Option<RemoteEntry> {
        self.entries.get(&mac).copied()
    }

    /// Entries of both kinds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Learned entries.
    pub fn learned_len(&self) -> usize {
        self.learned
    }

    /// Static entries.
    pub fn static_len(&self) -> usize {
        self.entries.len() - self.learned
    }
}
