//! The learning bridge's forwarding database: (VLAN, MAC) → port, after VALE's learning
//! bridge, bounded and hardened against hostile guests.
//!
//! **Ownership.** One worker thread owns an [`Fdb`] and calls it for every packet
//! (`&mut self`, no locks). The control plane changes it through that worker.
//!
//! **Cost.** `lookup`, `learn` and `remove` are O(1) (one hash probe plus a few list
//! splices; a full table adds a scan of at most [`MAX_PORTS`] per-port counters) and never
//! allocate: every slot and the whole hash index are reserved in [`Fdb::new`]. The hash is
//! foldhash with a random per-table seed, since guests choose the source addresses.
//! `expire` is O(expired + 1); `flush` and `entries` walk the table.
//!
//! **Bounds and fair eviction.** At most `max_entries` entries in all and `max_per_port`
//! learned ones per port. A port at its own limit that learns a new address evicts its
//! own least recently seen entry. When the whole table is full, the least recently seen
//! entry of the port holding the most learned entries goes (the learning port itself on a
//! tie). So a port only ever takes an entry from a port holding more than it does: a port
//! flooding random source addresses ends up evicting its own entries and cannot push out
//! those of a smaller port. Expired entries are reclaimed before any live one is evicted.
//!
//! **Ageing.** A learned entry answers lookups until `ageing` has passed since its source
//! was last seen, whether or not the sweep ([`Fdb::expire`]) has removed it yet. To keep
//! the per-packet refresh a read, a refresh rewrites the timestamp (and LRU position) only
//! when the stored one is at least `refresh_granularity` (default 1 s) old: an active entry
//! therefore expires between `ageing - refresh_granularity` and `ageing` after its last
//! packet, and LRU order is exact to within the same granularity.
//!
//! **Time.** Callers pass the time. `learn` and `expire` never move the table's clock
//! backwards: a `now` older than one already seen counts as the latest one seen, which
//! keeps the age lists sorted.
//!
//! **Generation.** [`Fdb::generation`] changes whenever an operation can change what
//! `lookup` answers at the table's current time, the latest `now` given to `learn` or
//! `expire`: a new, revived, moved, evicted, removed, flushed, expired or static entry. It
//! does not change when a refresh merely rewrites a timestamp, nor when time passes: an
//! entry that ages out stops answering `lookup` at once, but the generation moves only
//! when the sweep removes it. A cache keyed by the generation may thus serve an aged-out
//! destination until the next sweep.

mod config;
mod guard;
#[cfg(test)]
mod guard_tests;
mod journal;
#[cfg(test)]
mod journal_tests;
mod learning;
mod report;
mod slab;

#[cfg(test)]
mod eviction_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

pub use config::{
    FdbConfig, FdbError, DEFAULT_MAC_MOVE_HOLD, MAX_FDB_ENTRIES, MAX_FDB_VLAN, MAX_MAC_MOVE_HOLD,
};
pub use guard::{FlapEpisode, FLAP_LOG_LEN};
pub use journal::LearnedEntry;
pub use report::{
    EvictionCause, EvictionStats, FdbEntryView, FdbStats, FlushFilter, IgnoreReason, IgnoredStats,
    LearnOutcome,
};

use core::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use weft_packet::MacAddr;

use crate::types::{PortId, Timestamp, VlanId, MAX_PORTS};
use learning::Room;
use slab::{Chain, Ends, Kind, Slab, Slot, NIL};

/// The key of an entry: the VLAN in the top 16 bits, the MAC below.
fn pack_key(vlan: VlanId, mac: MacAddr) -> u64 {
    (u64::from(vlan) << 48) | mac.to_u64()
}

fn unpack_key(key: u64) -> (VlanId, MacAddr) {
    let b = key.to_be_bytes();
    (u16::from_be_bytes([b[0], b[1]]), MacAddr::from_u64(key))
}

