//! Unit tests of the FDB, plus the structural invariant check the property tests share.

use core::time::Duration;
use std::collections::HashSet;

use super::*;

pub(super) fn mac(n: u64) -> MacAddr {
    // A locally administered unicast address: 02:00:xx:xx:xx:xx.
    MacAddr::from_u64(0x0200_0000_0000 | (n & 0xffff_ffff))
}

fn secs(s: u64) -> Timestamp {
    Timestamp::from_secs(s)
}

fn fdb(max_entries: usize, max_per_port: usize) -> Fdb {
    Fdb::new(FdbConfig {
        max_entries,
        max_per_port,
        ..FdbConfig::default()
    })
    .unwrap()
}

/// Checks every internal structure against the others; panics with a message on a mismatch.
pub(super) fn check_invariants(f: &Fdb) {
    let occupied: Vec<u32> = (0..u32::try_from(f.slab.high_water()).unwrap())
        .filter(|&i| f.slab.get(i).kind != Kind::Free)
        .collect();
    assert_eq!(f.index.len(), occupied.len(), "index and slab disagree");
    assert!(f.len() <= f.config.max_entries, "table over its bound");
    let mut dynamic_by_port = vec![0; MAX_PORTS];
    let mut static_by_port = vec![0; MAX_PORTS];
    for &i in &occupied {
        let slot = f.slab.get(i);
        assert_eq!(
            f.find(f.hasher.hash_one(slot.key), slot.key),
            Some(i),
            "slot not indexed"
        );
        match slot.kind {
            Kind::Dynamic => dynamic_by_port[slot.port.index()] += 1,
            _ => static_by_port[slot.port.index()] += 1,
        }
    }
    let sorted = |list: &[u32]| {
        list.windows(2)
            .all(|w| f.slab.get(w[0]).last_seen <= f.slab.get(w[1]).last_seen)
    };
    let distinct = |list: &[u32]| list.iter().collect::<HashSet<_>>().len() == list.len();
    let by_age = f.slab.walk(f.by_age, Chain::ByAge);
    assert_eq!(
        by_age.len(),
        dynamic_by_port.iter().sum::<usize>(),
        "age list length"
    );
    assert!(distinct(&by_age), "age list has a cycle");
    assert!(by_age.iter().all(|&i| f.slab.get(i).kind == Kind::Dynamic));
    assert!(sorted(&by_age), "age list out of order");
    for (index, entries) in f.ports.iter().enumerate() {
        let port = PortId(u16::try_from(index).unwrap());
        assert_eq!(
            entries.dynamic, dynamic_by_port[index],
            "{port:?} dynamic count"
        );
        assert_eq!(
            entries.statics, static_by_port[index],
            "{port:?} static count"
        );
        assert!(
            entries.dynamic <= f.config.max_per_port,
            "{port:?} over its bound"
        );
        if entries.dynamic == 0 {
            assert_eq!(entries.lru, Ends::EMPTY, "{port:?} list not empty");
            continue;
        }
        assert!(index < f.port_scan_end, "victim scan misses {port:?}");
        let lru = f.slab.walk(entries.lru, Chain::ByPort);
        assert_eq!(lru.len(), entries.dynamic, "{port:?} list length");
        assert!(distinct(&lru), "{port:?} list has a cycle");
        let mine = |&i: &u32| f.slab.get(i).kind == Kind::Dynamic && f.slab.get(i).port == port;
        assert!(lru.iter().all(mine), "{port:?} list holds a foreign entry");
        assert!(sorted(&lru), "{port:?} LRU out of order");
    }
    assert_eq!(f.static_entries, static_by_port.iter().sum::<usize>());
}

#[test]
fn learned_source_is_found_by_lookup() {
    let mut f = fdb(16, 16);
    assert_eq!(
        f.learn(1, mac(1), PortId(3), secs(1)),
        LearnOutcome::Learned
    );
    assert_eq!(f.lookup(1, mac(1), secs(2)), Some(PortId(3)));
    assert_eq!(f.lookup(1, mac(2), secs(2)), None);
    assert_eq!(f.len(), 1);
    assert_eq!(f.len_for_port(PortId(3)), 1);
    check_invariants(&f);
}

