use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use proptest::prelude::*;
use weft_packet::{MacAddr, Vni};

use crate::error::Refusal;
use crate::keys::{HostId, Key};
use crate::records::{MacClaim, VtepRecord};
use crate::view::{Change, Entry, View};

const P: &str = "/weft/";

fn vni(n: u32) -> Vni {
    Vni::new(n).unwrap()
}

fn mac(n: u8) -> MacAddr {
    MacAddr::from_bytes(&[0x52, 0x54, 0, 0, 0, n]).unwrap()
}

fn ip(n: u8) -> IpAddr {
    IpAddr::from([192, 0, 2, n])
}

fn view(max: usize) -> View {
    View::new(P, HostId::new("me").unwrap(), HashSet::from([vni(1)]), max)
}

fn vtep_key(v: u32, host: &str) -> String {
    Key::Vtep {
        vni: vni(v),
        host: HostId::new(host).unwrap(),
    }
    .render(P)
}

fn mac_key(v: u32, m: MacAddr, host: &str) -> String {
    Key::Mac {
        vni: vni(v),
        mac: m,
        host: HostId::new(host).unwrap(),
    }
    .render(P)
}

fn put(view: &mut View, key: &str, value: &str) -> Option<Change> {
    view.apply(Entry::Put {
        key: key.as_bytes(),
        value: value.as_bytes(),
    })
}

fn claim(vtep: IpAddr, seq: u32) -> String {
    MacClaim { vtep, seq }.render()
}

fn vtep(addr: IpAddr) -> String {
    VtepRecord { addr, port: 4789 }.render()
}

#[test]
fn remote_vteps_are_every_host_but_this_one() {
    let mut v = view(100);
    assert_eq!(
        put(&mut v, &vtep_key(1, "a"), &vtep(ip(1))),
        Some(Change::Remotes(vni(1)))
    );
    assert_eq!(put(&mut v, &vtep_key(1, "me"), &vtep(ip(9))), None);
    assert_eq!(
        put(&mut v, &vtep_key(1, "b"), &vtep(ip(2))),
        Some(Change::Remotes(vni(1)))
    );
    // The same value again changes nothing.
    assert_eq!(put(&mut v, &vtep_key(1, "b"), &vtep(ip(2))), None);
    let addrs: Vec<IpAddr> = v.remotes(vni(1)).iter().map(|r| r.addr).collect();
    assert_eq!(addrs, vec![ip(1), ip(2)]);
    let gone = v.apply(Entry::Delete {
        key: vtep_key(1, "a").as_bytes(),
    });
    assert_eq!(gone, Some(Change::Remotes(vni(1))));
    assert_eq!(v.remotes(vni(1)).len(), 1);
}

#[test]
fn the_highest_sequence_number_wins_a_mac_and_ties_go_to_the_lower_endpoint() {
    let mut v = view(100);
    let m = mac(1);
    assert_eq!(
        put(&mut v, &mac_key(1, m, "a"), &claim(ip(1), 0)),
        Some(Change::Mac(vni(1), m, Some(ip(1))))
    );
    // It moved to b: b claims it with one more.
    assert_eq!(
        put(&mut v, &mac_key(1, m, "b"), &claim(ip(2), 1)),
        Some(Change::Mac(vni(1), m, Some(ip(2))))
    );
    // a, which missed the move, writes its old claim again: nothing changes.
    assert_eq!(put(&mut v, &mac_key(1, m, "a"), &claim(ip(1), 0)), None);
    assert_eq!(v.remote_owner(vni(1), m), Some(ip(2)));
    // c claims it with the same number as b and a higher address: b keeps it.
    assert_eq!(put(&mut v, &mac_key(1, m, "c"), &claim(ip(3), 1)), None);
    // b lets go: c's claim is the best left.
    assert_eq!(
        v.apply(Entry::Delete {
            key: mac_key(1, m, "b").as_bytes()
        }),
        Some(Change::Mac(vni(1), m, Some(ip(3))))
    );
    // This host claims it higher: no remote owner any more.
    assert_eq!(
        put(&mut v, &mac_key(1, m, "me"), &claim(ip(9), 2)),
        Some(Change::Mac(vni(1), m, None))
    );
    assert_eq!(v.others_highest_seq(vni(1), m), Some(1));
    assert!(v.remote_macs(vni(1)).is_empty());
}

#[test]
fn refused_entries_are_counted_and_change_nothing() {
    let mut v = view(2);
    assert_eq!(put(&mut v, "/weft/vni/1/mac/zz/h", &claim(ip(1), 0)), None);
    assert_eq!(put(&mut v, &mac_key(1, mac(1), "a"), "{not json"), None);
    assert_eq!(put(&mut v, "/weft/vni/16777216/vtep/a", &vtep(ip(1))), None);
    assert!(put(&mut v, &vtep_key(1, "a"), &vtep(ip(1))).is_some());
    assert!(put(&mut v, &mac_key(1, mac(1), "a"), &claim(ip(1), 0)).is_some());
    // Full: a third entry is refused, a new value for a held key is taken.
    assert_eq!(
        put(&mut v, &mac_key(1, mac(2), "a"), &claim(ip(1), 0)),
        None
    );
    assert!(put(&mut v, &mac_key(1, mac(1), "a"), &claim(ip(2), 0)).is_some());
    // A delete frees room.
    v.apply(Entry::Delete {
        key: vtep_key(1, "a").as_bytes(),
    });
    assert!(put(&mut v, &mac_key(1, mac(2), "a"), &claim(ip(1), 0)).is_some());
    let r = v.refusals();
    assert_eq!(r.get(Refusal::MalformedKey), 1);
    assert_eq!(r.get(Refusal::MalformedValue), 1);
    assert_eq!(r.get(Refusal::WrongVni), 1);
    assert_eq!(r.get(Refusal::OverCapacity), 1);
    assert_eq!(v.entries(), 2);
}

