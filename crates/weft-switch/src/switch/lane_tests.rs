//! One switch as two lanes (`crate::lanes`): what one lane learns, the other forwards by.

use weft_packet::MacAddr;

use super::tests::{mac, Rig, T0};
use super::*;
use crate::lanes::{LaneGroup, SharedTx, INBOX_CAPACITY};
use crate::memory_port::{memory_port, MemoryPortHandle};
use crate::port::PortCaps;

/// A 60-byte frame from `src` to `dst`.
fn frame(dst: MacAddr, src: MacAddr) -> Vec<u8> {
    super::tests::frame(dst, src, 60)
}

/// Two lanes of `br0` with `n` in-memory ports: port `i` is received by lane `i % 2` and
/// transmitted to by both through one shared half.
struct Lanes {
    sw: [Switch; 2],
    ports: Vec<(PortId, MemoryPortHandle)>,
}

impl Lanes {
    fn new(n: usize) -> Lanes {
        Self::with_config(n, &SwitchConfig::default())
    }

    fn with_config(n: usize, config: &SwitchConfig) -> Lanes {
        let mut lanes = LaneGroup::lanes(2).unwrap().into_iter();
        let mut sw = [0, 1].map(|_| Switch::new("br0", config.clone()).unwrap());
        for s in &mut sw {
            s.join_lanes(lanes.next().unwrap());
        }
        let ports = (0..n)
            .map(|i| {
                let (rx, tx, h) = memory_port(PortCaps::plain(1500), 1024);
                let mut txs = SharedTx::share(Box::new(tx), 2).into_iter();
                let mut rx = Some(rx);
                let ids: Vec<PortId> = sw
                    .iter_mut()
                    .enumerate()
                    .map(|(lane, s)| {
                        let mine = (i % 2 == lane).then(|| rx.take()).flatten();
                        s.add_port(
                            &format!("p{i}"),
                            mine.map(|r| Box::new(r) as Box<dyn PortRx>),
                            Box::new(txs.next().unwrap()),
                            PortOptions::default(),
                        )
                        .unwrap()
                    })
                    .collect();
                assert_eq!(ids[0], ids[1], "same ids on every lane");
                (ids[0], h)
            })
            .collect();
        Lanes { sw, ports }
    }

    /// Sends `f` into port `i` and lets its lane forward it.
    fn send(&mut self, i: usize, f: &[u8], now: Timestamp) {
        let (id, h) = &self.ports[i];
        assert!(h.inject(f));
        assert_eq!(self.sw[i % 2].poll(*id, now), 1);
    }

    fn sent(&self, i: usize) -> usize {
        self.ports[i].1.take_sent().len()
    }
}

#[test]
fn a_station_learned_on_one_lane_is_forwarded_to_by_the_other() {
    let mut l = Lanes::new(3);
    // p0 (lane 0) sends from A: flooded, A learned on lane 0 and posted.
    l.send(0, &frame(MacAddr::BROADCAST, mac(0xa)), T0);
    assert_eq!((l.sent(1), l.sent(2)), (1, 1));
    // p1 (lane 1) answers A: lane 1 takes in what lane 0 learned first, so unicast to p0.
    l.send(1, &frame(mac(0xa), mac(0xb)), T0);
    assert_eq!((l.sent(0), l.sent(2)), (1, 0), "not flooded");
    let stats = l.sw[1].lane().unwrap().counters().snapshot();
    assert_eq!((stats.applied, stats.stale), (1, 0));
    assert_eq!(l.sw[0].lane().unwrap().counters().snapshot().posted, 1);
    // And lane 0 learned B from lane 1 when it next took its mail.
    assert_eq!(l.sw[0].sync_lanes(T0), 1);
    assert_eq!(l.sw[0].fdb().lookup(0, mac(0xb), T0), Some(l.ports[1].0));
}

#[test]
fn a_station_moving_to_a_port_of_the_other_lane_moves_on_both() {
    let mut l = Lanes::new(4);
    l.send(0, &frame(MacAddr::BROADCAST, mac(0xa)), T0);
    l.send(1, &frame(MacAddr::BROADCAST, mac(0xa)), Timestamp(T0.0 + 1));
    l.sw[0].sync_lanes(Timestamp(T0.0 + 2));
    for s in &l.sw {
        assert_eq!(
            s.fdb().lookup(0, mac(0xa), Timestamp(T0.0 + 2)),
            Some(l.ports[1].0)
        );
    }
}

#[test]
fn a_record_crossing_a_port_change_is_dropped_as_stale() {
    let mut l = Lanes::new(3);
    l.send(0, &frame(MacAddr::BROADCAST, mac(0xa)), T0);
    // Lane 1 has already removed p2; lane 0 has not yet (the control plane is between them).
    l.sw[1].remove_port(l.ports[2].0).unwrap();
    assert_eq!(l.sw[1].sync_lanes(T0), 0);
    assert_eq!(l.sw[1].lane().unwrap().counters().snapshot().stale, 1);
    assert_eq!(l.sw[1].fdb().lookup(0, mac(0xa), T0), None);
}

