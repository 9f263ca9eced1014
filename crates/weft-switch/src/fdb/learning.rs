//! How learning admits an entry: refresh, move or create it, and make room for it under the
//! table's bounds by the fair eviction rule (see the parent module's docs).

use super::slab::{Chain, Kind, NIL};
use super::{EvictionCause, Fdb, IgnoreReason, LearnOutcome};
use crate::types::PortId;

/// The entry an eviction removed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Eviction {
    victim_port: PortId,
    cause: EvictionCause,
}

/// The result of making room in a full table.
pub(super) enum Room {
    /// A slot is free (an expired entry was reclaimed).
    Made,
    /// A slot is free after evicting a live entry.
    Evicted(Eviction),
    /// Every entry is static.
    Full,
}

impl Fdb {
    /// Learns `port` for the entry already in slot `i`.
    pub(super) fn learn_known(&mut self, i: u32, port: PortId, now: u64) -> LearnOutcome {
        let old = *self.slab.get(i);
        if old.kind == Kind::Static {
            if old.port == port {
                self.stats.refreshed += 1;
                return LearnOutcome::Refreshed;
            }
            return self.ignore(IgnoreReason::StaticConflict);
        }
        let live = !self.is_expired(old.last_seen, now);
        if live && old.port == port {
            self.stats.refreshed += 1;
            if now.saturating_sub(old.last_seen) >= self.refresh_ns {
                self.slab.get_mut(i).last_seen = now;
                self.journal_write(old.key, port, now);
                let lru = &mut self.ports[port.index()].lru;
                self.slab.move_to_back(lru, i, Chain::ByPort);
                self.slab.move_to_back(&mut self.by_age, i, Chain::ByAge);
            }
            return LearnOutcome::Refreshed;
        }
        if old.port != port {
            if let Err(reason) = self.admit_move(i, port, live, now) {
                return self.ignore(reason);
            }
        }
        // Re-home the entry: off its old port first, so that it can never be its own victim.
        self.unlink_dynamic(i);
        let eviction = self.make_room_on_port(port, now);
        let now = self.move_time(live, old.last_seen, now);
        self.link_dynamic(i, port, now);
        self.bump_generation();
        if live {
            self.stats.moves += 1;
            LearnOutcome::Moved { from: old.port }
        } else {
            self.stats.learned += 1;
            Self::created(eviction)
        }
    }

    /// Learns a key the table does not hold yet.
    pub(super) fn learn_new(
        &mut self,
        key: u64,
        hash: u64,
        port: PortId,
        now: u64,
    ) -> LearnOutcome {
        if self.at_port_limit(port) {
            return self.ignore(IgnoreReason::PortMacLimit);
        }
        let mut eviction = self.make_room_on_port(port, now);
        if self.len() >= self.config.max_entries {
            match self.make_room_in_table(Some(port), now) {
                Room::Made => {}
                Room::Evicted(e) => eviction = Some(e),
                Room::Full => return self.ignore(IgnoreReason::TableFullOfStatic),
            }
        }
        let Some(i) = self.insert_slot(key, hash, port, Kind::Dynamic) else {
            return self.ignore(IgnoreReason::TableFullOfStatic);
        };
        self.link_dynamic(i, port, now);
        self.stats.learned += 1;
        self.bump_generation();
        Self::created(eviction)
    }

    fn created(eviction: Option<Eviction>) -> LearnOutcome {
        match eviction {
            Some(Eviction { victim_port, cause }) => LearnOutcome::Evicted { victim_port, cause },
            None => LearnOutcome::Learned,
        }
    }

    pub(super) fn ignore(&mut self, reason: IgnoreReason) -> LearnOutcome {
        self.stats.ignored.count(reason);
        LearnOutcome::Ignored(reason)
    }

    /// Frees one of `port`'s learned entries if it is at its limit.
    fn make_room_on_port(&mut self, port: PortId, now: u64) -> Option<Eviction> {
        let entries = self.ports[port.index()];
        if entries.dynamic < self.config.max_per_port || entries.lru.head == NIL {
            return None;
        }
        self.evict(entries.lru.head, now, EvictionCause::PortLimit)
    }

    /// Frees one slot of a full table: an expired entry if there is one, else the oldest
    /// entry of the port with the most learned entries (`prefer` on a tie).
    pub(super) fn make_room_in_table(&mut self, prefer: Option<PortId>, now: u64) -> Room {
        let oldest = self.by_age.head;
        if oldest != NIL && self.is_expired(self.slab.get(oldest).last_seen, now) {
            self.remove_slot(oldest);
            self.stats.expired += 1;
            return Room::Made;
        }
        let Some(victim_port) = self.biggest_port(prefer) else {
            return Room::Full;
        };
        let victim = self.ports[victim_port.index()].lru.head;
        match self.evict(victim, now, EvictionCause::TableFull) {
            Some(eviction) => Room::Evicted(eviction),
            None => Room::Made,
        }
    }

    /// The port holding the most learned entries, `prefer` if it ties; `None` if no port
    /// holds any.
    fn biggest_port(&self, prefer: Option<PortId>) -> Option<PortId> {
        let mut best: Option<(usize, usize)> = None;
        for (index, entries) in self.ports[..self.port_scan_end].iter().enumerate() {
            if entries.dynamic > best.map_or(0, |(_, count)| count) {
                best = Some((index, entries.dynamic));
            }
        }
        let (index, count) = best?;
        prefer
            .filter(|&p| self.dynamic_len_for_port(p) == count)
            .or_else(|| u16::try_from(index).ok().map(PortId))
    }

    /// Removes the learned entry `victim`, counting it as expired or evicted.
    fn evict(&mut self, victim: u32, now: u64, cause: EvictionCause) -> Option<Eviction> {
        let slot = *self.slab.get(victim);
        self.remove_slot(victim);
        if self.is_expired(slot.last_seen, now) {
            self.stats.expired += 1;
            return None;
        }
        match cause {
            EvictionCause::PortLimit => self.stats.evictions.port_limit += 1,
            EvictionCause::TableFull => self.stats.evictions.table_full += 1,
        }
        Some(Eviction {
            victim_port: slot.port,
            cause,
        })
    }
}
