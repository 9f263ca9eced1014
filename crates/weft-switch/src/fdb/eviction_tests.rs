//! Unit tests of the FDB's bounds: per-port and total limits, fair eviction under floods.

use super::tests::{check_invariants, fdb, mac, secs};
use super::*;

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
fn index_never_grows_under_churn() {
    let mut f = fdb(64, 16);
    // `capacity()` shrinks as deleted markers use up room; the allocation itself must not change.
    let (allocation, reserved) = (f.index.allocation_size(), f.slab.reserved());
    let mut seed = 3;
    for i in 0..200_000u64 {
        let port = PortId(u16::try_from(i % 7).unwrap());
        f.learn(0, flood_next(&mut seed), port, Timestamp(i));
        if i % 1000 == 0 {
            f.remove(0, flood_next(&mut seed));
            f.expire(Timestamp(i));
        }
    }
    assert_eq!(f.index.allocation_size(), allocation);
    assert_eq!(f.slab.reserved(), reserved);
    check_invariants(&f);
}
