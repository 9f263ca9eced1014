//! Ageing of learned remote FDB entries.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use weft_packet::MacAddr;

use crate::vxlan::remote_fdb::{LearnOutcome, RemoteFdb};

pub(super) fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
}

pub(super) fn mac(last: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, last])
}

#[test]
fn learned_entries_expire_after_the_ageing_time_and_static_ones_stay() {
    let t0 = Instant::now();
    let mut fdb = RemoteFdb::new(4, 4);
    fdb.set_ageing(Duration::from_secs(10));
    fdb.tick(t0);
    fdb.insert_static(mac(1), ip(1)).unwrap();
    assert_eq!(fdb.learn(mac(2), ip(2)), LearnOutcome::Learned);
    fdb.tick(t0 + Duration::from_secs(5));
    assert_eq!(fdb.learn(mac(3), ip(3)), LearnOutcome::Learned);

    // At 11 s mac 2 (seen at 0 s) is gone, mac 3 (seen at 5 s) stays.
    assert_eq!(fdb.tick(t0 + Duration::from_secs(11)), 1);
    assert!(fdb.lookup(mac(2)).is_none());
    assert_eq!(fdb.lookup(mac(3)).unwrap().endpoint, ip(3));
    assert_eq!(fdb.learned_len(), 1);

    // Long after, only the static entry is left, and the learned bound has room again.
    fdb.tick(t0 + Duration::from_secs(100));
    assert_eq!(fdb.len(), 1);
    assert_eq!(fdb.lookup(mac(1)).unwrap().endpoint, ip(1));
    assert_eq!(fdb.learned_len(), 0);
}

#[test]
fn traffic_from_a_learned_mac_keeps_it_alive() {
    let t0 = Instant::now();
    let mut fdb = RemoteFdb::new(0, 4);
    fdb.set_ageing(Duration::from_secs(10));
    fdb.tick(t0);
    fdb.learn(mac(2), ip(2));
    for s in (4..=40).step_by(4) {
        fdb.tick(t0 + Duration::from_secs(s));
        assert_eq!(fdb.learn(mac(2), ip(2)), LearnOutcome::Unchanged);
    }
    assert_eq!(fdb.lookup(mac(2)).unwrap().endpoint, ip(2));
    let ages: Vec<_> = fdb.entries().map(|(_, _, age)| age).collect();
    assert_eq!(ages, [Some(Duration::ZERO)]);
}

#[test]
fn a_port_opened_with_a_remote_ageing_time_ages_learned_entries_after_exactly_that_time() {
    let mut config = crate::VxlanConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        weft_packet::Vni::new(1).unwrap(),
    );
    config.learning = true;
    config.remote_ageing = Duration::from_secs(7);
    let port = crate::VxlanPort::open(&config).unwrap();
    assert_eq!(port.remote_fdb().ageing(), Duration::from_secs(7));

    // The same table on an injected clock: seen at t0, alive just before 7 s, gone at 7 s.
    let t0 = Instant::now();
    let mut fdb = RemoteFdb::new(0, 4);
    fdb.set_ageing(port.remote_fdb().ageing());
    fdb.tick(t0);
    assert_eq!(fdb.learn(mac(2), ip(2)), LearnOutcome::Learned);
    assert_eq!(fdb.expire(t0 + Duration::from_millis(6_999)), 0);
    assert!(fdb.lookup(mac(2)).is_some());
    assert_eq!(fdb.expire(t0 + Duration::from_secs(7)), 1);
    assert!(fdb.lookup(mac(2)).is_none());
}

proptest! {
    /// Whatever is learned and whenever, the counts stay consistent, nothing older than
    /// the ageing time survives a sweep, and the learned part never exceeds its bound.
    #[test]
    fn ageing_keeps_the_table_consistent(
        steps in proptest::collection::vec((0u8..16, 0u8..4, 0u64..30), 1..200)
    ) {
        let t0 = Instant::now();
        let mut fdb = RemoteFdb::new(2, 8);
        fdb.set_ageing(Duration::from_secs(10));
        fdb.insert_static(mac(100), ip(100)).unwrap();
        let mut clock = 0u64;
        for (m, endpoint, advance) in steps {
            clock += advance;
            let now = t0 + Duration::from_secs(clock);
            fdb.tick(now);
            fdb.expire(now);
            fdb.learn(mac(m), ip(endpoint));
            prop_assert!(fdb.learned_len() <= 8);
            prop_assert_eq!(fdb.len(), fdb.learned_len() + fdb.static_len());
            prop_assert_eq!(fdb.static_len(), 1);
            for (_, entry, age) in fdb.entries() {
                prop_assert_eq!(entry.is_static(), age.is_none());
                prop_assert!(age.is_none_or(|a| a < Duration::from_secs(10)));
            }
        }
    }
}
