//! `remote_mac_add`, `remote_mac_del`, `remote_mac_show`: a VXLAN port's remote FDB (MAC →
//! remote endpoint). Static entries are part of the port's kind in the state file and are
//! changed in the running port's table in place (the port is not reopened). Directory
//! entries come from the directory, are shown beside them and are not persisted; a static
//! entry overrides one.

use std::net::IpAddr;

use weft_control::response::RemoteMacEntry;
use weft_control::state::{PortKind, RemoteMac, SwitchState};
use weft_control::{ControlError, Response};
use weft_overlay::{EntrySource, RemoteEntry, RemoteFdbHandle};
use weft_packet::MacAddr;

use super::{no_port, Controller};
use crate::model::translate;

fn not_vxlan(switch: &str, port: &str) -> ControlError {
    ControlError::invalid(format!(
        "port {port:?} on switch {switch:?} is not a VXLAN port: only VXLAN ports have a \
         remote FDB"
    ))
    .with_hint("use weft fdb for the switch's own FDB")
}

/// The remote MACs of port `port` in a copy of switch `switch`'s configuration.
fn port_remote_macs<'a>(
    s: &'a mut SwitchState,
    switch: &str,
    port: &str,
) -> Result<&'a mut Vec<RemoteMac>, ControlError> {
    let conf = s
        .ports
        .iter_mut()
        .find(|p| p.name == port)
        .ok_or_else(|| no_port(switch, port))?;
    match &mut conf.kind {
        PortKind::Vxlan { remote_macs, .. } => Ok(remote_macs),
        _ => Err(not_vxlan(switch, port)),
    }
}

/// A static remote MAC checked against its port, ready to go in.
pub(super) struct CheckedRemoteMac {
    switch: String,
    port: String,
    addr: MacAddr,
    entry: RemoteMac,
    /// The running port's remote FDB; `None` when its device is not open.
    fdb: Option<RemoteFdbHandle>,
}

impl CheckedRemoteMac {
    /// Puts the entry in a copy of its switch's configuration, in place of any entry for
    /// the same MAC.
    pub(super) fn stage(&self, s: &mut SwitchState) -> Result<(), ControlError> {
        let macs = port_remote_macs(s, &self.switch, &self.port)?;
        macs.retain(|m| m.mac != self.addr);
        macs.push(self.entry.clone());
        Ok(())
    }

    /// The endpoint. Validation of the staged configuration checks that it is one the
    /// port may send to.
    pub(super) fn endpoint(&self) -> IpAddr {
        self.entry.remote
    }

    /// Puts the entry in the running port's remote FDB; returns the entry it replaced, for
    /// [`CheckedRemoteMac::restore`].
    pub(super) fn install(&self, endpoint: IpAddr) -> Result<Option<RemoteEntry>, ControlError> {
        let Some(fdb) = &self.fdb else {
            return Ok(None);
        };
        let previous = fdb.lookup(self.addr);
        fdb.insert_static(self.addr, endpoint)
            .map_err(|e| super::internal(format!("adding the remote MAC: {e}")))?;
        Ok(previous)
    }

