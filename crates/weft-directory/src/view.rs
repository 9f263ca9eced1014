//! [`View`]: what the directory says about the VNIs this host carries, built from the
//! store's entries in any order, and what changed with each entry.
//!
//! A MAC may be claimed by several hosts at once (it moved, and the old host has not yet
//! let go). Every reader picks the same winner: the highest sequence number, then the lower
//! tunnel endpoint address (RFC 7432 §15.1), then the lower host name. The result does not
//! depend on the order entries arrive in, so every host converges on the same answer.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use weft_packet::{MacAddr, Vni};

use crate::error::{Refusal, Refusals};
use crate::keys::{HostId, Key};
use crate::records::{MacClaim, VtepRecord};

/// One change read from the store.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    /// A key was written with a value.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// A key was deleted (or its lease expired).
    Delete {
        /// The key.
        key: &'a [u8],
    },
}

/// What one entry changed for its VNI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The VNI's set of remote tunnel endpoints changed.
    Remotes(Vni),
    /// Where frames for `mac` go changed: `Some(vtep)` to a remote endpoint, `None` no
    /// remote one (unknown, or this host won it).
    Mac(Vni, MacAddr, Option<IpAddr>),
}

/// The entries of one VNI.
#[derive(Debug, Default)]
struct VniState {
    vteps: BTreeMap<HostId, VtepRecord>,
    claims: HashMap<MacAddr, Vec<(HostId, MacClaim)>>,
}

impl VniState {
    /// The winning claim for `mac`.
    fn winner(&self, mac: MacAddr) -> Option<&(HostId, MacClaim)> {
        self.claims.get(&mac)?.iter().max_by(|(ha, a), (hb, b)| {
            (a.seq, Reverse(a.vtep), Reverse(ha)).cmp(&(b.seq, Reverse(b.vtep), Reverse(hb)))
        })
    }
}

/// The directory as this host sees it: the VNIs it carries, bounded.
#[derive(Debug)]
pub struct View {
    prefix: String,
    own: HostId,
    carried: HashSet<Vni>,
    vnis: HashMap<Vni, VniState>,
    entries: usize,
    max_entries: usize,
    refusals: Refusals,
}

impl View {
    /// An empty view for host `own`, reading keys under `prefix`, of VNIs `carried`,
    /// holding at most `max_entries` entries.
    pub fn new(prefix: &str, own: HostId, carried: HashSet<Vni>, max_entries: usize) -> View {
        View {
            prefix: prefix.to_string(),
            own,
            carried,
            vnis: HashMap::new(),
            entries: 0,
            max_entries,
            refusals: Refusals::default(),
        }
    }

    /// Applies one entry; the change it made, if any. A refused entry is counted and
    /// changes nothing; an entry of a VNI not carried is skipped.
    pub fn apply(&mut self, entry: Entry<'_>) -> Option<Change> {
        match self.try_apply(entry) {
            Ok(change) => change,
            Err(why) => {
                self.refusals.count(why);
                None
            }
        }
    }

    fn try_apply(&mut self, entry: Entry<'_>) -> Result<Option<Change>, Refusal> {
        let raw_key = match entry {
            Entry::Put { key, .. } | Entry::Delete { key } => key,
        };
        let key = match (Key::parse(&self.prefix, raw_key), entry) {
            (Ok(key), _) => key,
            // A key that never parsed was never stored: deleting it changes nothing, and
            // it was counted when it was written.
            (Err(_), Entry::Delete { .. }) => return Ok(None),
            (Err(why), Entry::Put { .. }) => return Err(why),
        };
        if !self.carried.contains(&key.vni()) {
            return Ok(None);
        }
        match (key, entry) {
            (Key::Vtep { vni, host }, Entry::Put { value, .. }) => {
                let record = VtepRecord::parse(value)?;
                let is_new = !self.state(vni).vteps.contains_key(&host);
                self.reserve(is_new)?;
                let state = self.vnis.entry(vni).or_default();
                let old = state.vteps.insert(host.clone(), record);
                let changed = old != Some(record) && host != self.own;
                Ok(changed.then_some(Change::Remotes(vni)))
            }
            (Key::Vtep { vni, host }, Entry::Delete { .. }) => {
                let Some(state) = self.vnis.get_mut(&vni) else {
                    return Ok(None);
                };
                let removed = state.vteps.remove(&host).is_some();
                if removed {
                    self.entries -= 1;
                }
                self.forget_if_empty(vni);
                Ok((removed && host != self.own).then_some(Change::Remotes(vni)))
            }
            (Key::Mac { vni, mac, host }, Entry::Put { value, .. }) => {
                let claim = MacClaim::parse(value)?;
                let before = self.remote_owner(vni, mac);
                let is_new = !self
                    .state(vni)
                    .claims
                    .get(&mac)
                    .is_some_and(|cs| cs.iter().any(|(h, _)| *h == host));
                self.reserve(is_new)?;
                let claims = self
                    .vnis
                    .entry(vni)
                    .or_default()
                    .claims
                    .entry(mac)
                    .or_default();
                match claims.iter_mut().find(|(h, _)| *h == host) {
                    Some(slot) => slot.1 = claim,
                    None => claims.push((host, claim)),
                }
                Ok(self.mac_change(vni, mac, before))
            }
            (Key::Mac { vni, mac, host }, Entry::Delete { .. }) => {
                let before = self.remote_owner(vni, mac);
                let Some(state) = self.vnis.get_mut(&vni) else {
                    return Ok(None);
                };
                let Some(claims) = state.claims.get_mut(&mac) else {
                    return Ok(None);
                };
                let len = claims.len();
                claims.retain(|(h, _)| *h != host);
                if claims.len() < len {
                    self.entries -= 1;
                }
                if claims.is_empty() {
                    state.claims.remove(&mac);
                }
                self.forget_if_empty(vni);
                Ok(self.mac_change(vni, mac, before))
            }
        }
    }