#[test]
fn same_mac_in_two_vlans_is_two_entries() {
    let mut f = fdb(16, 16);
    f.learn(10, mac(1), PortId(1), secs(1));
    f.learn(20, mac(1), PortId(2), secs(1));
    assert_eq!(f.lookup(10, mac(1), secs(1)), Some(PortId(1)));
    assert_eq!(f.lookup(20, mac(1), secs(1)), Some(PortId(2)));
    assert_eq!(f.lookup(30, mac(1), secs(1)), None);
    assert_eq!(f.len(), 2);
    assert_eq!(f.stats().moves, 0);
}

#[test]
fn entry_is_absent_at_lookup_once_the_ageing_time_has_passed() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(10));
    assert_eq!(f.lookup(0, mac(1), secs(309)), Some(PortId(1)));
    assert_eq!(f.lookup(0, mac(1), secs(310)), None);
    assert_eq!(f.len(), 1, "not swept yet");
}

#[test]
fn expire_sweeps_aged_entries_and_keeps_fresh_ones() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    f.learn(0, mac(2), PortId(2), secs(100));
    f.add_static(0, mac(3), PortId(3)).unwrap();
    assert_eq!(f.expire(secs(299)), 0);
    assert_eq!(f.expire(secs(300)), 1);
    assert_eq!(f.lookup(0, mac(2), secs(300)), Some(PortId(2)));
    assert_eq!(f.len_for_port(PortId(1)), 0);
    assert_eq!(f.expire(secs(10_000)), 1);
    assert_eq!(f.lookup(0, mac(3), secs(10_000)), Some(PortId(3)));
    assert_eq!(f.stats().expired, 2);
    check_invariants(&f);
}

#[test]
fn expire_visits_only_the_expired_entries() {
    let mut f = fdb(8192, 8192);
    for n in 0..10 {
        f.learn(0, mac(n), PortId(2), secs(0));
    }
    for n in 10..8010 {
        f.learn(0, mac(n), PortId(1), secs(100));
    }
    assert_eq!(f.expire(secs(299)), 0);
    assert_eq!(
        f.sweep_visits, 1,
        "a sweep with nothing to do looks at one entry"
    );
    f.sweep_visits = 0;
    assert_eq!(f.expire(secs(300)), 10);
    assert_eq!(
        f.sweep_visits, 11,
        "ten expired entries and the first live one"
    );
    check_invariants(&f);
}

#[test]
fn refresh_keeps_an_active_entry_alive() {
    let mut f = fdb(16, 16);
    assert_eq!(
        f.learn(0, mac(1), PortId(1), secs(0)),
        LearnOutcome::Learned
    );
    for t in (100..1000).step_by(100) {
        assert_eq!(
            f.learn(0, mac(1), PortId(1), secs(t)),
            LearnOutcome::Refreshed
        );
    }
    assert_eq!(f.expire(secs(1100)), 0);
    assert_eq!(f.lookup(0, mac(1), secs(1100)), Some(PortId(1)));
    assert_eq!(f.lookup(0, mac(1), secs(1200)), None);
    assert_eq!(f.stats().learned, 1);
    assert_eq!(f.stats().refreshed, 9);
}

#[test]
fn refresh_within_the_granularity_keeps_the_stored_timestamp() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), Timestamp::from_millis(1000));
    f.learn(0, mac(1), PortId(1), Timestamp::from_millis(1999));
    let seen = |f: &Fdb| f.entries().next().unwrap().last_seen;
    assert_eq!(seen(&f), Some(Timestamp::from_millis(1000)));
    f.learn(0, mac(1), PortId(1), Timestamp::from_millis(2000));
    assert_eq!(seen(&f), Some(Timestamp::from_millis(2000)));
}

#[test]
fn refresh_does_not_change_the_generation() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    let generation = f.generation();
    f.learn(0, mac(1), PortId(1), secs(0));
    f.learn(0, mac(1), PortId(1), secs(50));
    assert_eq!(f.generation(), generation);
    f.learn(0, mac(2), PortId(1), secs(50));
    assert_ne!(f.generation(), generation);
}

#[test]
fn relearning_an_expired_entry_revives_it_and_changes_the_generation() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    let generation = f.generation();
    assert_eq!(
        f.learn(0, mac(1), PortId(2), secs(300)),
        LearnOutcome::Learned
    );
    assert_ne!(f.generation(), generation);
    assert_eq!(f.lookup(0, mac(1), secs(300)), Some(PortId(2)));
    assert_eq!(f.stats().moves, 0, "a dead entry does not move");
    check_invariants(&f);
}

