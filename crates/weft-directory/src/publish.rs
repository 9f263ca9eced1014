//! [`Publisher`]: what this host writes into the store, and the writes that take the store
//! from what it last wrote to what it wants now.
//!
//! Sequence numbers follow EVPN's MAC mobility (RFC 7432 §15): a MAC that appears behind
//! this host is claimed with one more than the highest any other host claims it with, so it
//! wins everywhere; a MAC this host already claims keeps its number, so a host that missed
//! a move (it was cut off) cannot take the MAC back by writing again.

use std::collections::{BTreeMap, BTreeSet};

use weft_packet::{MacAddr, Vni};

use crate::keys::{HostId, Key};
use crate::records::{MacClaim, VtepRecord};
use crate::view::View;

/// What this host wants in the store: its tunnel endpoint for each VNI it carries, and the
/// MACs behind its local ports in each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// Per VNI, this host's tunnel endpoint.
    pub vteps: BTreeMap<Vni, VtepRecord>,
    /// Per VNI, the MACs behind this host (claimed behind the VNI's endpoint).
    pub macs: BTreeMap<Vni, BTreeSet<MacAddr>>,
}

/// One write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Put `value` at `key` (under this host's lease).
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: String,
    },
}

/// What this host has written and the sequence numbers it has used.
#[derive(Debug)]
pub struct Publisher {
    prefix: String,
    own: HostId,
    vteps: BTreeMap<Vni, VtepRecord>,
    claims: BTreeMap<(Vni, MacAddr), MacClaim>,
    /// Claims that were written and went with the lease: written again with the same
    /// number, never a higher one (they did not move here again).
    lost: BTreeMap<(Vni, MacAddr), MacClaim>,
}

impl Publisher {
    /// A publisher for host `own` writing under `prefix`.
    pub fn new(prefix: &str, own: HostId) -> Publisher {
        Publisher {
            prefix: prefix.to_string(),
            own,
            vteps: BTreeMap::new(),
            claims: BTreeMap::new(),
            lost: BTreeMap::new(),
        }
    }

    /// Everything written is gone from the store (the lease expired or was replaced): the
    /// next [`Publisher::plan`] writes it all again.
    pub fn forget_written(&mut self) {
        self.vteps.clear();
        let claims = std::mem::take(&mut self.claims);
        self.lost.extend(claims);
    }

    /// Drops lost claims of MACs no longer behind this host: if one comes back, it moved
    /// here again.
    pub fn prune_lost(&mut self, desired: &Desired) {
        self.lost
            .retain(|(vni, mac), _| desired.macs.get(vni).is_some_and(|m| m.contains(mac)));
    }

    /// Claims written.
    pub fn claims(&self) -> usize {
        self.claims.len()
    }

    /// Up to `limit` writes from what was written to `desired`, deletions first (a MAC
    /// that left frees its claim before others are added), then endpoints, then claims.
    /// [`Publisher::written`] records them once the store took them.
    pub fn plan(&self, desired: &Desired, view: &View, limit: usize) -> Vec<Write> {
        let mut writes = Vec::new();
        let want_claim = |vni: &Vni, mac: &MacAddr| {
            desired.vteps.contains_key(vni)
                && desired.macs.get(vni).is_some_and(|m| m.contains(mac))
        };
        for (vni, mac) in self.claims.keys() {
            if writes.len() >= limit {
                return writes;
            }
            if !want_claim(vni, mac) {
                writes.push(Write::Delete {
                    key: self.mac_key(*vni, *mac),
                });
            }
        }
        for vni in self.vteps.keys() {
            if writes.len() >= limit {
                return writes;
            }
            if !desired.vteps.contains_key(vni) {
                writes.push(Write::Delete {
                    key: self.vtep_key(*vni),
                });
            }
        }
        for (vni, record) in &desired.vteps {
            if writes.len() >= limit {
                return writes;
            }
            if self.vteps.get(vni) != Some(record) {
                writes.push(Write::Put {
                    key: self.vtep_key(*vni),
                    value: record.render(),
                });
            }
        }
        for (vni, macs) in &desired.macs {
            let Some(vtep) = desired.vteps.get(vni) else {
                continue;
            };
            for mac in macs {
                if writes.len() >= limit {
                    return writes;
                }
                let claim = match self.claims.get(&(*vni, *mac)) {
                    // Already claimed: the same number, behind the endpoint now in use.
                    Some(c) if c.vtep == vtep.addr => continue,
                    Some(c) => MacClaim {
                        vtep: vtep.addr,
                        seq: c.seq,
                    },
                    None => MacClaim {
                        vtep: vtep.addr,
                        seq: match self.lost.get(&(*vni, *mac)) {
                            Some(c) => c.seq,
                            None => view
                                .others_highest_seq(*vni, *mac)
                                .map_or(0, |theirs| theirs.saturating_add(1)),
                        },
                    },
                };
                writes.push(Write::Put {
                    key: self.mac_key(*vni, *mac),
                    value: claim.render(),
                });
            }
        }
        writes
    }

    /// Records writes the store took.
    pub fn written(&mut self, writes: &[Write]) {
        for w in writes {
            let (key, value) = match w {
                Write::Put { key, value } => (key, Some(value)),
                Write::Delete { key } => (key, None),
            };
            match (Key::parse(&self.prefix, key.as_bytes()), value) {
                (Ok(Key::Vtep { vni, .. }), Some(v)) => {
                    if let Ok(r) = VtepRecord::parse(v.as_bytes()) {
                        self.vteps.insert(vni, r);
                    }
                }
                (Ok(Key::Vtep { vni, .. }), None) => {
                    self.vteps.remove(&vni);
                }
                (Ok(Key::Mac { vni, mac, .. }), Some(v)) => {
                    if let Ok(c) = MacClaim::parse(v.as_bytes()) {
                        self.claims.insert((vni, mac), c);
                        self.lost.remove(&(vni, mac));
                    }
                }
                (Ok(Key::Mac { vni, mac, .. }), None) => {
                    self.claims.remove(&(vni, mac));
                    self.lost.remove(&(vni, mac));
                }
                (Err(_), _) => {}
            }
        }
    }

    fn vtep_key(&self, vni: Vni) -> String {
        Key::Vtep {
            vni,
            host: self.own.clone(),
        }
        .render(&self.prefix)
    }

    fn mac_key(&self, vni: Vni, mac: MacAddr) -> String {
        Key::Mac {
            vni,
            mac,
            host: self.own.clone(),
        }
        .render(&self.prefix)
    }
}
