//! Directory entries of the remote FDB: priority against static and learned entries, their
//! bound, bulk changes and full replacements, and (proptest) that any mix of operations
//! keeps the priority, the bound and the replacement's set.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use weft_packet::MacAddr;

use super::remote_ageing::{ip, mac};
use crate::vxlan::remote_fdb::directory::DirectoryApplied;
use crate::vxlan::remote_fdb::{EntrySource, LearnOutcome, RemoteFdb};

fn source(fdb: &RemoteFdb, m: u8) -> Option<(EntrySource, IpAddr)> {
    fdb.lookup(mac(m)).map(|e| (e.source, e.endpoint))
}

/// The directory entries, MAC → endpoint.
fn directory_set(fdb: &RemoteFdb) -> HashMap<MacAddr, IpAddr> {
    fdb.entries()
        .filter(|(_, e, _)| e.source == EntrySource::Directory)
        .map(|(m, e, _)| (m, e.endpoint))
        .collect()
}

fn total(a: &DirectoryApplied) -> usize {
    a.added + a.moved + a.unchanged + a.refused_full + a.refused_endpoint + a.shadowed_by_static
}

#[test]
fn a_directory_entry_replaces_a_learned_one_and_learning_never_overrides_it() {
    let mut fdb = RemoteFdb::new(4, 4);
    assert_eq!(fdb.learn(mac(1), ip(1)), LearnOutcome::Learned);
    let applied = fdb.apply_directory(&[(mac(1), Some(ip(2)))]);
    assert_eq!(applied.added, 1);
    assert_eq!(source(&fdb, 1), Some((EntrySource::Directory, ip(2))));
    assert_eq!((fdb.learned_len(), fdb.directory_len()), (0, 1));

    // The wire says otherwise: the directory is authoritative.
    assert_eq!(fdb.learn(mac(1), ip(3)), LearnOutcome::Unchanged);
    assert_eq!(source(&fdb, 1), Some((EntrySource::Directory, ip(2))));
    assert_eq!(fdb.learned_len(), 0);
}

#[test]
fn a_static_entry_wins_over_the_directory_whichever_comes_first() {
    let mut fdb = RemoteFdb::new(4, 4);
    // Static first: the directory's word is ignored and counted.
    fdb.insert_static(mac(1), ip(1)).unwrap();
    let applied = fdb.apply_directory(&[(mac(1), Some(ip(2)))]);
    assert_eq!(applied.shadowed_by_static, 1);
    assert_eq!(source(&fdb, 1), Some((EntrySource::Static, ip(1))));
    // Removing through the directory removes only a directory entry.
    let applied = fdb.apply_directory(&[(mac(1), None)]);
    assert_eq!((applied.removed, applied.unchanged), (0, 1));
    assert_eq!(source(&fdb, 1), Some((EntrySource::Static, ip(1))));

    // Directory first: a static insert replaces it.
    fdb.apply_directory(&[(mac(2), Some(ip(2)))]);
    fdb.insert_static(mac(2), ip(3)).unwrap();
    assert_eq!(source(&fdb, 2), Some((EntrySource::Static, ip(3))));
    assert_eq!((fdb.static_len(), fdb.directory_len()), (2, 0));
}

#[test]
fn the_control_plane_remove_leaves_directory_entries_to_the_directory() {
    let mut fdb = RemoteFdb::new(4, 4);
    fdb.apply_directory(&[(mac(1), Some(ip(1)))]);
    fdb.learn(mac(2), ip(2));
    assert!(!fdb.remove(mac(1)));
    assert_eq!(source(&fdb, 1), Some((EntrySource::Directory, ip(1))));
    // A directory removal of a learned MAC leaves it too.
    let applied = fdb.apply_directory(&[(mac(2), None), (mac(1), None)]);
    assert_eq!((applied.removed, applied.unchanged), (1, 1));
    assert_eq!(source(&fdb, 2), Some((EntrySource::Learned, ip(2))));
    assert!(fdb.lookup(mac(1)).is_none());
}