#[test]
fn move_to_another_port_is_detected_and_counted() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    let generation = f.generation();
    let outcome = f.learn(0, mac(1), PortId(2), secs(1));
    assert_eq!(outcome, LearnOutcome::Moved { from: PortId(1) });
    assert!(outcome.changed_lookups());
    assert_ne!(f.generation(), generation);
    assert_eq!(f.lookup(0, mac(1), secs(1)), Some(PortId(2)));
    assert_eq!(
        (f.len_for_port(PortId(1)), f.len_for_port(PortId(2))),
        (0, 1)
    );
    assert_eq!(f.stats().moves, 1);
    check_invariants(&f);
}

#[test]
fn move_onto_a_full_port_evicts_that_ports_oldest_entry() {
    let mut f = fdb(16, 2);
    f.learn(0, mac(1), PortId(2), secs(0));
    f.learn(0, mac(2), PortId(2), secs(1));
    f.learn(0, mac(3), PortId(1), secs(2));
    assert_eq!(
        f.learn(0, mac(3), PortId(2), secs(3)),
        LearnOutcome::Moved { from: PortId(1) }
    );
    assert_eq!(f.lookup(0, mac(1), secs(3)), None);
    assert_eq!(f.dynamic_len_for_port(PortId(2)), 2);
    assert_eq!(f.stats().evictions.port_limit, 1);
    check_invariants(&f);
}

#[test]
fn static_entry_wins_against_learning_on_another_port() {
    let mut f = fdb(16, 16);
    f.add_static(0, mac(1), PortId(1)).unwrap();
    let generation = f.generation();
    let spoof = f.learn(0, mac(1), PortId(2), secs(1));
    assert_eq!(spoof, LearnOutcome::Ignored(IgnoreReason::StaticConflict));
    assert_eq!(
        f.learn(0, mac(1), PortId(1), secs(1)),
        LearnOutcome::Refreshed
    );
    assert_eq!(f.lookup(0, mac(1), secs(1)), Some(PortId(1)));
    assert_eq!(f.generation(), generation);
    assert_eq!(f.stats().ignored.static_conflict, 1);
    assert_eq!(f.stats().moves, 0);
}

#[test]
fn static_entry_never_ages() {
    let mut f = fdb(16, 16);
    f.add_static(0, mac(1), PortId(1)).unwrap();
    let much_later = Timestamp(u64::MAX);
    assert_eq!(f.expire(much_later), 0);
    assert_eq!(f.lookup(0, mac(1), much_later), Some(PortId(1)));
    let view = f.entries().next().unwrap();
    assert!(view.is_static && view.last_seen.is_none() && !view.is_expired(much_later));
}

#[test]
fn static_entry_is_never_evicted_by_a_flood() {
    let mut f = fdb(64, 64);
    f.add_static(0, mac(0), PortId(1)).unwrap();
    for n in 1..10_000 {
        f.learn(0, mac(n), PortId(1), secs(n));
    }
    assert_eq!(f.lookup(0, mac(0), secs(10_000)), Some(PortId(1)));
    assert_eq!(f.len(), 64);
    assert_eq!(f.dynamic_len_for_port(PortId(1)), 63);
    check_invariants(&f);
}

#[test]
fn add_static_replaces_a_dynamic_entry() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    let generation = f.generation();
    f.add_static(0, mac(1), PortId(2)).unwrap();
    assert_ne!(f.generation(), generation);
    assert_eq!(f.lookup(0, mac(1), secs(1000)), Some(PortId(2)));
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f.len_for_port(PortId(1)), f.len_for_port(PortId(2))),
        (0, 1)
    );
    assert_eq!(f.stats().static_entries, 1);
    check_invariants(&f);
}

#[test]
fn re_adding_the_same_static_entry_changes_nothing() {
    let mut f = fdb(16, 16);
    f.add_static(0, mac(1), PortId(2)).unwrap();
    let generation = f.generation();
    f.add_static(0, mac(1), PortId(2)).unwrap();
    assert_eq!(f.generation(), generation);
    f.add_static(0, mac(1), PortId(3)).unwrap();
    assert_ne!(f.generation(), generation);
    assert_eq!(
        (f.len_for_port(PortId(2)), f.len_for_port(PortId(3))),
        (0, 1)
    );
    check_invariants(&f);
}

