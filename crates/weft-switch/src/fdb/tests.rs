//! Unit tests of the FDB, plus the structural invariant check the property tests share.

use core::time::Duration;
use std::collections::HashSet;

use super::*;

pub(super) fn mac(n: u64) -> MacAddr {
    // A locally administered unicast address: 02:00:xx:xx:xx:xx.
    MacAddr::from_u64(0x0200_0000_0000 | (n & 0xffff_ffff))
}

pub(super) fn secs(s: u64) -> Timestamp {
    Timestamp::from_secs(s)
}

pub(super) fn fdb(max_entries: usize, max_per_port: usize) -> Fdb {
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
