//! `port_add`, `port_del`, `port_set`, `port_list`, `port_show`.

use weft_control::response::{PortCounters as PortCountersInfo, PortInfo};
use weft_control::rule::{ActionSpec, RuleSpec};
use weft_control::state::{PortKind, PortSettings, PortState, SwitchState};
use weft_control::{ControlError, ErrorKind, Response};
use weft_switch::MAX_PORTS;
use weft_switch::{CounterClass, PortDevice};

use super::build::port_open_error;
use super::{limit, mtu, no_port, Controller, PortRt};
use crate::devices;
use crate::model::{translate, validate};

/// True when `rule` names port `port`.
pub(super) fn rule_uses_port(rule: &RuleSpec, port: &str) -> bool {
    rule.matches.in_port.as_deref() == Some(port)
        || rule
            .actions
            .iter()
            .any(|a| matches!(a, ActionSpec::Output(p) if p == port))
}

/// A port's counters as the protocol shows them: the switch's, the drops its device counted
/// itself (as `port_<reason>`), and the device's other counters.
fn counters_info(rt: &PortRt) -> PortCountersInfo {
    let device = DeviceCounters::read(rt.device.device.as_ref());
    let mut info = snapshot_info(&rt.counters(), &device.drops);
    info.device = device.events.into_iter().filter(|(_, n)| *n > 0).collect();
    info
}

/// What a port's device counted itself, read through its [`PortDevice`] whatever its kind.
#[derive(Debug, Clone, Default)]
pub struct DeviceCounters {
    /// Drops, each as `port_<reason>`, zeros included.
    pub drops: Vec<(String, u64)>,
    /// Everything else it counted, zeros included.
    pub events: Vec<(String, u64)>,
}

impl DeviceCounters {
    /// Reads every counter of `device`.
    pub fn read(device: &dyn PortDevice) -> DeviceCounters {
        let mut out = DeviceCounters::default();
        device.visit_counters(&mut |c| match c.class {
            CounterClass::Drop => out.drops.push((format!("port_{}", c.name), c.value)),
            CounterClass::Event => out.events.push((c.name.to_string(), c.value)),
        });
        out
    }
}

/// Counters read at once, as the protocol shows them.
pub(super) fn snapshot_info(
    snap: &weft_switch::PortCountersSnapshot,
    device_drops: &[(String, u64)],
) -> PortCountersInfo {
    PortCountersInfo {
        rx_packets: snap.rx_packets,
        rx_bytes: snap.rx_bytes,
        tx_packets: snap.tx_packets,
        tx_bytes: snap.tx_bytes,
        drops: snap
            .drops
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.name().to_string(), *n))
            .chain(device_drops.iter().filter(|(_, n)| *n > 0).cloned())
            .collect(),
        device: std::collections::BTreeMap::new(),
    }
}

/// `port show`'s view of a port; `overlay`: the switch's overlay port with the smallest
/// MTU, to warn a port whose frames are larger.
fn port_info(
    switch: &SwitchState,
    port: &PortState,
    rt: Option<&PortRt>,
    overlay: Option<&mtu::OverlayLimit>,
) -> PortInfo {
    // The device's status once: a vhost-user port's snapshots every queue's counters.
    let status = rt.map(|r| r.device.device.status()).unwrap_or_default();
    let mtu = rt.map_or_else(
        || devices::configured_mtu(&port.kind),
        |r| r.device.device.mtu(),
    );
    let warnings = rt
        .filter(|r| r.failed.is_none())
        .and_then(|_| mtu::warning(&port.kind, mtu, status.peer_mtu, overlay))
        .into_iter()
        .collect();
    PortInfo {
        switch: switch.name.clone(),
        name: port.name.clone(),
        kind: port.kind.clone(),
        options: port.options.clone(),
        mtu,
        offloads: status.words(),
        failed: rt.and_then(|r| r.failed.clone()),
        attached: rt.and_then(|r| r.device.origin.as_ref().map(devices::Origin::describe)),
        guest_mtu: status.peer_mtu,
        warnings,
    }
}