    /// Undoes [`CheckedRemoteMac::install`]: the static or directory entry it replaced
    /// comes back; a learned one is forgotten (the next frame from that MAC teaches it
    /// again).
    pub(super) fn restore(&self, previous: Option<RemoteEntry>) {
        let Some(fdb) = &self.fdb else {
            return;
        };
        match previous {
            Some(e) if e.is_static() => {
                if let Err(e) = fdb.insert_static(self.addr, e.endpoint) {
                    tracing::error!(error = %e, "cannot restore a remote MAC");
                }
            }
            Some(e) if e.source == EntrySource::Directory => {
                fdb.remove(self.addr);
                fdb.apply_directory(&[(self.addr, Some(e.endpoint))]);
            }
            _ => {
                fdb.remove(self.addr);
            }
        }
    }
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
        Ok(rt.device.remote_fdb.clone())
    }

    /// Checks a static remote MAC for a VXLAN port, changing nothing. The endpoint is
    /// checked against the port when the entry is staged and the configuration validated.
    pub(super) fn check_remote_mac(
        &self,
        switch: &str,
        port: &str,
        mac: MacAddr,
        remote: IpAddr,
    ) -> Result<CheckedRemoteMac, ControlError> {
        let addr = translate::unicast_mac(mac)?;
        self.remote_macs(switch, port)?;
        Ok(CheckedRemoteMac {
            switch: switch.to_string(),
            port: port.to_string(),
            addr,
            entry: RemoteMac { mac: addr, remote },
            fdb: self.remote_fdb(switch, port)?,
        })
    }

    pub(super) fn remote_mac_add(
        &mut self,
        switch: &str,
        port: &str,
        mac: MacAddr,
        remote: IpAddr,
    ) -> Result<Response, ControlError> {
        let checked = self.check_remote_mac(switch, port, mac, remote)?;
        let next = self.with_switch(switch, |s| checked.stage(s))?;
        let endpoint = checked.endpoint();
        self.commit_then(next, |_| checked.install(endpoint).map(drop))?;
        Ok(Response::Done)
    }

    pub(super) fn remote_mac_del(
        &mut self,
        switch: &str,
        port: &str,
        addr: MacAddr,
    ) -> Result<Response, ControlError> {
        let configured = self
            .remote_macs(switch, port)?
            .iter()
            .any(|m| m.mac == addr);
        let fdb = self.remote_fdb(switch, port)?;
        if configured {
            let next = self.with_switch(switch, |s| {
                port_remote_macs(s, switch, port)?.retain(|m| m.mac != addr);
                Ok(())
            })?;
            self.commit_then(next, |_| {
                if let Some(fdb) = fdb {
                    fdb.remove(addr);
                }
                Ok(())
            })?;
            return Ok(Response::Done);
        }
        if let Some(e) = fdb.as_ref().and_then(|f| f.lookup(addr)) {
            if e.source == EntrySource::Directory {
                return Err(ControlError::invalid(format!(
                    "the remote FDB entry for {addr} on port {port:?} of switch {switch:?} \
                     comes from the directory: it changes there"
                ))
                .with_hint("a static entry (weft remote-mac add) overrides it"));
            }
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
        only: Option<MacAddr>,
    ) -> Result<Response, ControlError> {
        let configured = self.remote_macs(switch, port)?;
        let mut entries: Vec<RemoteMacEntry> = match self.remote_fdb(switch, port)? {
            // One MAC: a lookup, not a walk of a table that may hold a directory's 100k.
            Some(fdb) if only.is_some() => only
                .and_then(|mac| Some((mac, fdb.lookup(mac)?)))
                .map(|(mac, e)| RemoteMacEntry {
                    mac: mac.to_string(),
                    remote: e.endpoint.to_string(),
                    is_static: e.is_static(),
                    source: e.source.as_str().into(),
                    age_secs: None,
                })
                .into_iter()
                .collect(),
            Some(fdb) => fdb
                .entries()
                .into_iter()
                .map(|(mac, e, age)| RemoteMacEntry {
                    mac: mac.to_string(),
                    remote: e.endpoint.to_string(),
                    is_static: e.is_static(),
                    source: e.source.as_str().into(),
                    age_secs: age.map(|a| a.as_secs()),
                })
                .collect(),
            // The device is not open: what it would start with.
            None => configured
                .iter()
                .map(|m| RemoteMacEntry {
                    mac: m.mac.to_string(),
                    remote: m.remote.to_string(),
                    is_static: true,
                    source: EntrySource::Static.as_str().into(),
                    age_secs: None,
                })
                .collect(),
        };
        if let Some(mac) = only {
            let text = mac.to_string();
            entries.retain(|e| e.mac == text);
        }
        Ok(Response::RemoteMacs { entries })
    }
}
