//! `fdb_show`, `fdb_add`, `fdb_del`, `fdb_flush`.

use std::collections::BTreeMap;

use weft_control::response::FdbEntry;
use weft_control::state::StaticMac;
use weft_control::{ControlError, Response};
use weft_packet::MacAddr;
use weft_switch::{FlushFilter, PortId, Switch};

use super::{no_port, Controller};
use crate::model::translate;

/// Removes the entries selected by port, VLAN and kind; returns how many.
fn flush(sw: &mut Switch, port: Option<PortId>, vlan: Option<u16>, dynamic_only: bool) -> usize {
    let filter = match (port, vlan, dynamic_only) {
        (None, None, false) => Some(FlushFilter::All),
        (None, None, true) => Some(FlushFilter::Dynamic),
        (Some(p), None, false) => Some(FlushFilter::Port(p)),
        (Some(p), None, true) => Some(FlushFilter::DynamicOnPort(p)),
        (None, Some(v), false) => Some(FlushFilter::Vlan(v)),
        _ => None,
    };
    if let Some(filter) = filter {
        return sw.flush_fdb(filter);
    }
    // A combination the FDB has no filter for: select, then remove one by one.
    let selected: Vec<_> = sw
        .fdb()
        .entries()
        .filter(|e| port.is_none_or(|p| e.port == p))
        .filter(|e| vlan.is_none_or(|v| e.vlan == v))
        .filter(|e| !(dynamic_only && e.is_static))
        .map(|e| (e.vlan, e.mac))
        .collect();
    selected
        .into_iter()
        .filter(|(v, m)| sw.remove_mac(*v, *m))
        .count()
}

impl Controller {
    pub(super) fn fdb_show(
        &self,
        switch: &str,
        vlan: Option<u16>,
        port: Option<&str>,
    ) -> Result<Response, ControlError> {
        let rt = self.switch_rt(switch)?;
        let port_id = match port {
            Some(name) => Some(rt.ports.get(name).ok_or_else(|| no_port(switch, name))?.id),
            None => None,
        };
        let names: BTreeMap<PortId, String> =
            rt.ports.iter().map(|(n, p)| (p.id, n.clone())).collect();
        let raw = self.pool.on_switch(rt.home(), switch, move |sw, now| {
            // What the other lanes learned since this one's last batch.
            sw.sync_lanes(now);
            sw.fdb()
                .entries()
                .filter(|e| !e.is_expired(now))
                .filter(|e| vlan.is_none_or(|v| e.vlan == v))
                .filter(|e| port_id.is_none_or(|p| e.port == p))
                .map(|e| (e.vlan, e.mac, e.port, e.is_static, e.age(now)))
                .collect::<Vec<_>>()
        })?;
        let mut entries: Vec<FdbEntry> = raw
            .into_iter()
            .map(|(vlan, mac, port, is_static, age)| FdbEntry {
                vlan,
                mac: mac.to_string(),
                port: names
                    .get(&port)
                    .cloned()
                    .unwrap_or_else(|| port.to_string()),
                is_static,
                age_secs: if is_static {
                    None
                } else {
                    age.map(|a| a.as_secs())
                },
            })
            .collect();
        entries.sort_by(|a, b| (a.vlan, &a.mac).cmp(&(b.vlan, &b.mac)));
        Ok(Response::Fdb { entries })
    }

    pub(super) fn fdb_add(
        &mut self,
        switch: &str,
        vlan: u16,
        mac: MacAddr,
        port: &str,
    ) -> Result<Response, ControlError> {
        let addr = translate::unicast_mac(mac)?;
        translate::fdb_vlan(vlan)?;
        let id = self.port_rt(switch, port)?.id;
        let next = self.with_switch(switch, |s| {
            if let Some(old) = s
                .static_macs
                .iter()
                .find(|m| m.vlan == vlan && m.mac == addr)
            {
                return Err(ControlError::exists(format!(
                    "{addr} in VLAN {vlan} already has a static entry (on port {:?})",
                    old.port
                ))
                .with_hint("delete it first (weft fdb del)"));
            }
            s.static_macs.push(StaticMac {
                vlan,
                mac: addr,
                port: port.to_string(),
            });
            Ok(())
        })?;
        self.commit_then(next, |c| {
            let workers = c.switch_rt(switch)?.workers.clone();
            c.pool
                .on_lanes(&workers, switch, move |sw, _| {
                    sw.add_static_mac(vlan, addr, id)
                })?
                .into_iter()
                .collect::<Result<Vec<()>, _>>()
                .map(drop)
                .map_err(|e| super::internal(format!("adding the static entry: {e}")))
        })?;
        Ok(Response::Done)
    }

    pub(super) fn fdb_del(
        &mut self,
        switch: &str,
        vlan: u16,
        addr: MacAddr,
    ) -> Result<Response, ControlError> {
        translate::fdb_vlan(vlan)?;
        let workers = self.switch_rt(switch)?.workers.clone();
        let is_static = self
            .switch_conf(switch)?
            .static_macs
            .iter()
            .any(|m| m.vlan == vlan && m.mac == addr);
        let remove = move |c: &mut Controller| {
            c.pool
                .on_lanes(&workers, switch, move |sw, _| sw.remove_mac(vlan, addr))
                .map(|removed| removed.contains(&true))
        };
        if is_static {
            let next = self.with_switch(switch, |s| {
                s.static_macs.retain(|m| !(m.vlan == vlan && m.mac == addr));
                Ok(())
            })?;
            self.commit_then(next, |c| remove(c).map(drop))?;
            return Ok(Response::Done);
        }
        if remove(self)? {
            Ok(Response::Done)
        } else {
            Err(ControlError::not_found(format!(
                "no FDB entry for {addr} in VLAN {vlan} on switch {switch:?}"
            ))
            .with_hint("list the entries with fdb_show (weft fdb show)"))
        }
    }

    pub(super) fn fdb_flush(
        &mut self,
        switch: &str,
        port: Option<&str>,
        vlan: Option<u16>,
        dynamic_only: bool,
    ) -> Result<Response, ControlError> {
        let rt = self.switch_rt(switch)?;
        let workers = rt.workers.clone();
        let port_id = match port {
            Some(name) => Some(rt.ports.get(name).ok_or_else(|| no_port(switch, name))?.id),
            None => None,
        };
        if let Some(v) = vlan {
            translate::fdb_vlan(v)?;
        }
        let selects = |m: &StaticMac| {
            !dynamic_only && port.is_none_or(|p| m.port == p) && vlan.is_none_or(|v| m.vlan == v)
        };
        let run = move |c: &mut Controller| {
            c.pool
                .on_lanes(&workers, switch, move |sw, _| {
                    flush(sw, port_id, vlan, dynamic_only)
                })
                .map(drop)
        };
        if self.switch_conf(switch)?.static_macs.iter().any(selects) {
            let next = self.with_switch(switch, |s| {
                s.static_macs.retain(|m| !selects(m));
                Ok(())
            })?;
            self.commit_then(next, run)?;
        } else {
            run(self)?;
        }
        Ok(Response::Done)
    }
}