#[test]
fn a_lane_that_does_not_take_its_mail_loses_only_what_its_inbox_cannot_hold() {
    let mut l = Lanes::new(2);
    let sources = INBOX_CAPACITY + 100;
    let mut sent = 0;
    while sent < sources {
        let (id, h) = &l.ports[0];
        for k in 0..64.min(sources - sent) {
            let n = sent + k;
            let [_, _, _, _, _, a, b, c] = (n as u64).to_be_bytes();
            let src = MacAddr([0x02, 0, 0, a, b, c]);
            h.inject(&frame(MacAddr::BROADCAST, src));
        }
        sent += 64.min(sources - sent);
        l.sw[0].poll(*id, T0);
    }
    let posted = l.sw[0].lane().unwrap().counters().snapshot();
    assert_eq!(posted.posted, INBOX_CAPACITY as u64);
    assert_eq!(posted.lost, 100);
    assert_eq!(l.sw[1].sync_lanes(T0), INBOX_CAPACITY);
}

#[test]
fn a_switch_that_is_no_lane_records_nothing() {
    let mut sw = Switch::new("br0", SwitchConfig::default()).unwrap();
    let (rx, tx, h) = memory_port(PortCaps::plain(1500), 16);
    let id = sw
        .add_port(
            "p0",
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
        .unwrap();
    h.inject(&frame(MacAddr::BROADCAST, mac(1)));
    sw.poll(id, T0);
    assert!(!sw.fdb.journal_on());
    assert!(sw.lane().is_none());
    assert_eq!(sw.sync_lanes(T0), 0);
}

mod as_one_switch {
    //! Two lanes that take in each other's news after every batch forward exactly as one
    //! switch would: same frames out of the same ports, in the same order.

    use proptest::prelude::*;

    use super::*;

    /// One frame: into port `port`, from station `src` to station `dst` (or broadcast),
    /// at `step` seconds.
    #[derive(Clone, Debug)]
    struct Step {
        port: usize,
        src: u8,
        dst: Option<u8>,
        gap_secs: u64,
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            // Mostly frames of one instant (one batch, one clock reading), where the lanes'
            // records tie in time; now and then a gap, past the FDB's ageing too.
            (
                0..4usize,
                1..6u8,
                prop::option::of(1..6u8),
                prop_oneof![3 => Just(0u64), 1 => 0..400u64],
            )
                .prop_map(|(port, src, dst, gap_secs)| Step {
                    port,
                    src,
                    dst,
                    gap_secs,
                }),
            1..80,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn two_lanes_synced_after_each_batch_forward_as_one_switch(steps in steps()) {
            let Rig { sw: mut one, ports: one_ports } = Rig::new(4);
            let mut two = Lanes::new(4);
            let mut now = T0;
            for s in &steps {
                // Stations age out of the FDB (300 s) now and then. Each gap is a few
                // nanoseconds off whole seconds: a lane records a move made in the instant of
                // the record it overrides 1 ns later (`Fdb::move_time`), so that entry ages
                // 1 ns later than in one switch, which only a look exactly on that
                // nanosecond could tell.
                if s.gap_secs > 0 {
                    now = Timestamp(now.0 + s.gap_secs * 1_000_000_000 + 7);
                }
                let dst = s.dst.map_or(MacAddr::BROADCAST, mac);
                let f = frame(dst, mac(s.src));
                let (id, h) = &one_ports[s.port];
                h.inject(&f);
                one.poll(*id, now);
                two.send(s.port, &f, now);
                for lane in &mut two.sw {
                    lane.sync_lanes(now);
                }
                for (i, (_, h)) in one_ports.iter().enumerate() {
                    let want = h.take_sent();
                    let got = two.ports[i].1.take_sent();
                    prop_assert_eq!(got, want, "port {} after {:?}", i, s);
                }
            }
        }
    }
}

#[test]
fn a_mac_flapping_across_lanes_is_held_on_one_port_by_both_and_reported_once() {
    let config = SwitchConfig {
        fdb: crate::fdb::FdbConfig {
            mac_move_limit: 3,
            ..crate::fdb::FdbConfig::default()
        },
        ..SwitchConfig::default()
    };
    // p0 is received by lane 0, p1 by lane 1; mac(1) bounces between them.
    let mut l = Lanes::with_config(3, &config);
    for step in 0..12u64 {
        let now = Timestamp(T0.0 + step * 10_000_000);
        for s in &mut l.sw {
            s.sync_lanes(now);
        }
        l.send((step % 2) as usize, &frame(mac(9), mac(1)), now);
    }
    let later = Timestamp(T0.0 + 200_000_000);
    for s in &mut l.sw {
        s.sync_lanes(later);
        assert!(
            s.fdb().is_held(0, mac(1), later),
            "held on every lane: {:?}",
            s.fdb().stats()
        );
    }
    let ports: Vec<_> =
        l.sw.iter()
            .map(|s| s.fdb().lookup(0, mac(1), later))
            .collect();
    assert_eq!(ports[0], ports[1], "held on the same port on both lanes");
    let reports = l.sw[0].take_flap_episodes().0.len() + l.sw[1].take_flap_episodes().0.len();
    assert_eq!(reports, 1, "one report for the switch");
}
