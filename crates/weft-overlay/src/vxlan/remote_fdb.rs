//! The remote FDB of one VNI: which remote tunnel endpoint a MAC lives behind.
//!
//! An entry is static (configuration), directory (the control plane's directory of the VNI's
//! MACs, changed in bulk: see [`directory`]) or learned (only when the port learns, from
//! decapsulated traffic). Priority: static > directory > learned — a static insert replaces
//! either other kind, a directory insert replaces a learned entry and leaves a static one
//! alone, and learning never overrides the other two. Each kind is bounded: a static insert
//! past its bound is an error, directory and learned inserts past theirs are refused and
//! counted (never evicting another entry, and never letting a flood of source MACs grow the
//! table). Learned entries age out: [`RemoteFdb::tick`] (once per received burst) sweeps, at
//! most every tenth of the ageing time, entries not seen for the ageing time. The map's
//! capacity is reserved for the static and learned bounds at creation and grown for
//! directory entries only by the control plane, so the data path never allocates.

pub mod directory;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use weft_packet::MacAddr;

use crate::error::OverlayError;

/// Where an entry comes from, in priority order (a higher one is never overridden by a
/// lower one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntrySource {
    /// Learned from received traffic; ages out.
    Learned,
    /// From the directory (the control plane's view of the VNI); never ages.
    Directory,
    /// Configured; never ages.
    Static,
}

impl EntrySource {
    /// The name `weft remote-mac show` prints: `static`, `directory` or `learned`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntrySource::Static => "static",
            EntrySource::Directory => "directory",
            EntrySource::Learned => "learned",
        }
    }
}

/// One entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteEntry {
    /// The remote tunnel endpoint.
    pub endpoint: IpAddr,
    /// Where the entry comes from.
    pub source: EntrySource,
}

impl RemoteEntry {
    /// True for a configured entry.
    pub fn is_static(&self) -> bool {
        self.source == EntrySource::Static
    }
}

/// What [`RemoteFdb::learn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnOutcome {
    /// A new entry, or a learned entry moved to another endpoint.
    Learned,
    /// Already known there (or a static or directory entry, which learning leaves alone).
    Unchanged,
    /// The learned part of the table is full.
    Full,
}

/// Default ageing time of learned entries (the switch FDB's default too).
pub const DEFAULT_AGEING: Duration = Duration::from_secs(300);

/// An entry and when it was last seen (learned entries; the others never age).
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
    max_directory: usize,
    learned: usize,
    directory: usize,
    /// The port's own endpoint: directory entries may not point there (nor to another
    /// address family). `None`: any endpoint is taken.
    local: Option<IpAddr>,
    ageing: Duration,
    /// The time of the current burst (set by [`RemoteFdb::tick`]).
    now: Instant,
    /// When the learned entries were last swept.
    swept: Instant,
}

impl RemoteFdb {
    /// A table of at most `max_static` configured and `max_learned` learned entries, and
    /// at most [`directory::DEFAULT_MAX_DIRECTORY`] directory entries
    /// ([`RemoteFdb::set_max_directory`] changes that).
    pub fn new(max_static: usize, max_learned: usize) -> RemoteFdb {
        RemoteFdb {
            entries: HashMap::with_capacity(max_static.saturating_add(max_learned)),
            max_static,
            max_learned,
            max_directory: directory::DEFAULT_MAX_DIRECTORY,
            learned: 0,
            directory: 0,
            local: None,
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
        self.entries.retain(|_, s| {
            s.entry.source != EntrySource::Learned || now.saturating_duration_since(s.seen) < ageing
        });
        let removed = before - self.entries.len();
        self.learned -= removed;
        removed
    }

    /// Every entry with, for learned ones, the time since it was last seen.
    pub fn entries(&self) -> impl Iterator<Item = (MacAddr, RemoteEntry, Option<Duration>)> + '_ {
        self.entries.iter().map(|(mac, s)| {
            let age = (s.entry.source == EntrySource::Learned)
                .then(|| self.now.saturating_duration_since(s.seen));
            (*mac, s.entry, age)
        })
    }