/// Whether an entry for `(vlan, mac)` on `port` may exist at all.
fn check_key(vlan: VlanId, mac: MacAddr, port: PortId) -> Result<(), IgnoreReason> {
    if port.index() >= MAX_PORTS {
        Err(IgnoreReason::PortOutOfRange)
    } else if vlan > MAX_FDB_VLAN {
        Err(IgnoreReason::VlanOutOfRange)
    } else if !mac.is_unicast() {
        Err(IgnoreReason::NotUnicast)
    } else {
        Ok(())
    }
}

/// One port's learned entries, oldest first, and its entry counts.
#[derive(Clone, Copy, Debug)]
struct PortEntries {
    lru: Ends,
    dynamic: usize,
    statics: usize,
    /// The port's own bound on learned entries (`usize::MAX`: none), see `guard.rs`.
    limit: usize,
}

/// A bounded learning forwarding database. See the [module docs](self).
pub struct Fdb {
    config: FdbConfig,
    ageing_ns: u64,
    refresh_ns: u64,
    hasher: RandomState,
    /// Slot indices, hashed by their slot's key.
    index: HashTable<u32>,
    slab: Slab,
    /// Indexed by `PortId::index()`, `MAX_PORTS` long.
    ports: Vec<PortEntries>,
    /// Every dynamic entry, oldest first.
    by_age: Ends,
    static_entries: usize,
    /// One past the highest port index that ever held a learned entry: the victim scan's end.
    port_scan_end: usize,
    /// The latest time `learn` or `expire` has seen, in nanoseconds.
    clock: u64,
    generation: u64,
    stats: FdbStats,
    /// Learned entries written, for the switch's other lanes (off unless it has some).
    journal: journal::Journal,
    /// Flap episodes not yet taken by the control plane.
    flaps: guard::FlapLog,
    /// Entries the sweep has looked at, to pin its cost in tests.
    #[cfg(test)]
    sweep_visits: usize,
}

