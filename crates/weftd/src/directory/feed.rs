//! [`Feed`]: the directory's sink. It keeps what the directory said about each VNI and
//! hands it to every VXLAN port of that VNI: all of it to a port that joins, the changes as
//! they come. The ports' remote FDBs are changed under their own locks, one call per change
//! set, so frames never see a VNI half-updated.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;

use weft_directory::{Sink, VtepRecord};
use weft_overlay::RemoteFdbHandle;
use weft_packet::{MacAddr, Vni};

use crate::control::DirectoryPort;

/// What the directory said about one VNI, and the ports that carry it.
#[derive(Default)]
struct VniFeed {
    remotes: Vec<IpAddr>,
    macs: HashMap<MacAddr, IpAddr>,
    ports: Vec<(String, RemoteFdbHandle)>,
}

/// The directory's sink in weftd.
#[derive(Default)]
pub struct Feed(Mutex<BTreeMap<Vni, VniFeed>>);

impl Feed {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vni, VniFeed>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The VNIs that have ports.
    pub fn vnis(&self) -> Vec<Vni> {
        self.lock()
            .iter()
            .filter(|(_, f)| !f.ports.is_empty())
            .map(|(v, _)| *v)
            .collect()
    }

    /// The ports taking part now: a new one gets everything known for its VNI at once.
    pub fn set_ports(&self, ports: &[DirectoryPort]) {
        let mut vnis = self.lock();
        for feed in vnis.values_mut() {
            feed.ports
                .retain(|(name, _)| ports.iter().any(|p| p.name == *name));
        }
        for p in ports {
            let feed = vnis.entry(p.vni).or_default();
            if feed.ports.iter().any(|(name, _)| *name == p.name) {
                continue;
            }
            load(&p.name, &p.fdb, feed);
            feed.ports.push((p.name.clone(), p.fdb.clone()));
        }
    }
}

/// Gives port `name` everything `feed` knows.
fn load(name: &str, fdb: &RemoteFdbHandle, feed: &VniFeed) {
    set_remotes(name, fdb, &feed.remotes);
    let mut all: Vec<(MacAddr, IpAddr)> = feed.macs.iter().map(|(m, ip)| (*m, *ip)).collect();
    all.sort_unstable();
    fdb.replace_directory(&all);
}

fn set_remotes(name: &str, fdb: &RemoteFdbHandle, remotes: &[IpAddr]) {
    if let Err(e) = fdb.set_directory_remotes(remotes) {
        tracing::warn!(port = name, error = %e, "the directory's endpoints do not fit the port's flood list");
    }
}

impl Sink for Feed {
    fn replace(&self, vni: Vni, remotes: &[VtepRecord], macs: &[(MacAddr, IpAddr)]) {
        let mut vnis = self.lock();
        let feed = vnis.entry(vni).or_default();
        feed.remotes = remotes.iter().map(|r| r.addr).collect();
        feed.macs = macs.iter().copied().collect();
        for (name, fdb) in &feed.ports {
            set_remotes(name, fdb, &feed.remotes);
            fdb.replace_directory(macs);
        }
    }

    fn remotes(&self, vni: Vni, remotes: &[VtepRecord]) {
        let mut vnis = self.lock();
        let feed = vnis.entry(vni).or_default();
        feed.remotes = remotes.iter().map(|r| r.addr).collect();
        for (name, fdb) in &feed.ports {
            set_remotes(name, fdb, &feed.remotes);
        }
    }

    fn macs(&self, vni: Vni, changes: &[(MacAddr, Option<IpAddr>)]) {
        let mut vnis = self.lock();
        let feed = vnis.entry(vni).or_default();
        for (mac, to) in changes {
            match to {
                Some(ip) => feed.macs.insert(*mac, *ip),
                None => feed.macs.remove(mac),
            };
        }
        for (_, fdb) in &feed.ports {
            fdb.apply_directory(changes);
        }
    }
}
