use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use weft_packet::{MacAddr, Vni};

use crate::keys::{HostId, Key};
use crate::publish::{Desired, Publisher, Write};
use crate::records::{MacClaim, VtepRecord};
use crate::view::{Entry, View};

const P: &str = "/weft/";

fn vni() -> Vni {
    Vni::new(1).unwrap()
}

fn mac(n: u8) -> MacAddr {
    MacAddr::from_bytes(&[0x52, 0x54, 0, 0, 0, n]).unwrap()
}

fn me() -> HostId {
    HostId::new("me").unwrap()
}

fn my_vtep() -> VtepRecord {
    VtepRecord {
        addr: IpAddr::from([192, 0, 2, 9]),
        port: 4789,
    }
}

fn desired(macs: &[u8]) -> Desired {
    Desired {
        vteps: BTreeMap::from([(vni(), my_vtep())]),
        macs: BTreeMap::from([(vni(), macs.iter().map(|m| mac(*m)).collect::<BTreeSet<_>>())]),
    }
}

fn view() -> View {
    View::new(P, me(), HashSet::from([vni()]), 1000)
}

/// Another host's claim, as the view reads it from the store.
fn claimed_elsewhere(v: &mut View, m: MacAddr, seq: u32) {
    let key = Key::Mac {
        vni: vni(),
        mac: m,
        host: HostId::new("other").unwrap(),
    }
    .render(P);
    let value = MacClaim {
        vtep: IpAddr::from([192, 0, 2, 1]),
        seq,
    }
    .render();
    v.apply(Entry::Put {
        key: key.as_bytes(),
        value: value.as_bytes(),
    });
}

/// The sequence number a plan claims `m` with.
fn seq_in(writes: &[Write], m: MacAddr) -> Option<u32> {
    writes.iter().find_map(|w| match w {
        Write::Put { key, value } => match Key::parse(P, key.as_bytes()) {
            Ok(Key::Mac { mac, .. }) if mac == m => {
                MacClaim::parse(value.as_bytes()).ok().map(|c| c.seq)
            }
            _ => None,
        },
        Write::Delete { .. } => None,
    })
}

#[test]
fn a_mac_that_appears_here_outbids_every_other_claim() {
    let mut v = view();
    claimed_elsewhere(&mut v, mac(2), 4);
    let p = Publisher::new(P, me());
    let writes = p.plan(&desired(&[1, 2]), &v, 100);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(matches!(&writes[0], Write::Put { key, .. } if key == "/weft/vni/1/vtep/me"));
    assert_eq!(seq_in(&writes, mac(1)), Some(0));
    assert_eq!(seq_in(&writes, mac(2)), Some(5));
}

#[test]
fn a_claim_already_written_keeps_its_number_so_a_stale_host_cannot_take_a_mac_back() {
    let mut v = view();
    let mut p = Publisher::new(P, me());
    let writes = p.plan(&desired(&[1]), &v, 100);
    p.written(&writes);
    // The MAC moved while this host was cut off: the other host claims it with 1.
    claimed_elsewhere(&mut v, mac(1), 1);
    assert!(p.plan(&desired(&[1]), &v, 100).is_empty());
    // The lease expired meanwhile: everything is written again, with the same number.
    p.forget_written();
    let again = p.plan(&desired(&[1]), &v, 100);
    assert_eq!(seq_in(&again, mac(1)), Some(0));
    p.written(&again);
    // Once it left and comes back, it moved here again: it outbids.
    p.prune_lost(&desired(&[]));
    let gone = p.plan(&desired(&[]), &v, 100);
    assert!(gone
        .iter()
        .any(|w| matches!(w, Write::Delete { key } if key.contains("52:54:00:00:00:01"))));
    p.written(&gone);
    assert_eq!(seq_in(&p.plan(&desired(&[1]), &v, 100), mac(1)), Some(2));
}

#[test]
fn leaving_macs_and_vnis_are_deleted_first_and_plans_are_bounded() {
    let v = view();
    let mut p = Publisher::new(P, me());
    let all = p.plan(&desired(&[1, 2, 3, 4]), &v, 100);
    p.written(&all);
    assert_eq!(p.claims(), 4);
    let bounded = p.plan(&desired(&[5, 6, 7]), &v, 3);
    assert_eq!(bounded.len(), 3);
    assert!(bounded.iter().all(|w| matches!(w, Write::Delete { .. })));
    // The VNI goes: its endpoint and every claim.
    let none = Desired::default();
    let writes = p.plan(&none, &v, 100);
    assert_eq!(writes.len(), 5);
    assert!(writes.iter().all(|w| matches!(w, Write::Delete { .. })));
    p.written(&writes);
    assert_eq!(p.claims(), 0);
    assert!(p.plan(&none, &v, 100).is_empty());
}