#[test]
fn table_full_of_static_entries_refuses_to_learn() {
    let mut f = fdb(2, 2);
    f.add_static(0, mac(1), PortId(1)).unwrap();
    f.add_static(0, mac(2), PortId(1)).unwrap();
    let outcome = f.learn(0, mac(3), PortId(2), secs(0));
    assert_eq!(
        outcome,
        LearnOutcome::Ignored(IgnoreReason::TableFullOfStatic)
    );
    assert_eq!(f.add_static(0, mac(3), PortId(2)), Err(FdbError::TableFull));
    assert_eq!(f.stats().ignored.table_full_of_static, 1);
}

#[test]
fn add_static_to_a_full_table_evicts_a_learned_entry() {
    let mut f = fdb(2, 2);
    f.learn(0, mac(1), PortId(1), secs(0));
    f.learn(0, mac(2), PortId(1), secs(1));
    f.add_static(0, mac(3), PortId(2)).unwrap();
    assert_eq!(f.lookup(0, mac(1), secs(1)), None);
    assert_eq!(f.lookup(0, mac(2), secs(1)), Some(PortId(1)));
    assert_eq!(f.stats().evictions.table_full, 1);
}

#[test]
fn group_and_zero_source_addresses_are_never_learned() {
    let mut f = fdb(16, 16);
    let multicast = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
    for src in [multicast, MacAddr::BROADCAST, MacAddr::ZERO] {
        let outcome = f.learn(0, src, PortId(1), secs(0));
        assert_eq!(outcome, LearnOutcome::Ignored(IgnoreReason::NotUnicast));
        assert_eq!(
            f.add_static(0, src, PortId(1)),
            Err(FdbError::NotUnicast(src))
        );
    }
    assert!(f.is_empty());
    assert_eq!(f.stats().ignored.not_unicast, 3);
    assert_eq!(f.generation(), 0);
}

#[test]
fn out_of_range_ports_and_vlans_are_rejected() {
    let mut f = fdb(16, 16);
    let far = PortId(u16::try_from(MAX_PORTS).unwrap());
    let outcome = f.learn(0, mac(1), far, secs(0));
    assert_eq!(outcome, LearnOutcome::Ignored(IgnoreReason::PortOutOfRange));
    let outcome = f.learn(4095, mac(1), PortId(1), secs(0));
    assert_eq!(outcome, LearnOutcome::Ignored(IgnoreReason::VlanOutOfRange));
    assert_eq!(
        f.add_static(0, mac(1), far),
        Err(FdbError::PortOutOfRange(far))
    );
    assert_eq!(
        f.add_static(u16::MAX, mac(1), PortId(1)),
        Err(FdbError::VlanOutOfRange(u16::MAX))
    );
    assert_eq!(f.len_for_port(far), 0);
    assert_eq!(f.lookup(4095, mac(1), secs(0)), None);
    assert!(f.is_empty());
    let ignored = f.stats().ignored;
    assert_eq!(
        (ignored.port_out_of_range, ignored.vlan_out_of_range),
        (1, 1)
    );
}

#[test]
fn remove_deletes_static_and_learned_entries() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(0));
    f.add_static(0, mac(2), PortId(2)).unwrap();
    let generation = f.generation();
    assert!(f.remove(0, mac(1)));
    assert!(f.remove(0, mac(2)));
    assert!(!f.remove(0, mac(2)));
    assert_ne!(f.generation(), generation);
    assert!(f.is_empty());
    assert_eq!(f.stats().removed, 2);
    assert_eq!(f.stats().static_entries, 0);
    check_invariants(&f);
}

fn populated() -> Fdb {
    let mut f = fdb(64, 64);
    f.learn(1, mac(1), PortId(1), secs(0));
    f.learn(1, mac(2), PortId(2), secs(0));
    f.learn(2, mac(3), PortId(1), secs(0));
    f.add_static(1, mac(4), PortId(1)).unwrap();
    f.add_static(2, mac(5), PortId(2)).unwrap();
    f
}

#[test]
fn flush_removes_exactly_what_the_filter_selects() {
    let cases = [
        (FlushFilter::All, vec![]),
        (FlushFilter::Dynamic, vec![4, 5]),
        (FlushFilter::Port(PortId(1)), vec![2, 5]),
        (FlushFilter::DynamicOnPort(PortId(1)), vec![2, 4, 5]),
        (FlushFilter::Vlan(1), vec![3, 5]),
        (FlushFilter::Port(PortId(9)), vec![1, 2, 3, 4, 5]),
    ];
    for (filter, kept) in cases {
        let mut f = populated();
        let generation = f.generation();
        let removed = f.flush(filter);
        assert_eq!(removed, 5 - kept.len(), "{filter:?}");
        let mut left: Vec<u64> = f.entries().map(|e| e.mac.to_u64() & 0xff).collect();
        left.sort_unstable();
        assert_eq!(left, kept, "{filter:?}");
        assert_eq!(f.generation() != generation, removed > 0, "{filter:?}");
        check_invariants(&f);
    }
}