impl Controller {
    pub(super) fn port_add(
        &mut self,
        switch: &str,
        name: String,
        kind: PortKind,
        options: PortSettings,
    ) -> Result<Response, ControlError> {
        let conf = self.switch_conf(switch)?;
        let port = PortState {
            name,
            kind,
            options,
        };
        validate::port(&port)?;
        self.directory_available(&port.kind)?;
        if conf.ports.iter().any(|p| p.name == port.name) {
            return Err(ControlError::exists(format!(
                "port {:?} already exists on switch {switch:?}",
                port.name
            )));
        }
        if conf.ports.len() >= MAX_PORTS {
            return Err(limit(format!(
                "switch {switch:?} already has {MAX_PORTS} ports"
            )));
        }
        let next = self.with_switch(switch, |s| {
            s.ports.push(port.clone());
            Ok(())
        })?;
        let opts = translate::port_options(&port.options)?;
        let ctx = self.open_ctx(switch);
        devices::check(ctx, &port.name, &port.kind)
            .map_err(|e| ControlError::invalid(e.to_string()))?;
        self.vhost_socket_free(switch, &port)?;
        let device = devices::open(ctx, &port.name, &port.kind)
            .map_err(|e| port_open_error(&port.name, &e.to_string()))?;
        self.commit_then(next, |c| {
            let workers = c.switch_rt(switch)?.workers.clone();
            let handle = device.handle.clone();
            let halves = super::build::lane_halves(&port.name, device.lanes, workers.len())?;
            let mut id = None;
            let mut counters = Vec::with_capacity(workers.len());
            for (&worker, halves) in workers.iter().zip(halves) {
                let port_name = port.name.clone();
                let opts = opts.clone();
                let (lane_id, lane_counters) = c
                    .pool
                    .on_switch(worker, switch, move |sw, _| {
                        let id = sw.add_port(&port_name, halves.rx, halves.tx, opts)?;
                        Ok::<_, weft_switch::SwitchError>((id, sw.port_counters(id)))
                    })?
                    .map_err(|e| super::internal(format!("adding port: {e}")))?;
                if id.is_some_and(|first| first != lane_id) {
                    return Err(super::internal(
                        "the lanes of a switch gave a port different ids",
                    ));
                }
                id = Some(lane_id);
                counters.push(
                    lane_counters.ok_or_else(|| super::internal("a new port has no counters"))?,
                );
            }
            let id = id.ok_or_else(|| super::internal("a switch has no lane"))?;
            if let Some(rt) = c.switches.get_mut(switch) {
                rt.ports.insert(
                    port.name.clone(),
                    PortRt {
                        id,
                        counters,
                        failed: None,
                        device: handle,
                    },
                );
            }
            Ok(())
        })?;
        self.rebalance_or_log();
        Ok(Response::Done)
    }

    /// The socket of every vhost-user port of `state` (by directory identity and name), with
    /// its port as `switch:port`. A port whose socket is refused now (a restored port kept
    /// failed) has none.
    fn vhost_sockets(
        &self,
        state: &weft_control::state::State,
    ) -> Vec<(crate::socket_dirs::SocketName, String)> {
        let mut found = Vec::new();
        for s in &state.switches {
            for p in &s.ports {
                if let Some(Ok(socket)) =
                    devices::port_socket(self.open_ctx(&s.name), &p.name, &p.kind)
                {
                    found.push((socket, format!("{}:{}", s.name, p.name)));
                }
            }
        }
        found
    }

    /// Refuses a vhost-user port whose socket another port listens on: opening it would take
    /// the socket over, and deleting either port would remove it. Sockets are compared by
    /// their directory's device and inode and their name, whatever the path's spelling.
    fn vhost_socket_free(&self, switch: &str, port: &PortState) -> Result<(), ControlError> {
        let Some(wanted) = devices::port_socket(self.open_ctx(switch), &port.name, &port.kind)
        else {
            return Ok(());
        };
        let wanted = wanted
            .map_err(|e| ControlError::invalid(e.to_string()))?
            .key();
        for (found, owner) in self.vhost_sockets(&self.state) {
            if found.key() == wanted {
                return Err(ControlError::exists(format!(
                    "socket {} is port {owner}'s",
                    found.path().display()
                ))
                .with_hint("give the new port another socket path"));
            }
        }
        Ok(())
    }

