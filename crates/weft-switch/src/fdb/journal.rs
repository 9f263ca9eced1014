//! What a table learned, written down for the other lanes of a switch (`crate::lanes`), and
//! what they learned, taken in.
//!
//! A switch whose ports' queues are spread over several worker threads runs one [`Fdb`]
//! per thread. Each records every learned entry it writes — a new, revived or moved entry,
//! and a refresh that rewrites the timestamp (at most once per `refresh_granularity` per
//! active address) — and the others apply those records between batches. An entry the
//! others hear of keeps the time it was seen; a record older than a live entry on another
//! port is ignored, so a station that moved between two lanes' records ends up on the port
//! it was seen on last, in every table. Ties in time are broken the same way everywhere: a
//! lane moving a station in the instant of the record it overrides records the move 1 ns
//! later (`Fdb::move_time`), and two records of one instant on two ports leave the station
//! on the higher port.
//!
//! The journal is bounded (reserved when turned on, never grown): records beyond it are
//! counted and lost, and the other tables learn those addresses from their next refresh,
//! or flood meanwhile.

use core::hash::BuildHasher;

use weft_packet::MacAddr;

use super::slab::{Chain, Kind, NIL};
use super::{check_key, pack_key, unpack_key, Fdb, LearnOutcome};
use crate::types::{PortId, Timestamp, VlanId};

/// One learned entry, as another table is told of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnedEntry {
    /// The entry's VLAN.
    pub vlan: VlanId,
    /// The station's address.
    pub mac: MacAddr,
    /// Where it was seen.
    pub port: PortId,
    /// When (the learning table's clock).
    pub seen: Timestamp,
    /// Set when the learning table found the station flapping and holds it on `port` until
    /// then (flap dampening): the other tables hold it there too.
    pub held_until: Option<Timestamp>,
}

/// The bounded record of learned entries (off until [`Fdb::start_journal`]).
#[derive(Debug, Default)]
pub(super) struct Journal {
    on: bool,
    /// (key, port, seen, held until or 0).
    entries: Vec<(u64, PortId, u64, u64)>,
    capacity: usize,
    lost: u64,
}

impl Journal {
    fn write(&mut self, key: u64, port: PortId, seen: u64, held_until: u64) {
        if !self.on {
            return;
        }
        if self.entries.len() < self.capacity {
            self.entries.push((key, port, seen, held_until));
        } else {
            self.lost += 1;
        }
    }
}

impl Fdb {
    /// Starts recording learned entries, keeping at most `capacity` until taken.
    pub fn start_journal(&mut self, capacity: usize) {
        self.journal = Journal {
            on: true,
            entries: Vec::with_capacity(capacity),
            capacity,
            lost: 0,
        };
    }

    /// True while learned entries are recorded.
    #[cfg(test)]
    pub(crate) fn journal_on(&self) -> bool {
        self.journal.on
    }

    /// True when entries are waiting to be taken.
    pub fn journal_pending(&self) -> bool {
        !self.journal.entries.is_empty()
    }

    /// Hands every recorded entry to `f`, oldest first, and forgets them. Returns how many
    /// records the journal could not keep since the last drain (it was full).
    pub fn drain_journal(&mut self, mut f: impl FnMut(LearnedEntry)) -> u64 {
        for (key, port, seen, held_until) in self.journal.entries.drain(..) {
            let (vlan, mac) = unpack_key(key);
            f(LearnedEntry {
                vlan,
                mac,
                port,
                seen: Timestamp(seen),
                held_until: (held_until != 0).then_some(Timestamp(held_until)),
            });
        }
        std::mem::take(&mut self.journal.lost)
    }

    /// The time a move of a live entry seen at `last_seen` is recorded at: `now`, or just
    /// after `last_seen` when that is not earlier (a lane moving a station it heard of from
    /// another lane in the same instant). The move then wins over the record it overrode on
    /// every lane, as it did here. Only while recording: one table alone keeps `now`. (The
    /// entry then ages 1 ns later than it would have.)
    pub(super) fn move_time(&mut self, live: bool, last_seen: u64, now: u64) -> u64 {
        if !(self.journal.on && live && last_seen >= now) {
            return now;
        }
        let at = last_seen.saturating_add(1);
        // The clock never falls behind an entry's time: the age lists stay sorted.
        self.clock = self.clock.max(at);
        at
    }

    /// Notes that learned entry `key` was written (created, moved or refreshed) at `seen`.
    pub(super) fn journal_write(&mut self, key: u64, port: PortId, seen: u64) {
        self.journal.write(key, port, seen, 0);
    }

    /// Notes that learned entry `key` is held on `port` until `until` (a flap episode began
    /// here at `seen`).
    pub(super) fn journal_hold(&mut self, key: u64, port: PortId, seen: u64, until: u64) {
        self.journal.write(key, port, seen, until.max(1));
    }

