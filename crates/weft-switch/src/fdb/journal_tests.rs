//! The journal and learning from another table (lanes of one switch).

use proptest::prelude::*;

use super::tests::{check_invariants, fdb, mac, secs};
use super::*;

fn drained(f: &mut Fdb) -> Vec<LearnedEntry> {
    let mut out = Vec::new();
    f.drain_journal(|e| out.push(e));
    out
}

fn record(n: u64, port: u16, seen: Timestamp) -> LearnedEntry {
    LearnedEntry {
        held_until: None,
        vlan: 0,
        mac: mac(n),
        port: PortId(port),
        seen,
    }
}

#[test]
fn the_journal_records_new_moved_and_rewritten_entries_only_once_started() {
    let mut f = fdb(64, 64);
    f.learn(0, mac(1), PortId(1), secs(1));
    assert!(drained(&mut f).is_empty(), "off until started");
    f.start_journal(8);
    f.learn(0, mac(2), PortId(1), secs(2));
    f.learn(0, mac(2), PortId(1), Timestamp(secs(2).0 + 1)); // refresh, not rewritten
    f.learn(0, mac(2), PortId(2), secs(3)); // moved
    f.learn(0, mac(2), PortId(2), secs(5)); // rewritten (1 s granularity)
    assert_eq!(
        drained(&mut f),
        vec![
            record(2, 1, secs(2)),
            record(2, 2, secs(3)),
            record(2, 2, secs(5))
        ]
    );
    assert!(!f.journal_pending());
}

#[test]
fn a_full_journal_counts_what_it_could_not_keep() {
    let mut f = fdb(64, 64);
    f.start_journal(2);
    for n in 1..=5 {
        f.learn(0, mac(n), PortId(1), secs(1));
    }
    let mut kept = 0;
    assert_eq!(f.drain_journal(|_| kept += 1), 3);
    assert_eq!(kept, 2);
    assert_eq!(f.drain_journal(|_| {}), 0, "counted once");
}

#[test]
fn entries_learned_from_a_peer_are_not_recorded_again() {
    let mut f = fdb(64, 64);
    f.start_journal(8);
    f.learn_from_peer(record(1, 3, secs(1)), secs(1));
    assert_eq!(f.lookup(0, mac(1), secs(1)), Some(PortId(3)));
    assert!(drained(&mut f).is_empty());
}

#[test]
fn an_older_record_does_not_move_a_station_seen_later_elsewhere() {
    let mut f = fdb(64, 64);
    f.learn(0, mac(1), PortId(1), secs(5));
    f.learn_from_peer(record(1, 2, secs(4)), secs(6));
    assert_eq!(f.lookup(0, mac(1), secs(6)), Some(PortId(1)));
    f.learn_from_peer(record(1, 2, secs(6)), secs(6));
    assert_eq!(f.lookup(0, mac(1), secs(6)), Some(PortId(2)));
    check_invariants(&f);
}

#[test]
fn a_record_keeps_the_time_it_was_seen_so_it_ages_as_in_its_own_table() {
    let mut f = fdb(64, 64); // ageing 300 s
    f.learn(0, mac(9), PortId(1), secs(200));
    f.learn_from_peer(record(1, 2, secs(100)), secs(200));
    check_invariants(&f);
    assert_eq!(f.lookup(0, mac(1), secs(399)), Some(PortId(2)));
    assert_eq!(
        f.lookup(0, mac(1), secs(400)),
        None,
        "aged from 100 s, not 200 s"
    );
    assert_eq!(f.expire(secs(401)), 1);
    assert_eq!(f.lookup(0, mac(9), secs(401)), Some(PortId(1)));
}

#[test]
fn a_static_entry_is_never_moved_by_a_record() {
    let mut f = fdb(64, 64);
    f.add_static(0, mac(1), PortId(1)).unwrap();
    f.learn_from_peer(record(1, 2, secs(9)), secs(9));
    assert_eq!(f.lookup(0, mac(1), secs(9)), Some(PortId(1)));
}

#[test]
fn a_record_far_older_than_the_newest_entries_still_keeps_the_lists_in_order() {
    let mut f = fdb(512, 512);
    for n in 0..200 {
        f.learn(0, mac(1000 + n), PortId(1), Timestamp(secs(100).0 + n));
    }
    f.learn_from_peer(record(1, 1, secs(50)), secs(101));
    f.learn_from_peer(record(2, 2, secs(50)), secs(101));
    check_invariants(&f);
    assert!(f.lookup(0, mac(1), secs(101)).is_some());
}