    /// Refuses a configuration in which two vhost-user ports share a socket.
    pub(super) fn vhost_sockets_distinct(
        &self,
        state: &weft_control::state::State,
    ) -> Result<(), ControlError> {
        let mut seen = std::collections::HashMap::new();
        for (found, this) in self.vhost_sockets(state) {
            if let Some(other) = seen.insert(found.key(), this.clone()) {
                return Err(ControlError::invalid(format!(
                    "ports {other} and {this} both name socket {}",
                    found.path().display()
                ))
                .with_hint("give each vhost-user port its own socket"));
            }
        }
        Ok(())
    }

    pub(super) fn port_del(&mut self, switch: &str, name: &str) -> Result<Response, ControlError> {
        let conf = self.switch_conf(switch)?;
        if !conf.ports.iter().any(|p| p.name == name) {
            return Err(no_port(switch, name));
        }
        let rt = self.switch_rt(switch)?;
        let users: Vec<String> = conf
            .rules
            .iter()
            .zip(&rt.rule_ids)
            .filter(|(r, _)| rule_uses_port(r, name))
            .map(|(_, id)| id.0.to_string())
            .collect();
        if !users.is_empty() {
            return Err(ControlError::new(
                ErrorKind::Invalid,
                format!(
                    "port {name:?} is named by rule(s) {} of switch {switch:?}",
                    users.join(", ")
                ),
            )
            .with_hint("delete those rules first (weft rule del)"));
        }
        // Static FDB entries on the port go with it (the switch forgets them too).
        let next = self.with_switch(switch, |s| {
            s.ports.retain(|p| p.name != name);
            s.static_macs.retain(|m| m.port != name);
            Ok(())
        })?;
        self.commit_then(next, |c| c.detach_port(switch, name))?;
        self.rebalance_or_log();
        self.drop_if_emptied_on_demand(switch);
        Ok(Response::Done)
    }

    pub(super) fn port_set(
        &mut self,
        switch: &str,
        name: &str,
        options: PortSettings,
    ) -> Result<Response, ControlError> {
        let opts = translate::port_options(&options)?;
        let id = self.port_rt(switch, name)?.id;
        let next = self.with_switch(switch, |s| {
            let p = s
                .ports
                .iter_mut()
                .find(|p| p.name == name)
                .ok_or_else(|| no_port(switch, name))?;
            p.options = options;
            Ok(())
        })?;
        self.commit_then(next, |c| {
            let workers = c.switch_rt(switch)?.workers.clone();
            c.pool
                .on_lanes(&workers, switch, move |sw, _| {
                    sw.set_port_options(id, opts.clone())
                })?
                .into_iter()
                .collect::<Result<Vec<()>, _>>()
                .map(drop)
                .map_err(|e| super::internal(format!("setting port options: {e}")))
        })?;
        Ok(Response::Done)
    }

    pub(super) fn port_list(&self, switch: Option<&str>) -> Result<Response, ControlError> {
        let switches: Vec<&SwitchState> = match switch {
            Some(name) => vec![self.switch_conf(name)?],
            None => self.state.switches.iter().collect(),
        };
        let mut ports = Vec::new();
        for s in switches {
            let rt = self.switch_rt(&s.name)?;
            let overlay = mtu::overlay_limit(s, &rt.ports);
            for p in &s.ports {
                ports.push(port_info(s, p, rt.ports.get(&p.name), overlay.as_ref()));
            }
        }
        Ok(Response::Ports { ports })
    }

    pub(super) fn port_show(&self, switch: &str, name: &str) -> Result<Response, ControlError> {
        let conf = self.switch_conf(switch)?;
        let port = conf
            .ports
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| no_port(switch, name))?;
        let rt = self.port_rt(switch, name)?;
        let overlay = mtu::overlay_limit(conf, &self.switch_rt(switch)?.ports);
        Ok(Response::Port {
            port: port_info(conf, port, Some(rt), overlay.as_ref()),
            counters: counters_info(rt),
        })
    }
}