#[test]
fn per_port_bound_evicts_the_ports_least_recently_seen_entry() {
    let mut f = fdb(64, 3);
    for n in 1..=3 {
        f.learn(0, mac(n), PortId(1), secs(n));
    }
    f.learn(0, mac(1), PortId(1), secs(10)); // mac 1 is now the most recently seen
    let outcome = f.learn(0, mac(4), PortId(1), secs(11));
    let expected = LearnOutcome::Evicted {
        victim_port: PortId(1),
        cause: EvictionCause::PortLimit,
    };
    assert_eq!(outcome, expected);
    assert_eq!(f.lookup(0, mac(2), secs(11)), None);
    for n in [1, 3, 4] {
        assert_eq!(f.lookup(0, mac(n), secs(11)), Some(PortId(1)));
    }
    assert_eq!(f.len_for_port(PortId(1)), 3);
    assert_eq!(f.stats().evictions.port_limit, 1);
    check_invariants(&f);
}

#[test]
fn total_bound_evicts_from_the_port_holding_the_most_entries() {
    let mut f = fdb(6, 6);
    f.learn(0, mac(10), PortId(2), secs(0));
    f.learn(0, mac(11), PortId(2), secs(1));
    for n in 0..4 {
        f.learn(0, mac(n), PortId(1), secs(10 + n));
    }
    // Port 2 holds the oldest entries, but port 1 holds more.
    let outcome = f.learn(0, mac(20), PortId(3), secs(20));
    let expected = LearnOutcome::Evicted {
        victim_port: PortId(1),
        cause: EvictionCause::TableFull,
    };
    assert_eq!(outcome, expected);
    assert_eq!(f.lookup(0, mac(0), secs(20)), None);
    assert_eq!(f.len(), 6);
    assert_eq!(f.stats().evictions.table_full, 1);
    check_invariants(&f);
}

#[test]
fn expired_entries_are_reclaimed_before_live_ones_are_evicted() {
    let mut f = fdb(3, 3);
    f.learn(0, mac(1), PortId(1), secs(0));
    f.learn(0, mac(2), PortId(2), secs(200));
    f.learn(0, mac(3), PortId(2), secs(200));
    assert_eq!(
        f.learn(0, mac(4), PortId(2), secs(300)),
        LearnOutcome::Learned
    );
    assert_eq!(f.lookup(0, mac(2), secs(300)), Some(PortId(2)));
    let stats = f.stats();
    assert_eq!((stats.expired, stats.evictions.table_full), (1, 0));
    check_invariants(&f);
}

pub(super) fn flood_next(seed: &mut u64) -> MacAddr {
    // xorshift64: cheap, deterministic "random" source addresses.
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    let mut m = MacAddr::from_u64(*seed);
    m.0[0] = (m.0[0] & 0xfe) | 0x02; // unicast, locally administered
    m
}

