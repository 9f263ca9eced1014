//! The control plane's side of the directory: which VXLAN ports take part and what this
//! host has behind them (read for the directory client every publish interval), and
//! `directory_status`.

use std::collections::BTreeSet;
use std::sync::Arc;

use weft_control::response::DirectoryStatus;
use weft_control::state::{PortKind, VlanMode};
use weft_control::{ControlError, Response};
use weft_directory::{Desired, VtepRecord};
use weft_overlay::RemoteFdbHandle;
use weft_packet::{MacAddr, Vni};
use weft_switch::PortId;

use super::Controller;
use crate::directory::DirectoryLink;

/// A running VXLAN port that takes part in the directory.
#[derive(Clone)]
pub struct DirectoryPort {
    /// `switch:port`, for logs.
    pub name: String,
    /// Its VNI.
    pub vni: Vni,
    /// Its remote FDB and flood list.
    pub fdb: RemoteFdbHandle,
}

impl Controller {
    /// Connects the control plane to the directory client.
    pub fn set_directory(&mut self, link: Arc<DirectoryLink>) {
        self.directory = Some(link);
    }

    /// Refuses a port that needs the directory when weftd has none.
    pub(super) fn directory_available(&self, kind: &PortKind) -> Result<(), ControlError> {
        let wants = matches!(
            kind,
            PortKind::Vxlan {
                directory: true,
                ..
            }
        );
        if wants && self.directory.is_none() {
            return Err(ControlError::invalid(
                "this VXLAN port uses the directory (--directory), and weftd has none",
            )
            .with_hint(
                "add a [directory] table with the etcd endpoints to weftd's configuration \
                 (see docs/weftd.toml) and restart it, or list the remotes with --remote",
            ));
        }
        Ok(())
    }

    /// `directory_status`.
    pub(super) fn directory_status(&self) -> Response {
        let Some(link) = &self.directory else {
            return Response::Directory {
                status: DirectoryStatus::default(),
            };
        };
        let s = link.client.status();
        Response::Directory {
            status: DirectoryStatus {
                configured: true,
                endpoints: link.endpoints.clone(),
                host: link.host.clone(),
                connected: s.connected,
                revision: s.revision,
                lease: s.lease,
                vnis: link.vnis(),
                vteps: s.vteps as u64,
                macs: s.macs as u64,
                published: s.published as u64,
                writes: s.writes,
                resyncs: s.resyncs,
                sessions: s.sessions,
                refused: s.refused.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
                last_error: s.last_error,
            },
        }
    }

    /// The running VXLAN ports with `--directory`, and what this host has behind them:
    /// each port's tunnel endpoint and the MACs its switch has learned (or was given) on
    /// the port's VLANs, on any port but an overlay port.
    pub fn directory_snapshot(&self) -> (Vec<DirectoryPort>, Desired) {
        let mut ports = Vec::new();
        let mut desired = Desired::default();
        for conf in &self.state.switches {
            let Ok(rt) = self.switch_rt(&conf.name) else {
                continue;
            };
            // Ports whose MACs are someone else's: the overlay's.
            let overlay: BTreeSet<PortId> = conf
                .ports
                .iter()
                .filter(|p| matches!(p.kind, PortKind::Vxlan { .. } | PortKind::TcpLink { .. }))
                .filter_map(|p| rt.ports.get(&p.name).map(|r| r.id))
                .collect();
            for p in &conf.ports {
                let PortKind::Vxlan {
                    local,
                    vni,
                    port,
                    directory: true,
                    ..
                } = &p.kind
                else {
                    continue;
                };
                let Some(fdb) = rt
                    .ports
                    .get(&p.name)
                    .and_then(|r| r.device.remote_fdb.clone())
                else {
                    continue; // not open (failed)
                };
                let vtep = VtepRecord {
                    addr: *local,
                    port: port.unwrap_or(weft_packet::vxlan::VXLAN_PORT),
                };
                desired.vteps.insert(*vni, vtep);
                let macs = self.local_macs(&conf.name, rt.home(), &overlay, &p.options.vlan);
                desired.macs.entry(*vni).or_default().extend(macs);
                ports.push(DirectoryPort {
                    name: format!("{}:{}", conf.name, p.name),
                    vni: *vni,
                    fdb,
                });
            }
        }
        (ports, desired)
    }

    /// The MACs switch `switch` has behind its ports other than `overlay`, on the VLANs of
    /// `vlan` (a plain port carries them all).
    fn local_macs(
        &self,
        switch: &str,
        home: usize,
        overlay: &BTreeSet<PortId>,
        vlan: &VlanMode,
    ) -> Vec<MacAddr> {
        let carried: Option<BTreeSet<u16>> = match vlan {
            VlanMode::Plain => None,
            VlanMode::Access { vlan } => Some(BTreeSet::from([*vlan])),
            VlanMode::Trunk { vlans, native } => {
                Some(vlans.iter().copied().chain(*native).collect())
            }
        };
        let overlay = overlay.clone();
        self.pool
            .on_switch(home, switch, move |sw, now| {
                sw.sync_lanes(now);
                sw.fdb()
                    .entries()
                    .filter(|e| !e.is_expired(now) && !overlay.contains(&e.port))
                    .filter(|e| carried.as_ref().is_none_or(|c| c.contains(&e.vlan)))
                    .filter(|e| e.mac.is_unicast())
                    .map(|e| e.mac)
                    .collect()
            })
            .unwrap_or_default()
    }
}
