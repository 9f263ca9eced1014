//! The exact-match flow cache in front of the flow table (VNET/P's hash cache in front of
//! its routing rules; OVS's EMC): a fixed, open-addressed array keyed by the whole
//! [`FlowKey`].

use core::fmt;
use core::hash::BuildHasher;

use foldhash::fast::RandomState;

use crate::flow_key::FlowKey;

/// The capacity [`FlowCache::default`] uses.
pub const DEFAULT_CACHE_CAPACITY: usize = 4096;

/// The largest capacity a cache takes; [`FlowCache::new`] clamps to it.
pub const MAX_CACHE_CAPACITY: usize = 1 << 20;

/// How many consecutive slots a key may live in: its home slot and the next ones.
const PROBE_WINDOW: usize = 8;

/// A cache's counters since it was created (`clear` keeps them).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FlowCacheStats {
    /// Lookups that returned a value.
    pub hits: u64,
    /// Lookups that returned nothing, including `stale_misses`.
    pub misses: u64,
    /// Misses where the key was cached under another generation.
    pub stale_misses: u64,
    /// Calls to `insert`.
    pub insertions: u64,
    /// Inserts that displaced a current-generation entry of another key.
    pub evictions: u64,
}

#[derive(Clone, Copy)]
struct Entry<V> {
    hash: u64,
    generation: u64,
    key: FlowKey,
    value: V,
    /// Set on a hit, cleared as the eviction hand passes: CLOCK's second chance.
    referenced: bool,
}

/// A fixed-size exact-match cache from [`FlowKey`] to a `Copy` decision `V`.
///
/// **Invalidation is lazy**: every entry remembers the generation it was inserted under,
/// and [`get`](Self::get) under any other generation is a miss. The caller combines the
/// generations of everything a decision depends on (FDB, flow table, port set) into one
/// number, e.g. their sum, which must never repeat a value it had before: a repeated
/// generation would revive old decisions.
///
/// **Layout**: `capacity` slots (a power of two), allocated once in [`new`](Self::new);
/// nothing allocates afterwards. A key lives in a window of 8 consecutive slots from its
/// home slot. Keys come from hostile guests, so the hash is seeded randomly per cache
/// (`foldhash`), which keeps a guest from aiming many flows at one window.
///
/// **Replacement** when a key's window is full: an entry of another generation if there is
/// one (dead anyway), else CLOCK within the window: entries hit since the hand last passed
/// get a second chance. New entries start unreferenced, so a burst of one-packet flows
/// (a scan) displaces itself before it displaces flows that keep hitting.
///
/// **Ownership**: one per worker thread, never shared; `get` takes `&mut self` because a
/// hit updates the entry's reference bit and the counters.
pub struct FlowCache<V: Copy> {
    slots: Box<[Option<Entry<V>>]>,
    /// `slots.len() - 1`; the length is a power of two.
    index_mask: usize,
    len: usize,
    /// CLOCK hand: the window offset the next eviction sweep starts at.
    hand: usize,
    hasher: RandomState,
    stats: FlowCacheStats,
}

/// The low bits of a hash as an index (the caller masks them to the table size).
#[allow(clippy::cast_possible_truncation)] // dropping high bits is the point
const fn low_bits(hash: u64) -> usize {
    hash as usize
}

impl<V: Copy> FlowCache<V> {
    /// An empty cache of at least `capacity` slots: rounded up to a power of two, at least
    /// 8 and at most [`MAX_CACHE_CAPACITY`].
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity
            .clamp(PROBE_WINDOW, MAX_CACHE_CAPACITY)
            .next_power_of_two();
        FlowCache {
            slots: vec![None; capacity].into_boxed_slice(),
            index_mask: capacity - 1,
            len: 0,
            hand: 0,
            hasher: RandomState::default(),
            stats: FlowCacheStats::default(),
        }
    }

    /// The value cached for `key` under `generation`, if any.
    pub fn get(&mut self, key: &FlowKey, generation: u64) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        let home = low_bits(hash);
        for step in 0..PROBE_WINDOW {
            // Masked with len - 1 (len a power of two): always in bounds.
            match &mut self.slots[home.wrapping_add(step) & self.index_mask] {
                // Slots only empty all at once (`clear`) and inserts take the first empty
                // slot, so a key never sits after an empty slot of its window.
                None => break,
                Some(e) if e.hash == hash && e.key == *key => {
                    if e.generation == generation {
                        e.referenced = true;
                        self.stats.hits += 1;
                        return Some(e.value);
                    }
                    self.stats.stale_misses += 1;
                    break;
                }
                Some(_) => {}
            }
        }
        self.stats.misses += 1;
        None
    }

    /// Counts a hit its caller answered itself, from a value this cache returned for the same
    /// key and generation (the flow loop's next packets of one flow).
    pub(crate) fn note_repeated_hit(&mut self) {
        self.stats.hits += 1;
    }

    /// Caches `value` for `key` under `generation`, replacing what the key had. Always
    /// stores: when the key's window is full, another entry is replaced (see the type).
    pub fn insert(&mut self, key: FlowKey, generation: u64, value: V) {
        self.stats.insertions += 1;
        let hash = self.hasher.hash_one(key);
        let home = low_bits(hash);
        let mut empty = None;
        let mut stale = None;
        for step in 0..PROBE_WINDOW {
            let idx = home.wrapping_add(step) & self.index_mask;
            match &mut self.slots[idx] {
                None => {
                    empty = Some(idx);
                    break;
                }
                Some(e) if e.hash == hash && e.key == key => {
                    e.generation = generation;
                    e.value = value;
                    e.referenced = false;
                    return;
                }
                Some(e) if e.generation != generation && stale.is_none() => stale = Some(idx),
                Some(_) => {}
            }
        }
        let idx = if let Some(idx) = empty {
            self.len += 1;
            idx
        } else if let Some(idx) = stale {
            idx
        } else {
            self.stats.evictions += 1;
            self.clock_victim(home)
        };
        self.slots[idx] = Some(Entry {
            hash,
            generation,
            key,
            value,
            referenced: false,
        });
    }

    /// Picks the entry to evict from the full window at `home`.
    fn clock_victim(&mut self, home: usize) -> usize {
        // After one lap every reference bit is clear, so two laps always find a victim.
        for step in 0..2 * PROBE_WINDOW {
            let offset = (self.hand + step) % PROBE_WINDOW;
            let idx = home.wrapping_add(offset) & self.index_mask;
            if let Some(e) = &mut self.slots[idx] {
                if !e.referenced {
                    self.hand = (offset + 1) % PROBE_WINDOW;
                    return idx;
                }
                e.referenced = false;
            }
        }
        home & self.index_mask
    }

    /// Empties the cache (counters are kept).
    pub fn clear(&mut self) {
        self.slots.fill(None);
        self.len = 0;
    }

    /// The counters.
    pub fn stats(&self) -> FlowCacheStats {
        self.stats
    }

    /// Entries held, current or stale.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entries are held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of slots: the most entries the cache holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

impl<V: Copy> Default for FlowCache<V> {
    fn default() -> Self {
        FlowCache::new(DEFAULT_CACHE_CAPACITY)
    }
}

impl<V: Copy> fmt::Debug for FlowCache<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowCache")
            .field("capacity", &self.capacity())
            .field("len", &self.len)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