#[test]
fn directory_entries_never_age() {
    let t0 = Instant::now();
    let mut fdb = RemoteFdb::new(4, 4);
    fdb.set_ageing(Duration::from_secs(10));
    fdb.tick(t0);
    fdb.apply_directory(&[(mac(1), Some(ip(1)))]);
    fdb.learn(mac(2), ip(2));
    assert_eq!(fdb.tick(t0 + Duration::from_secs(3600)), 1);
    assert_eq!(source(&fdb, 1), Some((EntrySource::Directory, ip(1))));
    assert!(fdb.lookup(mac(2)).is_none());
    let ages: Vec<_> = fdb.entries().map(|(_, _, age)| age).collect();
    assert_eq!(ages, [None]);
}

#[test]
fn past_its_bound_the_directory_is_refused_and_counted_but_moves_still_apply() {
    let mut fdb = RemoteFdb::new(1, 1);
    fdb.set_max_directory(2);
    fdb.learn(mac(9), ip(9));
    let applied = fdb.apply_directory(&[
        (mac(1), Some(ip(1))),
        (mac(2), Some(ip(1))),
        (mac(3), Some(ip(1))),
        // Full: the learned entry is not replaced either.
        (mac(9), Some(ip(1))),
        (mac(1), Some(ip(2))),
    ]);
    assert_eq!(
        applied,
        DirectoryApplied {
            added: 2,
            moved: 1,
            refused_full: 2,
            ..DirectoryApplied::default()
        }
    );
    assert_eq!(fdb.directory_len(), 2);
    assert_eq!(source(&fdb, 9), Some((EntrySource::Learned, ip(9))));
    assert_eq!(source(&fdb, 1), Some((EntrySource::Directory, ip(2))));
    // The other kinds' bounds are their own: a static entry still fits.
    fdb.insert_static(mac(4), ip(4)).unwrap();
    assert_eq!(fdb.len(), 4);
}

#[test]
fn replace_directory_sets_the_new_set_removes_the_rest_and_leaves_the_other_kinds() {
    let mut fdb = RemoteFdb::new(4, 4);
    fdb.apply_directory(&[
        (mac(1), Some(ip(1))),
        (mac(2), Some(ip(1))),
        (mac(3), Some(ip(1))),
    ]);
    fdb.insert_static(mac(4), ip(4)).unwrap();
    fdb.learn(mac(5), ip(5));
    fdb.learn(mac(6), ip(6));
    let applied = fdb.replace_directory(&[
        (mac(2), ip(2)),
        (mac(3), ip(1)),
        (mac(4), ip(1)),
        (mac(5), ip(1)),
        (mac(7), ip(1)),
    ]);
    assert_eq!(
        applied,
        DirectoryApplied {
            added: 2,
            moved: 1,
            unchanged: 1,
            removed: 1,
            shadowed_by_static: 1,
            ..DirectoryApplied::default()
        }
    );
    let want: HashMap<_, _> = [
        (mac(2), ip(2)),
        (mac(3), ip(1)),
        (mac(5), ip(1)),
        (mac(7), ip(1)),
    ]
    .into_iter()
    .collect();
    assert_eq!(directory_set(&fdb), want);
    assert_eq!(source(&fdb, 4), Some((EntrySource::Static, ip(4))));
    assert_eq!(source(&fdb, 6), Some((EntrySource::Learned, ip(6))));
    assert_eq!(
        (fdb.static_len(), fdb.directory_len(), fdb.learned_len()),
        (1, 4, 1)
    );
}

#[test]
fn replace_directory_frees_the_room_of_entries_it_drops_before_adding() {
    let mut fdb = RemoteFdb::new(0, 0);
    fdb.set_max_directory(2);
    fdb.apply_directory(&[(mac(1), Some(ip(1))), (mac(2), Some(ip(1)))]);
    let applied = fdb.replace_directory(&[(mac(3), ip(1)), (mac(4), ip(1))]);
    assert_eq!(
        (applied.added, applied.removed, applied.refused_full),
        (2, 2, 0)
    );
    let want: HashMap<_, _> = [(mac(3), ip(1)), (mac(4), ip(1))].into_iter().collect();
    assert_eq!(directory_set(&fdb), want);
}