impl core::fmt::Debug for Fdb {
    /// A summary: the table itself can hold thousands of entries (see [`Fdb::entries`]).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fdb")
            .field("config", &self.config)
            .field("len", &self.len())
            .field("static_entries", &self.static_entries)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Fdb {
    /// Builds an empty table, reserving all the memory it will ever use.
    pub fn new(config: FdbConfig) -> Result<Fdb, FdbError> {
        config.validate()?;
        let (ageing_ns, refresh_ns) = config.timers_ns()?;
        Ok(Fdb {
            config,
            ageing_ns,
            refresh_ns,
            hasher: RandomState::default(),
            // Twice the entries: hashbrown then always rehashes its deletion markers away in
            // place (it does while it is at most half full) instead of growing, so churn
            // never allocates.
            index: HashTable::with_capacity(config.max_entries.saturating_mul(2)),
            slab: Slab::with_capacity(config.max_entries),
            ports: vec![
                PortEntries {
                    lru: Ends::EMPTY,
                    dynamic: 0,
                    statics: 0,
                    limit: usize::MAX,
                };
                MAX_PORTS
            ],
            by_age: Ends::EMPTY,
            static_entries: 0,
            port_scan_end: 0,
            clock: 0,
            generation: 0,
            stats: FdbStats::default(),
            journal: journal::Journal::default(),
            flaps: guard::FlapLog::default(),
            #[cfg(test)]
            sweep_visits: 0,
        })
    }

    /// The configuration the table was built with.
    pub fn config(&self) -> &FdbConfig {
        &self.config
    }

    /// Where frames to `mac` in `vlan` go, if known. Expired entries count as absent.
    pub fn lookup(&self, vlan: VlanId, mac: MacAddr, now: Timestamp) -> Option<PortId> {
        let key = pack_key(vlan, mac);
        let slot = self.slab.get(self.find(self.hasher.hash_one(key), key)?);
        match slot.kind {
            Kind::Static => Some(slot.port),
            Kind::Dynamic if !self.is_expired(slot.last_seen, now.0) => Some(slot.port),
            _ => None,
        }
    }

    /// Learns that `src` in `vlan` is reachable through `port`, seen at `now`.
    pub fn learn(
        &mut self,
        vlan: VlanId,
        src: MacAddr,
        port: PortId,
        now: Timestamp,
    ) -> LearnOutcome {
        if let Err(reason) = check_key(vlan, src, port) {
            return self.ignore(reason);
        }
        let now = self.advance_clock(now);
        let key = pack_key(vlan, src);
        let hash = self.hasher.hash_one(key);
        match self.find(hash, key) {
            Some(i) => self.learn_known(i, port, now),
            None => self.learn_new(key, hash, port, now),
        }
    }

    /// Pins `mac` in `vlan` to `port`, replacing any entry for it. Static entries never age,
    /// are never evicted and never move by learning. A full table evicts a learned entry
    /// as learning would.
    pub fn add_static(&mut self, vlan: VlanId, mac: MacAddr, port: PortId) -> Result<(), FdbError> {
        check_key(vlan, mac, port).map_err(|reason| match reason {
            IgnoreReason::PortOutOfRange => FdbError::PortOutOfRange(port),
            IgnoreReason::VlanOutOfRange => FdbError::VlanOutOfRange(vlan),
            _ => FdbError::NotUnicast(mac),
        })?;
        let key = pack_key(vlan, mac);
        let hash = self.hasher.hash_one(key);
        if let Some(i) = self.find(hash, key) {
            let old = *self.slab.get(i);
            match old.kind {
                Kind::Static if old.port == port => return Ok(()),
                Kind::Static => self.port_mut(old.port).statics -= 1,
                _ => {
                    self.unlink_dynamic(i);
                    self.static_entries += 1;
                }
            }
            let slot = self.slab.get_mut(i);
            slot.kind = Kind::Static;
            slot.port = port;
        } else {
            if self.len() >= self.config.max_entries {
                if let Room::Full = self.make_room_in_table(None, self.clock) {
                    return Err(FdbError::TableFull);
                }
            }
            self.insert_slot(key, hash, port, Kind::Static)
                .ok_or(FdbError::TableFull)?;
            self.static_entries += 1;
        }
        self.port_mut(port).statics += 1;
        self.bump_generation();
        Ok(())
    }

    /// Removes the entry for `mac` in `vlan`, static or learned (even if expired). Returns
    /// whether there was one.
    pub fn remove(&mut self, vlan: VlanId, mac: MacAddr) -> bool {
        let key = pack_key(vlan, mac);
        let Some(i) = self.find(self.hasher.hash_one(key), key) else {
            return false;
        };
        self.remove_slot(i);
        self.stats.removed += 1;
        self.bump_generation();
        true
    }

    /// Removes every entry `filter` selects and returns how many. Walks the whole table.
    pub fn flush(&mut self, filter: FlushFilter) -> usize {
        let mut removed = 0;
        let end = u32::try_from(self.slab.high_water()).unwrap_or(NIL);
        for i in 0..end {
            let slot = self.slab.get(i);
            let selected = slot.kind != Kind::Free
                && match filter {
                    FlushFilter::All => true,
                    FlushFilter::Dynamic => slot.kind == Kind::Dynamic,
                    FlushFilter::Port(port) => slot.port == port,
                    FlushFilter::DynamicOnPort(port) => {
                        slot.port == port && slot.kind == Kind::Dynamic
                    }
                    FlushFilter::Vlan(vlan) => unpack_key(slot.key).0 == vlan,
                };
            if selected {
                self.remove_slot(i);
                self.stats.removed += 1;
                removed += 1;
            }
        }
        if removed > 0 {
            self.bump_generation();
        }
        removed
    }

    /// The periodic sweep: removes the learned entries that have aged out by `now` and
    /// returns how many. Costs O(expired + 1): entries sit on a list sorted by age.
    pub fn expire(&mut self, now: Timestamp) -> usize {
        let now = self.advance_clock(now);
        let mut expired = 0;
        loop {
            let oldest = self.by_age.head;
            if oldest == NIL {
                break;
            }
            #[cfg(test)]
            {
                self.sweep_visits += 1;
            }
            if !self.is_expired(self.slab.get(oldest).last_seen, now) {
                break;
            }
            self.remove_slot(oldest);
            self.stats.expired += 1;
            expired += 1;
        }
        if expired > 0 {
            self.bump_generation();
        }
        expired
    }

    /// Entries stored, static and learned, including expired ones not yet swept.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Entries (static and learned) on `port`; zero for an out-of-range port.
    pub fn len_for_port(&self, port: PortId) -> usize {
        self.ports
            .get(port.index())
            .map_or(0, |p| p.dynamic + p.statics)
    }

    /// Learned entries on `port` (what `max_per_port` bounds).
    pub fn dynamic_len_for_port(&self, port: PortId) -> usize {
        self.ports.get(port.index()).map_or(0, |p| p.dynamic)
    }

    /// Every stored entry, in no particular order (expired ones until the sweep).
    pub fn entries(&self) -> impl Iterator<Item = FdbEntryView> + '_ {
        self.slab.occupied().map(|slot| self.view(slot))
    }

