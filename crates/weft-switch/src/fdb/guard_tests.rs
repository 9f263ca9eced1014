//! Per-port MAC limits and flap dampening.

use core::time::Duration;

use weft_packet::MacAddr;

use super::{Fdb, FdbConfig, IgnoreReason, LearnOutcome};
use crate::types::{PortId, Timestamp};

fn mac(i: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, i])
}

fn ms(t: u64) -> Timestamp {
    Timestamp::from_millis(t)
}

fn dampened(limit: u32, hold: Duration) -> Fdb {
    Fdb::new(FdbConfig {
        mac_move_limit: limit,
        mac_move_hold: hold,
        ..FdbConfig::default()
    })
    .unwrap()
}

#[test]
fn a_port_at_its_mac_limit_learns_no_new_address_and_keeps_the_old_ones() {
    let mut fdb = Fdb::new(FdbConfig::default()).unwrap();
    fdb.set_port_mac_limit(PortId(1), Some(2));
    assert_eq!(
        fdb.learn(0, mac(1), PortId(1), ms(0)),
        LearnOutcome::Learned
    );
    assert_eq!(
        fdb.learn(0, mac(2), PortId(1), ms(0)),
        LearnOutcome::Learned
    );
    assert_eq!(
        fdb.learn(0, mac(3), PortId(1), ms(0)),
        LearnOutcome::Ignored(IgnoreReason::PortMacLimit)
    );
    assert_eq!(fdb.lookup(0, mac(3), ms(0)), None);
    assert_eq!(fdb.lookup(0, mac(1), ms(0)), Some(PortId(1)));
    // Known addresses still refresh; other ports are unaffected.
    assert_eq!(
        fdb.learn(0, mac(1), PortId(1), ms(5)),
        LearnOutcome::Refreshed
    );
    assert_eq!(
        fdb.learn(0, mac(3), PortId(2), ms(5)),
        LearnOutcome::Learned
    );
    assert_eq!(fdb.stats().ignored.port_mac_limit, 1);
}

#[test]
fn an_address_cannot_move_onto_a_port_at_its_mac_limit() {
    let mut fdb = Fdb::new(FdbConfig::default()).unwrap();
    fdb.set_port_mac_limit(PortId(1), Some(1));
    fdb.learn(0, mac(1), PortId(1), ms(0));
    fdb.learn(0, mac(2), PortId(2), ms(0));
    assert_eq!(
        fdb.learn(0, mac(2), PortId(1), ms(1)),
        LearnOutcome::Ignored(IgnoreReason::PortMacLimit)
    );
    assert_eq!(fdb.lookup(0, mac(2), ms(1)), Some(PortId(2)));
    // Lifting the limit lets it move.
    fdb.set_port_mac_limit(PortId(1), None);
    assert!(matches!(
        fdb.learn(0, mac(2), PortId(1), ms(2)),
        LearnOutcome::Moved { .. }
    ));
}

#[test]
fn an_address_moving_more_often_than_the_limit_is_held_where_it_is_for_the_hold_time() {
    let mut fdb = dampened(3, Duration::from_secs(5));
    fdb.learn(0, mac(1), PortId(1), ms(0));
    // Three moves within a second are allowed...
    for (t, port) in [(10, 2), (20, 1), (30, 2)] {
        assert!(matches!(
            fdb.learn(0, mac(1), PortId(port), ms(t)),
            LearnOutcome::Moved { .. }
        ));
    }
    // ...the fourth starts an episode: the address stays on port 2.
    assert_eq!(
        fdb.learn(0, mac(1), PortId(1), ms(40)),
        LearnOutcome::Ignored(IgnoreReason::FlapHeld)
    );
    assert_eq!(fdb.lookup(0, mac(1), ms(40)), Some(PortId(2)));
    assert!(fdb.is_held(0, mac(1), ms(40)));
    // Still held later in the hold time; refreshes on its own port go on.
    assert_eq!(
        fdb.learn(0, mac(1), PortId(1), ms(4_000)),
        LearnOutcome::Ignored(IgnoreReason::FlapHeld)
    );
    assert_eq!(
        fdb.learn(0, mac(1), PortId(2), ms(4_000)),
        LearnOutcome::Refreshed
    );
    // After the hold it may move again.
    assert!(!fdb.is_held(0, mac(1), ms(5_040)));
    assert!(matches!(
        fdb.learn(0, mac(1), PortId(1), ms(5_040)),
        LearnOutcome::Moved { .. }
    ));
    let stats = fdb.stats();
    assert_eq!(stats.flap_episodes, 1);
    assert_eq!(stats.ignored.flap_held, 2);
}

#[test]
fn each_flap_episode_is_reported_once() {
    let mut fdb = dampened(1, Duration::from_secs(1));
    fdb.learn(0, mac(1), PortId(1), ms(0));
    fdb.learn(0, mac(1), PortId(2), ms(1));
    for t in 2..50 {
        fdb.learn(0, mac(1), PortId(1 + (t % 2) as u16), ms(t));
    }
    let (episodes, unlogged) = fdb.take_flap_episodes();
    assert_eq!(unlogged, 0);
    assert_eq!(episodes.len(), 1);
    let e = episodes[0];
    assert_eq!(
        (e.vlan, e.mac, e.held_on, e.moving_to),
        (0, mac(1), PortId(2), PortId(1))
    );
    assert_eq!(e.until, ms(1_002));
    assert!(fdb.take_flap_episodes().0.is_empty(), "taken once");
}

#[test]
fn moves_spread_over_more_than_a_second_are_never_dampened() {
    let mut fdb = dampened(2, Duration::from_secs(10));
    fdb.learn(0, mac(1), PortId(1), ms(0));
    for i in 1..100u64 {
        let port = PortId(1 + (i % 2) as u16);
        assert!(
            matches!(
                fdb.learn(0, mac(1), port, ms(i * 600)),
                LearnOutcome::Moved { .. }
            ),
            "move {i}"
        );
    }
    assert_eq!(fdb.stats().flap_episodes, 0);
}

#[test]
fn without_a_move_limit_every_move_is_learned() {
    let mut fdb = Fdb::new(FdbConfig::default()).unwrap();
    fdb.learn(0, mac(1), PortId(1), ms(0));
    for t in 1..1000u64 {
        let port = PortId(1 + (t % 2) as u16);
        assert!(matches!(
            fdb.learn(0, mac(1), port, ms(t)),
            LearnOutcome::Moved { .. }
        ));
    }
}

#[test]
fn a_hold_time_out_of_range_is_refused_when_dampening_is_on() {
    for hold in [Duration::ZERO, Duration::from_secs(3601)] {
        let config = FdbConfig {
            mac_move_limit: 5,
            mac_move_hold: hold,
            ..FdbConfig::default()
        };
        assert!(config.validate().is_err(), "{hold:?}");
    }
}