/// One learn on one table at a strictly later time than the one before.
#[derive(Clone, Debug)]
struct Event {
    table: usize,
    port: u16,
    station: u64,
    deliver: Vec<bool>,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        (
            0..3usize,
            1..4u16,
            0..6u64,
            prop::collection::vec(any::<bool>(), 3),
        )
            .prop_map(|(table, port, station, deliver)| Event {
                table,
                port,
                station,
                deliver,
            }),
        1..60,
    )
}

proptest! {
    /// Three tables learning, each telling the others through per-pair FIFO mailboxes
    /// delivered at random moments: once every mailbox is empty, every table puts each
    /// station on the port it was seen on last, and the tables' structure stays sound
    /// throughout.
    #[test]
    fn tables_that_hear_every_record_agree_on_where_each_station_was_seen_last(
        evs in events()
    ) {
        let mut tables: Vec<Fdb> = (0..3).map(|_| fdb(64, 64)).collect();
        for t in &mut tables {
            t.start_journal(64);
        }
        // mail[to][from]: records not yet delivered.
        let mut mail: Vec<Vec<std::collections::VecDeque<LearnedEntry>>> =
            vec![vec![Default::default(); 3]; 3];
        let mut last = std::collections::HashMap::new();
        for (step, ev) in evs.iter().enumerate() {
            let now = secs(10 + step as u64);
            tables[ev.table].learn(0, mac(ev.station), PortId(ev.port), now);
            last.insert(ev.station, ev.port);
            let out = drained(&mut tables[ev.table]);
            for (to, boxes) in mail.iter_mut().enumerate() {
                if to != ev.table {
                    boxes[ev.table].extend(out.iter().copied());
                }
            }
            for (to, flush) in ev.deliver.iter().enumerate() {
                if *flush {
                    for mailbox in &mut mail[to] {
                        while let Some(r) = mailbox.pop_front() {
                            tables[to].learn_from_peer(r, now);
                        }
                    }
                    check_invariants(&tables[to]);
                }
            }
        }
        let end = secs(10 + evs.len() as u64);
        for (to, table) in tables.iter_mut().enumerate() {
            for mailbox in &mut mail[to] {
                while let Some(r) = mailbox.pop_front() {
                    table.learn_from_peer(r, end);
                }
            }
            check_invariants(table);
            for (station, port) in &last {
                prop_assert_eq!(table.lookup(0, mac(*station), end), Some(PortId(*port)),
                    "table {} station {}", to, station);
            }
        }
    }
}

#[test]
fn a_move_in_the_same_instant_as_the_record_it_overrides_wins_on_every_table() {
    let (mut a, mut b) = (fdb(64, 64), fdb(64, 64));
    a.start_journal(8);
    b.start_journal(8);
    let t = secs(5);
    a.learn(0, mac(1), PortId(2), t);
    for r in drained(&mut a) {
        b.learn_from_peer(r, t);
    }
    // b sees the station on port 1 in the same instant, after hearing of port 2.
    b.learn(0, mac(1), PortId(1), t);
    for r in drained(&mut b) {
        assert!(r.seen > t, "recorded just after what it overrode");
        a.learn_from_peer(r, t);
    }
    for f in [&a, &b] {
        assert_eq!(f.lookup(0, mac(1), t), Some(PortId(1)));
        check_invariants(f);
    }
}

#[test]
fn two_tables_seeing_a_station_on_two_ports_in_one_instant_agree_on_the_higher_port() {
    let (mut a, mut b) = (fdb(64, 64), fdb(64, 64));
    a.start_journal(8);
    b.start_journal(8);
    let t = secs(5);
    a.learn(0, mac(1), PortId(3), t);
    b.learn(0, mac(1), PortId(1), t);
    let (from_a, from_b) = (drained(&mut a), drained(&mut b));
    for r in from_b {
        a.learn_from_peer(r, t);
    }
    for r in from_a {
        b.learn_from_peer(r, t);
    }
    assert_eq!(a.lookup(0, mac(1), t), Some(PortId(3)));
    assert_eq!(b.lookup(0, mac(1), t), Some(PortId(3)));
}