#[test]
fn entries_of_vnis_not_carried_are_skipped_uncounted() {
    let mut v = view(100);
    assert_eq!(put(&mut v, &vtep_key(2, "a"), &vtep(ip(1))), None);
    assert_eq!(v.entries(), 0);
    assert!(v.refusals().iter().all(|(_, n)| n == 0));
}

/// One operation of a random history.
#[derive(Debug, Clone)]
enum Op {
    Vtep {
        host: u8,
        addr: u8,
        delete: bool,
    },
    Claim {
        host: u8,
        mac: u8,
        addr: u8,
        seq: u32,
        delete: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, 1u8..5, any::<bool>()).prop_map(|(host, addr, delete)| Op::Vtep {
            host,
            addr,
            delete
        }),
        (0u8..4, 1u8..4, 1u8..5, 0u32..4, any::<bool>()).prop_map(
            |(host, mac, addr, seq, delete)| Op::Claim {
                host,
                mac,
                addr,
                seq,
                delete
            }
        ),
    ]
}

fn host_name(h: u8) -> &'static str {
    ["me", "a", "b", "c"][usize::from(h)]
}

fn apply_op(v: &mut View, op: &Op) -> Option<Change> {
    let (key, value) = match op {
        Op::Vtep { host, addr, delete } => (
            vtep_key(1, host_name(*host)),
            (!delete).then(|| vtep(ip(*addr))),
        ),
        Op::Claim {
            host,
            mac: m,
            addr,
            seq,
            delete,
        } => (
            mac_key(1, mac(*m), host_name(*host)),
            (!delete).then(|| claim(ip(*addr), *seq)),
        ),
    };
    match value {
        Some(value) => put(v, &key, &value),
        None => v.apply(Entry::Delete {
            key: key.as_bytes(),
        }),
    }
}

fn key_of(op: &Op) -> (u8, u8, bool) {
    match op {
        Op::Vtep { host, .. } => (*host, 0, true),
        Op::Claim { host, mac, .. } => (*host, *mac, false),
    }
}

proptest! {
    /// The changes a view reports, applied to a copy, give exactly what the view says: a
    /// sink that follows the changes is never out of date.
    #[test]
    fn the_changes_reported_add_up_to_the_view(ops in proptest::collection::vec(op(), 0..60)) {
        let mut v = view(1000);
        let mut followed: BTreeMap<MacAddr, IpAddr> = BTreeMap::new();
        let mut remotes = Vec::new();
        for op in &ops {
            match apply_op(&mut v, op) {
                Some(Change::Mac(_, m, Some(to))) => { followed.insert(m, to); }
                Some(Change::Mac(_, m, None)) => { followed.remove(&m); }
                Some(Change::Remotes(_)) => remotes = v.remotes(vni(1)),
                None => {}
            }
        }
        let expected: BTreeMap<MacAddr, IpAddr> = v.remote_macs(vni(1)).into_iter().collect();
        prop_assert_eq!(followed, expected);
        prop_assert_eq!(remotes, v.remotes(vni(1)));
    }

    /// Every host reads the store's changes in its own order; what each ends with depends
    /// only on the last write of each key.
    #[test]
    fn the_order_entries_arrive_in_does_not_change_the_outcome(
        ops in proptest::collection::vec(op(), 0..60),
        seed in any::<u64>(),
    ) {
        let mut last: BTreeMap<(u8, u8, bool), Op> = BTreeMap::new();
        for op in &ops {
            last.insert(key_of(op), op.clone());
        }
        let mut in_order = view(1000);
        for op in &ops {
            apply_op(&mut in_order, op);
        }
        // The last writes only, in a shuffled order.
        let mut finals: Vec<Op> = last.into_values().collect();
        let mut state = seed | 1;
        for i in (1..finals.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            finals.swap(i, usize::try_from(state % (i as u64 + 1)).unwrap());
        }
        let mut shuffled = view(1000);
        for op in &finals {
            apply_op(&mut shuffled, op);
        }
        prop_assert_eq!(in_order.remote_macs(vni(1)), shuffled.remote_macs(vni(1)));
        prop_assert_eq!(in_order.remotes(vni(1)), shuffled.remotes(vni(1)));
        prop_assert_eq!(in_order.entries(), shuffled.entries());
    }
}

proptest! {
    /// The fuzz target's body holds on random input too (the fuzzer runs it longer).
    #[test]
    fn random_entries_never_break_the_view(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        crate::fuzz_entry::directory_entries(&data);
    }
}
