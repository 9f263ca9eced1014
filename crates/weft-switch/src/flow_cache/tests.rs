use std::collections::HashMap;

use proptest::prelude::*;
use proptest::sample::select;

use super::*;
use crate::types::PortId;

/// A distinct key per `n`.
fn key(n: u32) -> FlowKey {
    let [a, b, c, d] = n.to_be_bytes();
    FlowKey {
        in_port: PortId(u16::from(a)),
        l4_src: u16::from_be_bytes([b, c]),
        l4_dst: u16::from(d),
        ..FlowKey::default()
    }
}

#[test]
fn get_after_insert_returns_the_value() {
    let mut cache = FlowCache::new(64);
    cache.insert(key(1), 7, 'a');
    assert_eq!(cache.get(&key(1), 7), Some('a'));
    assert_eq!(cache.len(), 1);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.insertions), (1, 0, 1));
}

#[test]
fn unknown_key_misses() {
    let mut cache = FlowCache::<u8>::new(64);
    assert_eq!(cache.get(&key(1), 0), None);
    cache.insert(key(1), 0, 1);
    assert_eq!(cache.get(&key(2), 0), None);
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.stale_misses), (2, 0));
}

#[test]
fn entry_from_another_generation_is_a_stale_miss() {
    let mut cache = FlowCache::new(64);
    cache.insert(key(1), 1, 10u32);
    assert_eq!(cache.get(&key(1), 2), None);
    assert_eq!(cache.get(&key(1), 0), None);
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.stale_misses, stats.hits), (2, 2, 0));
    // Reinserting under the new generation replaces the entry in place.
    cache.insert(key(1), 2, 20);
    assert_eq!(cache.get(&key(1), 2), Some(20));
    assert_eq!(cache.get(&key(1), 1), None);
    assert_eq!(cache.len(), 1);
}

#[test]
fn reinserting_a_key_overwrites_its_value() {
    let mut cache = FlowCache::new(64);
    cache.insert(key(5), 3, 1u8);
    cache.insert(key(5), 3, 2u8);
    assert_eq!(cache.get(&key(5), 3), Some(2));
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.stats().insertions, 2);
    assert_eq!(cache.stats().evictions, 0);
}

#[test]
fn a_repeated_hit_follows_inserts_generations_and_clears() {
    let mut cache = FlowCache::new(64);
    cache.insert(key(1), 1, 'a');
    assert_eq!(cache.get(&key(1), 1), Some('a'));
    assert_eq!(cache.get(&key(1), 1), Some('a'));
    cache.insert(key(1), 1, 'b');
    assert_eq!(cache.get(&key(1), 1), Some('b'));
    assert_eq!(cache.get(&key(1), 2), None);
    assert_eq!(cache.get(&key(1), 1), Some('b'));
    cache.clear();
    assert_eq!(cache.get(&key(1), 1), None);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (4, 2));
}

#[test]
fn capacity_bound_holds_under_100_000_random_inserts() {
    let mut cache = FlowCache::new(1000);
    assert_eq!(cache.capacity(), 1024);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..100_000u32 {
        // xorshift: a deterministic spread of keys, many repeated.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = u32::try_from(rng % 50_000).unwrap();
        cache.insert(key(n), u64::from(i / 10_000), n);
        assert!(cache.len() <= cache.capacity());
        assert_eq!(cache.get(&key(n), u64::from(i / 10_000)), Some(n));
    }
    let stats = cache.stats();
    assert_eq!(stats.insertions, 100_000);
    assert_eq!(cache.len(), cache.capacity());
    assert!(stats.evictions > 0);
}

#[test]
fn capacity_rounds_up_to_a_power_of_two_within_limits() {
    assert_eq!(FlowCache::<u8>::new(0).capacity(), 8);
    assert_eq!(FlowCache::<u8>::new(4097).capacity(), 8192);
    assert_eq!(
        FlowCache::<u8>::new(usize::MAX).capacity(),
        MAX_CACHE_CAPACITY
    );
    assert_eq!(
        FlowCache::<u8>::default().capacity(),
        DEFAULT_CACHE_CAPACITY
    );
}