fn flooding_port_cannot_push_out_a_quiet_port(config: FdbConfig) {
    let mut f = Fdb::new(config).unwrap();
    let (a, b) = (PortId(1), PortId(2));
    for n in 0..100 {
        f.learn(0, mac(n), a, secs(1));
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    for i in 0..100_000 {
        f.learn(0, flood_next(&mut seed), b, Timestamp(2_000_000_000 + i));
    }
    let now = secs(3);
    for n in 0..100 {
        assert_eq!(f.lookup(0, mac(n), now), Some(a), "A lost mac {n}");
    }
    assert_eq!(f.len_for_port(a), 100);
    assert!(f.len_for_port(b) <= config.max_per_port);
    assert!(f.len_for_port(b) <= config.max_entries - 100);
    check_invariants(&f);
}

#[test]
fn flooding_port_at_its_own_limit_cannot_push_out_a_quiet_port() {
    flooding_port_cannot_push_out_a_quiet_port(FdbConfig::default());
}

#[test]
fn flooding_port_in_a_full_table_cannot_push_out_a_quiet_port() {
    flooding_port_cannot_push_out_a_quiet_port(FdbConfig {
        max_entries: 1000,
        max_per_port: 1000,
        ..FdbConfig::default()
    });
}

#[test]
fn two_flooding_ports_split_a_full_table_evenly() {
    let mut f = fdb(1000, 1000);
    let mut seed = 7;
    // Port 1 grabs the whole table first; then both flood, alternating.
    for i in 0..1000 {
        f.learn(0, flood_next(&mut seed), PortId(1), Timestamp(i));
    }
    for i in 0..50_000u32 {
        let port = PortId(1 + u16::from(i % 2 == 1));
        f.learn(
            0,
            flood_next(&mut seed),
            port,
            Timestamp(1000 + u64::from(i)),
        );
        assert!(
            f.len_for_port(PortId(2)) <= 500,
            "port 2 took more than its share"
        );
    }
    assert_eq!(f.len_for_port(PortId(1)), 500);
    assert_eq!(f.len_for_port(PortId(2)), 500);
    check_invariants(&f);
}

#[test]
fn clock_never_moves_backwards() {
    let mut f = fdb(16, 16);
    f.learn(0, mac(1), PortId(1), secs(100));
    f.learn(0, mac(2), PortId(1), secs(5));
    let stamped = f.entries().find(|e| e.mac == mac(2)).unwrap().last_seen;
    assert_eq!(stamped, Some(secs(100)));
    assert_eq!(f.expire(secs(50)), 0);
    check_invariants(&f);
}

#[test]
fn index_never_grows_under_churn() {
    let mut f = fdb(64, 16);
    let capacity = f.index.capacity();
    let mut seed = 3;
    for i in 0..200_000u64 {
        let port = PortId(u16::try_from(i % 7).unwrap());
        f.learn(0, flood_next(&mut seed), port, Timestamp(i));
        if i % 1000 == 0 {
            f.remove(0, flood_next(&mut seed));
            f.expire(Timestamp(i));
        }
    }
    assert_eq!(f.index.capacity(), capacity);
    check_invariants(&f);
}

#[test]
fn entries_lists_every_entry_with_its_expiry() {
    let f = populated();
    let views: Vec<FdbEntryView> = f.entries().collect();
    assert_eq!(views.len(), f.len());
    let learned = views.iter().find(|v| v.mac == mac(3)).unwrap();
    assert_eq!(
        (learned.vlan, learned.port, learned.is_static),
        (2, PortId(1), false)
    );
    assert_eq!(learned.expires_at, Some(secs(300)));
    assert_eq!(learned.age(secs(7)), Some(Duration::from_secs(7)));
    assert!(learned.is_expired(secs(300)) && !learned.is_expired(secs(299)));
    assert_eq!(views.iter().filter(|v| v.is_static).count(), 2);
}

#[test]
fn config_validation_rejects_unusable_settings() {
    let ok = FdbConfig::default();
    assert_eq!(ok.validate(), Ok(()));
    let cases = [
        (
            FdbConfig {
                max_entries: 0,
                ..ok
            },
            FdbError::ZeroCapacity,
        ),
        (
            FdbConfig {
                max_per_port: 0,
                ..ok
            },
            FdbError::ZeroPortLimit,
        ),
        (
            FdbConfig {
                max_per_port: 9000,
                ..ok
            },
            FdbError::PortLimitAboveCapacity {
                per_port: 9000,
                total: 8192,
            },
        ),
        (
            FdbConfig {
                max_entries: MAX_FDB_ENTRIES + 1,
                max_per_port: 1,
                ..ok
            },
            FdbError::CapacityTooLarge {
                requested: MAX_FDB_ENTRIES + 1,
                max: MAX_FDB_ENTRIES,
            },
        ),
        (
            FdbConfig {
                ageing: Duration::ZERO,
                ..ok
            },
            FdbError::ZeroAgeing,
        ),
        (
            FdbConfig {
                ageing: Duration::MAX,
                ..ok
            },
            FdbError::AgeingTooLong(Duration::MAX),
        ),
        (
            FdbConfig {
                refresh_granularity: Duration::from_secs(300),
                ..ok
            },
            FdbError::RefreshGranularityTooCoarse {
                granularity: Duration::from_secs(300),
                ageing: Duration::from_secs(300),
            },
        ),
    ];
    for (config, error) in cases {
        assert_eq!(config.validate(), Err(error), "{config:?}");
        assert_eq!(Fdb::new(config).map(|_| ()), Err(error), "{config:?}");
    }
}