    /// Learns an entry another table recorded, seen at `entry.seen` (never written to
    /// this table's own journal: records do not echo between tables). A record older than
    /// this table's live entry on another port (or of the same instant, for a lower port)
    /// is ignored (returns `Refreshed`: nothing changed), so whatever order records arrive
    /// in, a station ends up on the port it was seen on last. The entry keeps the time it
    /// was really seen, so it ages as it would have in the table that saw it.
    pub fn learn_from_peer(&mut self, entry: LearnedEntry, now: Timestamp) -> LearnOutcome {
        if let Err(reason) = check_key(entry.vlan, entry.mac, entry.port) {
            return self.ignore(reason);
        }
        let key = pack_key(entry.vlan, entry.mac);
        let hash = self.hasher.hash_one(key);
        if let Some(until) = entry.held_until {
            return self.hold_from_peer(key, hash, entry.port, until, now);
        }
        // The table's clock moves up to the record's time (never back): a record is never
        // from this table's future, so its time is kept as it is.
        let now = self.advance_clock(Timestamp(now.0.max(entry.seen.0)));
        let seen = entry.seen.0;
        let found = self.find(hash, key);
        if let Some(i) = found {
            let slot = *self.slab.get(i);
            if slot.kind == Kind::Dynamic && !self.is_expired(slot.last_seen, now) {
                // Newer wins; two records of one instant on two ports (two lanes seeing
                // the station at once, neither hearing of the other first) resolve the same
                // way on every lane: the higher port.
                let keep =
                    slot.last_seen > seen || (slot.last_seen == seen && slot.port > entry.port);
                if slot.port != entry.port && keep {
                    return LearnOutcome::Refreshed;
                }
                if slot.port == entry.port {
                    if seen.saturating_sub(slot.last_seen) >= self.refresh_ns {
                        self.reseat_by_age(i, seen);
                    }
                    self.stats.refreshed += 1;
                    return LearnOutcome::Refreshed;
                }
            }
        }
        let on = std::mem::replace(&mut self.journal.on, false);
        let outcome = match found {
            Some(i) => self.learn_known(i, entry.port, now),
            None => self.learn_new(key, hash, entry.port, now),
        };
        self.journal.on = on;
        if outcome.changed_lookups() {
            if let Some(i) = self.find(hash, key) {
                self.reseat_by_age(i, seen);
            }
        }
        outcome
    }

    /// Holds the entry for `key` on `port` until `until`, as another table that found it
    /// flapping does (moving it there if it is elsewhere here): every lane then drops the
    /// station's frames from other ports alike. Only the finding table reports the episode.
    fn hold_from_peer(
        &mut self,
        key: u64,
        hash: u64,
        port: PortId,
        until: Timestamp,
        now: Timestamp,
    ) -> LearnOutcome {
        let Some(i) = self.find(hash, key) else {
            return LearnOutcome::Refreshed;
        };
        let slot = *self.slab.get(i);
        if slot.kind != Kind::Dynamic {
            return LearnOutcome::Refreshed;
        }
        let now = self.advance_clock(now);
        let held_until = slot.held_until.max(until.0);
        let outcome = if slot.port == port {
            LearnOutcome::Refreshed
        } else {
            let on = std::mem::replace(&mut self.journal.on, false);
            self.unlink_dynamic(i);
            self.link_dynamic(i, port, now.max(slot.last_seen));
            self.journal.on = on;
            self.bump_generation();
            self.stats.moves += 1;
            LearnOutcome::Moved { from: slot.port }
        };
        let slot = self.slab.get_mut(i);
        slot.held_until = held_until;
        slot.moves = 0;
        slot.moves_since = held_until;
        outcome
    }

    /// Sets learned entry `i`'s time to `seen` and puts it where that time belongs on the
    /// age list and its port's list, looking back from the newest end at most
    /// [`RESEAT_STEPS`] entries on each (records arrive nearly in time order, so the place
    /// is almost always within a few). Past the bound the entry counts as seen now, at the
    /// newest end of both: a little younger than the truth rather than out of order, which
    /// the sweep and the eviction order rely on.
    fn reseat_by_age(&mut self, i: u32, seen: u64) {
        let slot = *self.slab.get(i);
        if slot.kind != Kind::Dynamic {
            return;
        }
        let port = slot.port.index();
        self.slab.unlink(&mut self.by_age, i, Chain::ByAge);
        self.slab
            .unlink(&mut self.ports[port].lru, i, Chain::ByPort);
        let by_age = self.place_for(self.by_age, seen, Chain::ByAge);
        let by_port = self.place_for(self.ports[port].lru, seen, Chain::ByPort);
        match (by_age, by_port) {
            (Some(after_age), Some(after_port)) => {
                self.slab.get_mut(i).last_seen = seen;
                self.slab
                    .insert_after(&mut self.by_age, after_age, i, Chain::ByAge);
                self.slab
                    .insert_after(&mut self.ports[port].lru, after_port, i, Chain::ByPort);
            }
            _ => {
                self.slab.get_mut(i).last_seen = self.clock;
                self.slab.push_back(&mut self.by_age, i, Chain::ByAge);
                self.slab
                    .push_back(&mut self.ports[port].lru, i, Chain::ByPort);
            }
        }
    }

    /// The entry of list `ends` a time `seen` goes after (`NIL`: the head), if within
    /// [`RESEAT_STEPS`] of the newest end.
    fn place_for(&self, ends: super::slab::Ends, seen: u64, chain: Chain) -> Option<u32> {
        let mut after = ends.tail;
        for _ in 0..RESEAT_STEPS {
            if after == NIL || self.slab.get(after).last_seen <= seen {
                return Some(after);
            }
            after = match chain {
                Chain::ByAge => self.slab.get(after).by_age.prev,
                Chain::ByPort => self.slab.get(after).by_port.prev,
            };
        }
        (after == NIL || self.slab.get(after).last_seen <= seen).then_some(after)
    }
}

/// How far back on the age list [`Fdb::learn_from_peer`] looks for an entry's place.
const RESEAT_STEPS: usize = 64;
