//! The fuzz target's body (`fuzz/fuzz_targets/directory_entries.rs`): arbitrary keys and
//! values, as anyone with write access to the store could write them, applied to a small
//! bounded view; the view must never panic, never hold more than its bound, and the changes
//! it reports must always add up to what it says.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use weft_packet::{MacAddr, Vni};

use crate::keys::HostId;
use crate::view::{Change, Entry, View};

const PREFIX: &str = "/weft/";
const MAX_ENTRIES: usize = 32;

/// Runs one input: a sequence of `[op, key_len, key.., value_len, value..]` records; keys
/// not starting with `/` get the prefix and `vni/` put in front, so that most reach the
/// parser's deeper cases.
pub fn directory_entries(data: &[u8]) {
    let carried: HashSet<Vni> = (0..4).filter_map(|v| Vni::new(v).ok()).collect();
    let own = HostId::new("me").unwrap_or_else(|_| unreachable!("a valid name"));
    let mut view = View::new(PREFIX, own, carried.clone(), MAX_ENTRIES);
    let mut followed: BTreeMap<(Vni, MacAddr), IpAddr> = BTreeMap::new();
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        let Some((key, tail)) = take(tail) else { break };
        let Some((value, tail)) = take(tail) else {
            break;
        };
        rest = tail;
        let key = if key.first() == Some(&b'/') {
            key.to_vec()
        } else {
            [format!("{PREFIX}vni/").as_bytes(), key].concat()
        };
        let entry = if op & 1 == 0 {
            Entry::Put { key: &key, value }
        } else {
            Entry::Delete { key: &key }
        };
        match view.apply(entry) {
            Some(Change::Mac(vni, mac, Some(to))) => {
                followed.insert((vni, mac), to);
            }
            Some(Change::Mac(vni, mac, None)) => {
                followed.remove(&(vni, mac));
            }
            Some(Change::Remotes(_)) | None => {}
        }
        assert!(view.entries() <= MAX_ENTRIES, "the view outgrew its bound");
    }
    let mut all = BTreeMap::new();
    for vni in &carried {
        for (mac, to) in view.remote_macs(*vni) {
            all.insert((*vni, mac), to);
        }
    }
    assert_eq!(
        followed, all,
        "the changes reported do not add up to the view"
    );
}

/// A length byte and that many bytes (fewer at the end of the input).
fn take(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&len, rest) = data.split_first()?;
    let n = usize::from(len).min(rest.len());
    Some(rest.split_at(n))
}