    /// Changes whenever an operation can change a `lookup` result (see the module docs).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> FdbStats {
        FdbStats {
            entries: self.len(),
            static_entries: self.static_entries,
            ..self.stats
        }
    }

    fn find(&self, hash: u64, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.index.find(hash, |&i| slab.get(i).key == key).copied()
    }

    /// Stores a new, unlinked entry and indexes it.
    fn insert_slot(&mut self, key: u64, hash: u64, port: PortId, kind: Kind) -> Option<u32> {
        let i = self.slab.alloc(Slot {
            key,
            last_seen: 0,
            port,
            kind,
            by_port: slab::Link::UNLINKED,
            by_age: slab::Link::UNLINKED,
            moves: 0,
            moves_since: 0,
            held_until: 0,
        })?;
        let (hasher, slab) = (&self.hasher, &self.slab);
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(slab.get(j).key));
        Some(i)
    }

    /// Unindexes and frees slot `i`, whatever it holds.
    fn remove_slot(&mut self, i: u32) {
        let slot = *self.slab.get(i);
        match slot.kind {
            Kind::Free => return,
            Kind::Dynamic => self.unlink_dynamic(i),
            Kind::Static => {
                self.port_mut(slot.port).statics -= 1;
                self.static_entries -= 1;
            }
        }
        if let Ok(entry) = self
            .index
            .find_entry(self.hasher.hash_one(slot.key), |&j| j == i)
        {
            entry.remove();
        }
        self.slab.release(i);
    }

    /// Takes learned entry `i` off its port's list and the age list.
    fn unlink_dynamic(&mut self, i: u32) {
        let port = &mut self.ports[self.slab.get(i).port.index()];
        self.slab.unlink(&mut port.lru, i, Chain::ByPort);
        port.dynamic -= 1;
        self.slab.unlink(&mut self.by_age, i, Chain::ByAge);
    }

    /// Makes `i` a learned entry on `port`, newest on both lists.
    fn link_dynamic(&mut self, i: u32, port: PortId, now: u64) {
        let slot = self.slab.get_mut(i);
        slot.kind = Kind::Dynamic;
        slot.port = port;
        slot.last_seen = now;
        let key = slot.key;
        self.journal_write(key, port, now);
        let entries = &mut self.ports[port.index()];
        self.slab.push_back(&mut entries.lru, i, Chain::ByPort);
        entries.dynamic += 1;
        self.slab.push_back(&mut self.by_age, i, Chain::ByAge);
        self.port_scan_end = self.port_scan_end.max(port.index() + 1);
    }

    fn port_mut(&mut self, port: PortId) -> &mut PortEntries {
        &mut self.ports[port.index()]
    }

    fn is_expired(&self, last_seen: u64, now: u64) -> bool {
        now.saturating_sub(last_seen) >= self.ageing_ns
    }

    fn advance_clock(&mut self, now: Timestamp) -> u64 {
        self.clock = self.clock.max(now.0);
        self.clock
    }

    fn bump_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    fn view(&self, slot: &Slot) -> FdbEntryView {
        let (vlan, mac) = unpack_key(slot.key);
        let is_static = slot.kind == Kind::Static;
        let last_seen = (!is_static).then_some(Timestamp(slot.last_seen));
        FdbEntryView {
            vlan,
            mac,
            port: slot.port,
            is_static,
            last_seen,
            expires_at: last_seen.map(|t| Timestamp(t.0.saturating_add(self.ageing_ns))),
        }
    }
}
