//! `remote_mac_add`, `remote_mac_del`, `remote_mac_show`: a VXLAN port's remote FDB (MAC →
//! remote endpoint). Static entries are part of the port's kind in the state file and are
//! changed in the running port's table in place (the port is not reopened).

use weft_control::response::RemoteMacEntry;
use weft_control::state::{PortKind, RemoteMac};
use weft_control::{ControlError, Response};
use weft_overlay::RemoteFdbHandle;

use super::{no_port, Controller};
use crate::devices::VxlanDevice;
use crate::model::translate;

fn not_vxlan(switch: &str, port: &str) -> ControlError {
    ControlError::invalid(format!(
        "port {port:?} on switch {switch:?} is not a VXLAN port: only VXLAN ports have a \
         remote FDB"
    ))
    .with_hint("use weft fdb for the switch's own FDB")
}

impl Controller {
    /// The port's static remote MACs as configured.
    fn remote_macs(&self, switch: &str, port: &str) -> Result<&[RemoteMac], ControlError> {
        let conf = self
            .switch_conf(switch)?
            .ports
            .iter()
            .find(|p| p.name == port)
            .ok_or_else(|| no_port(switch, port))?;
        match &conf.kind {
            PortKind::Vxlan { remote_macs, .. } => Ok(remote_macs),
            _ => Err(not_vxlan(switch, port)),
        }
    }

    /// The running port's remote FDB; `None` when its device is not open (a failed port).
    fn remote_fdb(
        &self,
        switch: &str,
        port: &str,
    ) -> Result<Option<RemoteFdbHandle>, ControlError> {
        let rt = self.port_rt(switch, port)?;
        Ok(rt
            .keep
            .as_ref()
            .and_then(|k| k.downcast_ref::<VxlanDevice>())
            .map(|d| d.fdb.clone()))
    }

    /// Changes the port's `remote_macs` in a copy of the configuration (validated).
    fn with_remote_macs(
        &self,
        switch: &str,
        port: &str,
        change: impl FnOnce(&mut Vec<RemoteMac>),
    ) -> Result<weft_control::state::State, ControlError> {
        self.with_switch(switch, |s| {
            let conf = s
                .ports
                .iter_mut()
                .find(|p| p.name == port)
                .ok_or_else(|| no_port(switch, port))?;
            match &mut conf.kind {
                PortKind::Vxlan { remote_macs, .. } => {
                    change(remote_macs);
                    Ok(())
                }
                _ => Err(not_vxlan(switch, port)),
            }
        })
    }

    pub(super) fn remote_mac_add(
        &mut self,
        switch: &str,
        port: &str,
        mac: &str,
        remote: &str,
    ) -> Result<Response, ControlError> {
        let addr = translate::unicast_mac(mac)?;
        self.remote_macs(switch, port)?;
        let entry = RemoteMac {
            mac: addr.to_string(),
            remote: remote.to_string(),
        };
        // Validation (of the whole port, with this entry) says whether the endpoint is one
        // the port may send to; it normalizes nothing, so the parse below cannot fail.
        let next = self.with_remote_macs(switch, port, |macs| {
            macs.retain(|m| translate::mac(&m.mac).ok() != Some(addr));
            macs.push(entry);
        })?;
        let endpoint = remote.parse().map_err(|_| {
            ControlError::invalid(format!("remote {remote:?} is not an IP address"))
        })?;
        let fdb = self.remote_fdb(switch, port)?;
        self.commit_then(next, |_| match fdb {
            Some(fdb) => fdb
                .insert_static(addr, endpoint)
                .map_err(|e| super::internal(format!("adding the remote MAC: {e}"))),
            None => Ok(()),
        })?;
        Ok(Response::Done)
    }

    pub(super) fn remote_mac_del(
        &mut self,
        switch: &str,
        port: &str,
        mac: &str,
    ) -> Result<Response, ControlError> {
        let addr = translate::mac(mac)?;
        let configured = self
            .remote_macs(switch, port)?
            .iter()
            .any(|m| translate::mac(&m.mac).ok() == Some(addr));
        let fdb = self.remote_fdb(switch, port)?;
        if configured {
            let next = self.with_remote_macs(switch, port, |macs| {
                macs.retain(|m| translate::mac(&m.mac).ok() != Some(addr));
            })?;
            self.commit_then(next, |_| {
                if let Some(fdb) = fdb {
                    fdb.remove(addr);
                }
                Ok(())
            })?;
            return Ok(Response::Done);
        }
        // A learned entry: forget it (it comes back with the next frame from that MAC).
        if fdb.is_some_and(|f| f.remove(addr)) {
            Ok(Response::Done)
        } else {
            Err(ControlError::not_found(format!(
                "no remote FDB entry for {addr} on port {port:?} of switch {switch:?}"
            ))
            .with_hint("list the entries with remote_mac_show (weft remote-mac show)"))
        }
    }

    pub(super) fn remote_mac_show(
        &self,
        switch: &str,
        port: &str,
    ) -> Result<Response, ControlError> {
        let configured = self.remote_macs(switch, port)?;
        let entries = match self.remote_fdb(switch, port)? {
            Some(fdb) => fdb
                .entries()
                .into_iter()
                .map(|(mac, e, age)| RemoteMacEntry {
                    mac: mac.to_string(),
                    remote: e.endpoint.to_string(),
                    is_static: e.is_static,
                    age_secs: age.map(|a| a.as_secs()),
                })
                .collect(),
            // The device is not open: what it would start with.
            None => configured
                .iter()
                .map(|m| RemoteMacEntry {
                    mac: m.mac.clone(),
                    remote: m.remote.clone(),
                    is_static: true,
                    age_secs: None,
                })
                .collect(),
        };
        Ok(Response::RemoteMacs { entries })
    }
}