#[test]
fn clear_empties_the_cache_and_keeps_counters() {
    let mut cache = FlowCache::new(64);
    for n in 0..20 {
        cache.insert(key(n), 0, n);
    }
    cache.clear();
    assert!(cache.is_empty());
    assert_eq!(cache.get(&key(3), 0), None);
    assert_eq!(cache.stats().insertions, 20);
    cache.insert(key(3), 0, 3);
    assert_eq!(cache.get(&key(3), 0), Some(3));
}

// With 8 slots, every key's window is the whole cache: eviction order is observable.

#[test]
fn full_cache_reclaims_stale_entries_before_evicting_current_ones() {
    let mut cache = FlowCache::new(8);
    for n in 0..8 {
        cache.insert(key(n), 1, n);
    }
    cache.insert(key(100), 2, 100);
    assert_eq!(cache.stats().evictions, 0);
    assert_eq!(cache.get(&key(100), 2), Some(100));
    assert_eq!(cache.len(), 8);
}

#[test]
fn eviction_spares_entries_hit_since_the_hand_passed() {
    let mut cache = FlowCache::new(8);
    for n in 0..8 {
        cache.insert(key(n), 1, n);
    }
    for n in (0..8).filter(|&n| n != 3) {
        assert_eq!(cache.get(&key(n), 1), Some(n));
    }
    cache.insert(key(100), 1, 100);
    assert_eq!(cache.stats().evictions, 1);
    assert_eq!(cache.get(&key(3), 1), None);
    for n in (0..8).filter(|&n| n != 3) {
        assert_eq!(cache.get(&key(n), 1), Some(n), "key {n}");
    }
    assert_eq!(cache.get(&key(100), 1), Some(100));
}

#[test]
fn a_scan_of_new_flows_displaces_itself_before_hot_flows() {
    let mut cache = FlowCache::new(8);
    for n in 0..4 {
        cache.insert(key(n), 1, n);
    }
    for one_off in 1000..1200 {
        for n in 0..4 {
            assert_eq!(cache.get(&key(n), 1), Some(n), "after {one_off}");
        }
        // A one-packet flow, never seen again.
        cache.insert(key(one_off), 1, 0);
    }
    assert!(cache.stats().evictions > 0);
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        key: u32,
        generation: u64,
        value: u32,
    },
    Get {
        key: u32,
        generation: u64,
    },
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u32..48, 0u64..3, any::<u32>())
            .prop_map(|(key, generation, value)| Op::Insert { key, generation, value }),
        8 => (0u32..48, 0u64..3).prop_map(|(key, generation)| Op::Get { key, generation }),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #[test]
    fn cache_returns_nothing_or_the_last_value_inserted_under_the_generation(
        capacity in select(vec![8usize, 16, 64]),
        ops in prop::collection::vec(op(), 0..300),
    ) {
        let mut cache = FlowCache::new(capacity);
        // The last (generation, value) inserted per key since the last clear.
        let mut last: HashMap<u32, (u64, u32)> = HashMap::new();
        let mut gets = 0;
        for op in ops {
            match op {
                Op::Insert { key: k, generation, value } => {
                    cache.insert(key(k), generation, value);
                    last.insert(k, (generation, value));
                    // An insert always stores: the key is there right away.
                    prop_assert_eq!(cache.get(&key(k), generation), Some(value));
                    gets += 1;
                }
                Op::Get { key: k, generation } => {
                    gets += 1;
                    if let Some(v) = cache.get(&key(k), generation) {
                        prop_assert_eq!(last.get(&k), Some(&(generation, v)));
                    }
                }
                Op::Clear => {
                    cache.clear();
                    last.clear();
                }
            }
            prop_assert!(cache.len() <= cache.capacity());
        }
        let stats = cache.stats();
        prop_assert_eq!(stats.hits + stats.misses, gets);
        prop_assert!(stats.stale_misses <= stats.misses);
    }
}