    /// Room for one more entry when `is_new`.
    fn reserve(&mut self, is_new: bool) -> Result<(), Refusal> {
        if !is_new {
            return Ok(());
        }
        if self.entries >= self.max_entries {
            return Err(Refusal::OverCapacity);
        }
        self.entries += 1;
        Ok(())
    }

    fn state(&self, vni: Vni) -> &VniState {
        static EMPTY: std::sync::OnceLock<VniState> = std::sync::OnceLock::new();
        self.vnis
            .get(&vni)
            .unwrap_or_else(|| EMPTY.get_or_init(VniState::default))
    }

    fn forget_if_empty(&mut self, vni: Vni) {
        if self
            .vnis
            .get(&vni)
            .is_some_and(|s| s.vteps.is_empty() && s.claims.is_empty())
        {
            self.vnis.remove(&vni);
        }
    }

    fn mac_change(&self, vni: Vni, mac: MacAddr, before: Option<IpAddr>) -> Option<Change> {
        let after = self.remote_owner(vni, mac);
        (after != before).then_some(Change::Mac(vni, mac, after))
    }

    /// The remote tunnel endpoint frames for `mac` go to: the winning claim's, unless this
    /// host won it (or nobody claims it).
    pub fn remote_owner(&self, vni: Vni, mac: MacAddr) -> Option<IpAddr> {
        let (host, claim) = self.state(vni).winner(mac)?;
        (*host != self.own).then_some(claim.vtep)
    }

    /// The highest sequence number another host claims `mac` with: a MAC that appears
    /// here must be claimed with one more, so that it wins.
    pub fn others_highest_seq(&self, vni: Vni, mac: MacAddr) -> Option<u32> {
        let claims = self.state(vni).claims.get(&mac)?;
        claims
            .iter()
            .filter(|(h, _)| *h != self.own)
            .map(|(_, c)| c.seq)
            .max()
    }

    /// The VNI's remote tunnel endpoints (every host's but this one's), sorted, without
    /// duplicates.
    pub fn remotes(&self, vni: Vni) -> Vec<VtepRecord> {
        let mut all: Vec<VtepRecord> = self
            .state(vni)
            .vteps
            .iter()
            .filter(|(h, _)| **h != self.own)
            .map(|(_, r)| *r)
            .collect();
        all.sort_by_key(|r| (r.addr, r.port));
        all.dedup();
        all
    }

    /// Every MAC of the VNI that lives behind a remote endpoint, sorted by MAC.
    pub fn remote_macs(&self, vni: Vni) -> Vec<(MacAddr, IpAddr)> {
        let state = self.state(vni);
        let mut all: Vec<(MacAddr, IpAddr)> = state
            .claims
            .keys()
            .filter_map(|mac| Some((*mac, self.remote_owner(vni, *mac)?)))
            .collect();
        all.sort_by_key(|(mac, _)| *mac);
        all
    }

    /// The VNIs carried.
    pub fn carried(&self) -> &HashSet<Vni> {
        &self.carried
    }

    /// Entries held (tunnel endpoints and MAC claims, this host's included).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// (other hosts' tunnel endpoints, MAC claims of every host) held.
    pub fn entries_by_kind(&self) -> (usize, usize) {
        let all: usize = self.vnis.values().map(|s| s.vteps.len()).sum();
        let own = self
            .vnis
            .values()
            .filter(|s| s.vteps.contains_key(&self.own))
            .count();
        (all - own, self.entries - all)
    }

    /// Entries refused so far.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }
}
