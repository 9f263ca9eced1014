//! The remote FDB of one VNI: which remote tunnel endpoint a MAC lives behind.
//!
//! Static entries come from configuration; learned entries (only when the port learns) come
//! from decapsulated traffic. Both are bounded: a static insert past the bound is an error,
//! a learned entry past the bound is refused and counted (never evicting a static entry, and
//! never letting a flood of source MACs grow the table). Learning never overrides a static
//! entry. Learned entries age out: [`RemoteFdb::tick`] (once per received burst) sweeps,
//! at most every tenth of the ageing time, entries not seen for the ageing time. Allocated
//! once: the map's capacity is reserved for the bounds at creation.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

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

/// Default ageing time of learned entries (the switch FDB's default too).
pub const DEFAULT_AGEING: Duration = Duration::from_secs(300);

/// An entry and when it was last seen (learned entries; static ones never age).
#[derive(Debug, Clone, Copy)]
struct Slot {
    entry: RemoteEntry,
    seen: Instant,
}

/// MAC → remote endpoint, bounded.
#[derive(Debug, Clone)]
pub struct RemoteFdb {
    entries: HashMap<MacAddr, Slot>,
    max_static: usize,
    max_learned: usize,
    learned: usize,
    ageing: Duration,
    /// The time of the current burst (set by [`RemoteFdb::tick`]).
    now: Instant,
    /// When the learned entries were last swept.
    swept: Instant,
}

impl RemoteFdb {
    /// A table of at most `max_static` configured and `max_learned` learned entries.
    pub fn new(max_static: usize, max_learned: usize) -> RemoteFdb {
        RemoteFdb {
            entries: HashMap::with_capacity(max_static.saturating_add(max_learned)),
            max_static,
            max_learned,
            learned: 0,
            ageing: DEFAULT_AGEING,
            now: Instant::now(),
            swept: Instant::now(),
        }
    }

    /// Sets how long a learned entry lives without being seen again.
    pub fn set_ageing(&mut self, ageing: Duration) {
        self.ageing = ageing;
    }

    /// The ageing time of learned entries.
    pub fn ageing(&self) -> Duration {
        self.ageing
    }

    /// Moves the table's clock to `now` (the receive half calls it once per burst) and,
    /// at most every tenth of the ageing time, removes learned entries not seen for the
    /// ageing time. Returns how many it removed.
    pub fn tick(&mut self, now: Instant) -> usize {
        self.now = now;
        if now.saturating_duration_since(self.swept) < self.ageing / 10 {
            return 0;
        }
        self.swept = now;
        self.expire(now)
    }

    /// Removes learned entries not seen for the ageing time before `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let ageing = self.ageing;
        let before = self.entries.len();
        self.entries
            .retain(|_, s| s.entry.is_static || now.saturating_duration_since(s.seen) < ageing);
        let removed = before - self.entries.len();
        self.learned -= removed;
        removed
    }

    /// Every entry with, for learned ones, the time since it was last seen.
    pub fn entries(&self) -> impl Iterator<Item = (MacAddr, RemoteEntry, Option<Duration>)> + '_ {
        self.entries.iter().map(|(mac, s)| {
            let age = (!s.entry.is_static).then(|| self.now.saturating_duration_since(s.seen));
            (*mac, s.entry, age)
        })
    }

    /// Adds or replaces a static entry (a learned one for the MAC becomes static).
    pub fn insert_static(&mut self, mac: MacAddr, endpoint: IpAddr) -> Result<(), OverlayError> {
        let entry = RemoteEntry {
            endpoint,
            is_static: true,
        };
        let slot = Slot {
            entry,
            seen: self.now,
        };
        match self.entries.get_mut(&mac) {
            Some(s) => {
                if !s.entry.is_static {
                    self.learned -= 1;
                }
                *s = slot;
            }
            None => {
                if self.static_len() >= self.max_static {
                    return Err(OverlayError::FdbFull(self.max_static));
                }
                self.entries.insert(mac, slot);
            }
        }
        Ok(())
    }

    /// Removes an entry; true when there was one.
    pub fn remove(&mut self, mac: MacAddr) -> bool {
        match self.entries.remove(&mac) {
            Some(s) => {
                if !s.entry.is_static {
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
        let now = self.now;
        match self.entries.get_mut(&mac) {
            Some(s) if s.entry.is_static => LearnOutcome::Unchanged,
            Some(s) if s.entry.endpoint == endpoint => {
                s.seen = now;
                LearnOutcome::Unchanged
            }
            Some(s) => {
                s.entry.endpoint = endpoint;
                s.seen = now;
                LearnOutcome::Learned
            }
            None if self.learned >= self.max_learned => LearnOutcome::Full,
            None => {
                self.entries.insert(
                    mac,
                    Slot {
                        entry: RemoteEntry {
                            endpoint,
                            is_static: false,
                        },
                        seen: now,
                    },
                );
                self.learned += 1;
                LearnOutcome::Learned
            }
        }
    }

    /// Where `mac` lives, when known.
    pub fn lookup(&self, mac: MacAddr) -> Option<RemoteEntry> {
        self.entries.get(&mac).map(|s| s.entry)
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