    /// Takes a slot out of its kind's count (it is being replaced or removed).
    fn uncount(&mut self, source: EntrySource) {
        match source {
            EntrySource::Learned => self.learned -= 1,
            EntrySource::Directory => self.directory -= 1,
            EntrySource::Static => {}
        }
    }

    /// Adds or replaces a static entry (a directory or learned one for the MAC becomes
    /// static; it counts against the static bound then too).
    pub fn insert_static(&mut self, mac: MacAddr, endpoint: IpAddr) -> Result<(), OverlayError> {
        let existing = self.entries.get(&mac).map(|s| s.entry.source);
        if existing != Some(EntrySource::Static) && self.static_len() >= self.max_static {
            return Err(OverlayError::FdbFull(self.max_static));
        }
        if let Some(source) = existing {
            self.uncount(source);
        }
        let slot = Slot {
            entry: RemoteEntry {
                endpoint,
                source: EntrySource::Static,
            },
            seen: self.now,
        };
        self.entries.insert(mac, slot);
        Ok(())
    }

    /// Removes a static or learned entry; true when there was one. A directory entry stays:
    /// the directory owns it ([`RemoteFdb::apply_directory`] removes it).
    pub fn remove(&mut self, mac: MacAddr) -> bool {
        match self.entries.get(&mac).map(|s| s.entry.source) {
            None | Some(EntrySource::Directory) => false,
            Some(source) => {
                self.entries.remove(&mac);
                self.uncount(source);
                true
            }
        }
    }

    /// Records that `mac` was seen behind `endpoint`.
    pub fn learn(&mut self, mac: MacAddr, endpoint: IpAddr) -> LearnOutcome {
        if !mac.is_unicast() {
            return LearnOutcome::Unchanged;
        }
        let now = self.now;
        match self.entries.get_mut(&mac) {
            // The configuration and the directory are authoritative.
            Some(s) if s.entry.source != EntrySource::Learned => LearnOutcome::Unchanged,
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
                            source: EntrySource::Learned,
                        },
                        seen: now,
                    },
                );
                self.learned += 1;
                LearnOutcome::Learned
            }
        }
    }

    /// Learned entries and how long ago each was last seen, at `now` (for a hand-over).
    pub(crate) fn learned_ages(&self, now: Instant) -> Vec<(MacAddr, IpAddr, Duration)> {
        self.entries
            .iter()
            .filter(|(_, s)| s.entry.source == EntrySource::Learned)
            .map(|(mac, s)| {
                (
                    *mac,
                    s.entry.endpoint,
                    now.saturating_duration_since(s.seen),
                )
            })
            .collect()
    }

    /// Learns `mac` behind `endpoint` as last seen `age` before `now` (an entry carried
    /// over from another process, its ageing going on). One already as old as the ageing
    /// time is left out. What [`RemoteFdb::learn`] does otherwise.
    pub(crate) fn restore_learned(
        &mut self,
        mac: MacAddr,
        endpoint: IpAddr,
        age: Duration,
        now: Instant,
    ) -> LearnOutcome {
        if age >= self.ageing {
            return LearnOutcome::Unchanged;
        }
        self.now = now;
        let outcome = self.learn(mac, endpoint);
        if let Some(s) = self.entries.get_mut(&mac) {
            if s.entry.source == EntrySource::Learned {
                s.seen = now.checked_sub(age).unwrap_or(now);
            }
        }
        outcome
    }

    /// Where `mac` lives, when known.
    pub fn lookup(&self, mac: MacAddr) -> Option<RemoteEntry> {
        self.entries.get(&mac).map(|s| s.entry)
    }

    /// Entries of every kind.
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

    /// Directory entries.
    pub fn directory_len(&self) -> usize {
        self.directory
    }

    /// Static entries.
    pub fn static_len(&self) -> usize {
        self.entries.len() - self.learned - self.directory
    }
}