#[test]
fn a_mac_given_twice_in_a_replacement_takes_its_last_endpoint_and_holds_no_room_meanwhile() {
    let mut fdb = RemoteFdb::new(0, 0);
    fdb.set_local(ip(10));
    fdb.set_max_directory(2);
    fdb.apply_directory(&[(mac(1), Some(ip(1)))]);
    // mac 1 leaves for this host (its last word): its old entry must not keep mac 3 out.
    let applied = fdb.replace_directory(&[
        (mac(1), ip(1)),
        (mac(2), ip(1)),
        (mac(2), ip(2)),
        (mac(3), ip(3)),
        (mac(1), ip(10)),
    ]);
    assert_eq!(
        applied,
        DirectoryApplied {
            added: 2,
            unchanged: 2,
            removed: 1,
            refused_endpoint: 1,
            ..DirectoryApplied::default()
        }
    );
    let want: HashMap<_, _> = [(mac(2), ip(2)), (mac(3), ip(3))].into_iter().collect();
    assert_eq!(directory_set(&fdb), want);
}

#[test]
fn directory_entries_for_the_port_itself_or_another_family_are_refused() {
    let mut fdb = RemoteFdb::new(0, 0);
    fdb.set_local(ip(10));
    fdb.apply_directory(&[(mac(1), Some(ip(1)))]);
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let applied = fdb.apply_directory(&[
        (mac(2), Some(v6)),
        (mac(3), Some(ip(10))),
        // The MAC moved to this host: its entry toward the old one goes.
        (mac(1), Some(ip(10))),
    ]);
    assert_eq!(applied.refused_endpoint, 3);
    assert_eq!(total(&applied), 3);
    assert!(fdb.is_empty());
}

#[test]
fn a_thousand_hosts_of_a_hundred_macs_fit_the_default_bound_in_one_call() {
    let config = crate::VxlanConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        weft_packet::Vni::new(1).unwrap(),
    );
    let mut fdb = RemoteFdb::new(config.max_static, config.max_learned);
    fdb.set_max_directory(config.max_directory);
    let all: Vec<(MacAddr, IpAddr)> = (0..100_000u32)
        .map(|i| {
            let [_, a, b, c] = i.to_be_bytes();
            let host = i / 100;
            let [_, _, h1, h2] = host.to_be_bytes();
            (
                MacAddr([2, 0, 0, a, b, c]),
                IpAddr::V4(Ipv4Addr::new(10, 1, h1, h2)),
            )
        })
        .collect();
    let applied = fdb.replace_directory(&all);
    assert_eq!((applied.added, applied.refused_full), (100_000, 0));
    // Room stays for every static and learned entry the bounds allow.
    let learned = MacAddr([4, 0, 0, 0, 0, 1]);
    assert_eq!(fdb.learn(learned, ip(1)), LearnOutcome::Learned);
    assert_eq!(fdb.directory_len(), 100_000);
}

/// One operation on the table.
#[derive(Debug, Clone)]
enum Op {
    Static(u8, u8),
    Remove(u8),
    Apply(Vec<(u8, Option<u8>)>),
    Replace(Vec<(u8, u8)>),
    Learn(u8, u8),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let m = 0u8..12;
    let e = 0u8..5;
    prop_oneof![
        (m.clone(), e.clone()).prop_map(|(m, e)| Op::Static(m, e)),
        m.clone().prop_map(Op::Remove),
        proptest::collection::vec((m.clone(), proptest::option::of(e.clone())), 0..8)
            .prop_map(Op::Apply),
        proptest::collection::vec((m.clone(), e.clone()), 0..10).prop_map(Op::Replace),
        (m, e).prop_map(|(m, e)| Op::Learn(m, e)),
        (0u64..20).prop_map(Op::Tick),
    ]
}

/// Endpoint 4 is the port's own: refused by the directory.
const LOCAL: u8 = 4;
const MAX_DIRECTORY: usize = 6;

proptest! {
    /// For any sequence of static inserts and removes, directory changes and replacements,
    /// learning and ageing: a static MAC is static; a directory entry is what the directory
    /// last said of its MAC, and learning never changes it; the directory part stays within
    /// its bound; a replacement leaves exactly its set minus the static MACs (and its
    /// own-address entries) when that fits the bound; each change is counted once.
    #[test]
    fn the_priority_bound_and_replacement_set_hold_for_any_operations(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let t0 = Instant::now();
        let mut clock = 0;
        let mut fdb = RemoteFdb::new(16, 16);
        fdb.set_ageing(Duration::from_secs(10));
        fdb.set_max_directory(MAX_DIRECTORY);
        fdb.set_local(ip(LOCAL));
        fdb.tick(t0);
        let mut statics: HashMap<u8, u8> = HashMap::new();
        // What the directory last said, MAC → endpoint.
        let mut said: HashMap<u8, u8> = HashMap::new();
        for op in ops {
            match op {
                Op::Static(m, e) => {
                    fdb.insert_static(mac(m), ip(e)).unwrap();
                    statics.insert(m, e);
                }
                Op::Remove(m) => {
                    let was = fdb.lookup(mac(m));
                    let removed = fdb.remove(mac(m));
                    prop_assert_eq!(
                        removed,
                        was.is_some_and(|e| e.source != EntrySource::Directory)
                    );
                    statics.remove(&m);
                }
                Op::Apply(changes) => {
                    let pairs: Vec<_> =
                        changes.iter().map(|&(m, e)| (mac(m), e.map(ip))).collect();
                    let applied = fdb.apply_directory(&pairs);
                    prop_assert_eq!(total(&applied) + applied.removed, pairs.len());
                    for (m, e) in changes {
                        match e {
                            Some(e) => said.insert(m, e),
                            None => said.remove(&m),
                        };
                    }
                }
                Op::Replace(all) => {
                    let pairs: Vec<_> = all.iter().map(|&(m, e)| (mac(m), ip(e))).collect();
                    let applied = fdb.replace_directory(&pairs);
                    prop_assert_eq!(total(&applied), pairs.len());
                    said = all.iter().copied().collect();
                    // The set it should leave: the last word on each MAC, minus static
                    // MACs and own-address entries.
                    let want: HashMap<MacAddr, IpAddr> = said
                        .iter()
                        .filter(|(m, e)| !statics.contains_key(m) && **e != LOCAL)
                        .map(|(&m, &e)| (mac(m), ip(e)))
                        .collect();
                    let got = directory_set(&fdb);
                    if want.len() <= MAX_DIRECTORY {
                        prop_assert_eq!(&got, &want);
                    } else {
                        prop_assert_eq!(got.len(), MAX_DIRECTORY);
                        prop_assert!(got.iter().all(|(m, e)| want.get(m) == Some(e)));
                    }
                }
                Op::Learn(m, e) => {
                    let before = fdb.lookup(mac(m));
                    fdb.learn(mac(m), ip(e));
                    if before.is_some_and(|b| b.source != EntrySource::Learned) {
                        prop_assert_eq!(fdb.lookup(mac(m)), before);
                    }
                }
                Op::Tick(advance) => {
                    clock += advance;
                    fdb.tick(t0 + Duration::from_secs(clock));
                }
            }
            // Static MACs are static, with their endpoint.
            for (&m, &e) in &statics {
                prop_assert_eq!(source(&fdb, m), Some((EntrySource::Static, ip(e))));
            }
            // Directory entries say what the directory last said, never the port itself.
            let directory = directory_set(&fdb);
            prop_assert!(directory.len() <= MAX_DIRECTORY);
            for (m, e) in &directory {
                prop_assert_eq!(said.get(&m.0[5]).map(|&e| ip(e)), Some(*e));
                prop_assert_ne!(*e, ip(LOCAL));
            }
            // The counts match the entries.
            let kinds: Vec<EntrySource> = fdb.entries().map(|(_, e, _)| e.source).collect();
            let count = |k| kinds.iter().filter(|s| **s == k).count();
            prop_assert_eq!(count(EntrySource::Static), fdb.static_len());
            prop_assert_eq!(count(EntrySource::Directory), fdb.directory_len());
            prop_assert_eq!(count(EntrySource::Learned), fdb.learned_len());
            let distinct: HashSet<MacAddr> = fdb.entries().map(|(m, _, _)| m).collect();
            prop_assert_eq!(distinct.len(), fdb.len());
        }
    }
}
