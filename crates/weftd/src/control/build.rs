//! Building switches on their workers, taking them down, and moving them between workers.

use std::collections::BTreeMap;
use std::sync::Arc;

use weft_control::rule::RuleSpec;
use weft_control::state::SwitchState;
use weft_control::ControlError;
use weft_packet::MacAddr;
use weft_switch::lanes::{Lane, LaneGroup};
use weft_switch::{
    PortCounters, PortHalves, PortId, PortOptions, RuleId, SwitchConfig, SwitchRegistry,
};

use super::pool::{least_loaded_n, plan_moves};
use super::{internal, Controller, PortFailure, PortRt, SwitchRt};
use crate::devices::{self, Device, FailedPort, OpenContext};
use crate::model::translate;

/// A port's device, or the stand-in of one that failed (with why).
pub(super) struct Opened {
    pub(super) device: Device,
    pub(super) failed: Option<String>,
}

/// Opens the devices of a switch's ports; those that fail get a stand-in and are noted.
pub(super) fn open_or_fail(
    ctx: OpenContext<'_>,
    switch: &SwitchState,
    kept: &mut super::Inherited,
    failures: &mut Vec<PortFailure>,
) -> Vec<Opened> {
    let ctx = switch_ctx(ctx, switch);
    switch
        .ports
        .iter()
        .map(|p| {
            let key = (switch.name.clone(), p.name.clone());
            let device = match kept.remove(&key) {
                Some((carried, fds)) => {
                    devices::adopt(ctx, &p.name, &p.kind, &carried, fds, KEPT_BY_SYSTEMD)
                        .or_else(|e| {
                            tracing::warn!(switch = %switch.name, port = %p.name, error = %e, "the device systemd kept does not fit the port: opening it afresh");
                            devices::open(ctx, &p.name, &p.kind)
                        })
                }
                None => devices::open(ctx, &p.name, &p.kind),
            };
            match device {
                Ok(device) => Opened {
                    device,
                    failed: None,
                },
                Err(e) => {
                    let reason = e.to_string();
                    failures.push(PortFailure {
                        switch: switch.name.clone(),
                        port: p.name.clone(),
                        reason: reason.clone(),
                    });
                    Opened {
                        device: FailedPort::device(&p.kind, switch.settings.lanes),
                        failed: Some(reason),
                    }
                }
            }
        })
        .collect()
}

/// How `port show` says a port's device came from systemd's file descriptor store.
const KEPT_BY_SYSTEMD: &str = "kept by systemd across a restart of weftd, re-attached";

/// What opening the ports of `switch` needs: its lanes.
fn switch_ctx<'a>(ctx: OpenContext<'a>, switch: &SwitchState) -> OpenContext<'a> {
    OpenContext {
        lanes: switch.settings.lanes,
        ..ctx
    }
}

/// The devices of a switch's ports for a takeover: those handed over (taken out of
/// `inherited`) are adopted, the others opened; any failure fails the switch. Devices
/// already taken over are then leaked, not closed: closing one could disturb the device
/// the old weftd goes on serving (a vhost-user connection shut down, a socket file
/// removed), and the process ends at once anyway.
pub(super) fn adopt_all(
    ctx: OpenContext<'_>,
    switch: &SwitchState,
    inherited: &mut super::Inherited,
    from: &str,
) -> Result<Vec<Opened>, ControlError> {
    let ctx = switch_ctx(ctx, switch);
    let mut opened = Vec::new();
    for p in &switch.ports {
        let key = (switch.name.clone(), p.name.clone());
        let device = match inherited.remove(&key) {
            Some((carried, fds)) => devices::adopt(
                ctx,
                &p.name,
                &p.kind,
                &carried,
                fds,
                &format!("taken over from {from}"),
            ),
            None => devices::open(ctx, &p.name, &p.kind),
        };
        match device {
            Ok(device) => opened.push(Opened {
                device,
                failed: None,
            }),
            Err(e) => {
                std::mem::forget(opened);
                let mut reason = e.to_string();
                if matches!(p.kind, weft_control::state::PortKind::AfXdp { .. }) {
                    // The running weftd holds the interface's XDP program and queue until it
                    // exits: an AF_XDP port is not handed over (yet).
                    reason.push_str(
                        "; AF_XDP ports are not handed over by an upgrade: delete the port, \
                         upgrade, and add it again",
                    );
                }
                return Err(port_open_error(
                    &format!("{}:{}", switch.name, p.name),
                    &reason,
                ));
            }
        }
    }
    Ok(opened)
}

/// Opens the devices of `ports`, all or none.
pub(super) fn open_all(
    ctx: OpenContext<'_>,
    ports: &[weft_control::state::PortState],
) -> Result<Vec<Opened>, ControlError> {
    ports
        .iter()
        .map(|p| {
            devices::check(ctx, &p.name, &p.kind)
                .map_err(|e| ControlError::invalid(format!("port {:?}: {e}", p.name)))?;
            devices::open(ctx, &p.name, &p.kind)
                .map(|device| Opened {
                    device,
                    failed: None,
                })
                .map_err(|e| port_open_error(&p.name, &e.to_string()))
        })
        .collect()
}

/// The error for a device that would not open.
pub(super) fn port_open_error(port: &str, reason: &str) -> ControlError {
    ControlError::new(
        weft_control::ErrorKind::System,
        format!("cannot create port {port:?}: {reason}"),
    )
}

/// Where a port's device comes from when a switch is built.
pub(super) enum Source {
    /// Just opened (or a stand-in for one that failed).
    Opened(Opened),
    /// The port of the same name on the switch being rebuilt.
    Reuse,
}

/// What the worker is handed to attach one port.
pub(super) struct PortPlan {
    pub(super) name: String,
    /// `None`: take the halves of the same port of the switch being replaced.
    pub(super) halves: Option<PortHalves>,
    pub(super) options: PortOptions,
}

/// What the worker gives back once a switch is built.
pub(super) struct Built {
    pub(super) ports: Vec<(String, PortId, Arc<PortCounters>)>,
    pub(super) rule_ids: Vec<RuleId>,
    /// Ports of a replaced switch that the new one does not take (to close them).
    pub(super) leftovers: Vec<PortHalves>,
}

/// A port's halves, one per lane, checked to be as many as the switch has lanes.
pub(super) fn lane_halves(
    port: &str,
    halves: Vec<PortHalves>,
    lanes: usize,
) -> Result<Vec<PortHalves>, ControlError> {
    if halves.len() != lanes {
        return Err(internal(format!(
            "port {port:?} was opened for {} lane(s), not {lanes}",
            halves.len()
        )));
    }
    Ok(halves)
}

/// Ports a change added on one lane (name, id, that lane's counters) and rule ids.
pub(super) type LaneAdded = (Vec<(String, PortId, Arc<PortCounters>)>, Vec<RuleId>);

/// A port a change added, with its counters on every lane.
pub(super) type AddedPort = (String, PortId, Vec<Arc<PortCounters>>);

/// What every lane added, merged: each port once with its counters of every lane, and the
/// rule ids. The lanes must agree on every id (they saw the same changes in order).
pub(super) fn merge_lanes(
    lanes: Vec<LaneAdded>,
) -> Result<(Vec<AddedPort>, Vec<RuleId>), ControlError> {
    let mut lanes = lanes.into_iter();
    let (first, rule_ids) = lanes
        .next()
        .ok_or_else(|| internal("a switch has no lane"))?;
    let mut ports: Vec<AddedPort> = first
        .into_iter()
        .map(|(name, id, c)| (name, id, vec![c]))
        .collect();
    for (other, other_rules) in lanes {
        let same_ids = other.len() == ports.len()
            && other
                .iter()
                .zip(&ports)
                .all(|(o, p)| o.0 == p.0 && o.1 == p.1);
        if !same_ids || other_rules != rule_ids {
            return Err(internal(
                "the lanes of a switch gave its ports or rules different ids",
            ));
        }
        for (port, (_, _, c)) in ports.iter_mut().zip(other) {
            port.2.push(c);
        }
    }
    Ok((ports, rule_ids))
}

/// Everything to build one switch, checked and translated on the control side.
pub(super) struct SwitchPlan {
    pub(super) name: String,
    pub(super) config: SwitchConfig,
    /// Take the switch of that name off the worker first, and reuse its ports.
    pub(super) replace: bool,
    pub(super) ports: Vec<PortPlan>,
    pub(super) statics: Vec<(u16, MacAddr, String)>,
    pub(super) rules: Vec<RuleSpec>,
    /// The switch's lane, when it runs on several.
    pub(super) lane: Option<Lane>,
    /// Where the lane hands its upcalls after each batch.
    pub(super) upcall_hub: Option<std::sync::Arc<weft_switch::UpcallHub>>,
}

impl SwitchPlan {
    /// The plan for one lane of `switch` with these halves (one per port, in order; `None`
    /// to reuse the port of the switch being replaced on that lane) and the ports' options
    /// (translated once for all lanes: their clones share each port's storm buckets).
    pub(super) fn new(
        switch: &SwitchState,
        halves: Vec<Option<PortHalves>>,
        options: &[PortOptions],
        replace: bool,
        lane: Option<Lane>,
    ) -> Result<SwitchPlan, ControlError> {
        let config = translate::switch_config(&switch.settings)?;
        let ports = switch
            .ports
            .iter()
            .zip(halves)
            .zip(options)
            .map(|((p, halves), options)| PortPlan {
                name: p.name.clone(),
                halves,
                options: options.clone(),
            })
            .collect();
        let statics = switch
            .static_macs
            .iter()
            .map(|m| Ok((m.vlan, translate::unicast_mac(m.mac)?, m.port.clone())))
            .collect::<Result<Vec<_>, ControlError>>()?;
        Ok(SwitchPlan {
            name: switch.name.clone(),
            config,
            replace,
            ports,
            statics,
            rules: switch.rules.clone(),
            lane,
            upcall_hub: None,
        })
    }

    /// Runs on the worker: creates the switch and everything on it, or nothing.
    pub(super) fn build(self, reg: &mut SwitchRegistry) -> Result<Built, ControlError> {
        let name = self.name.clone();
        let mut reusable = BTreeMap::new();
        if self.replace {
            let mut old = reg
                .take(&name)
                .ok_or_else(|| internal(format!("switch {name:?} to replace is missing")))?;
            let ids: Vec<(PortId, String)> =
                old.ports().map(|(id, n)| (id, n.to_string())).collect();
            for (id, port) in ids {
                if let Ok(halves) = old.remove_port(id) {
                    reusable.insert(port, halves);
                }
            }
        }
        let result = self.build_inner(reg, &mut reusable);
        if result.is_err() {
            let _ = reg.delete(&name, true);
        }
        result.map(|mut built| {
            built.leftovers = reusable.into_values().collect();
            built
        })
    }

    fn build_inner(
        self,
        reg: &mut SwitchRegistry,
        reusable: &mut BTreeMap<String, PortHalves>,
    ) -> Result<Built, ControlError> {
        let sw = reg
            .create(&self.name, self.config)
            .map_err(|e| internal(format!("creating switch {:?}: {e}", self.name)))?;
        if let Some(lane) = self.lane {
            sw.join_lanes(lane);
        }
        sw.set_upcall_hub(self.upcall_hub);
        let mut ports = Vec::with_capacity(self.ports.len());
        let mut ids = BTreeMap::new();
        for p in self.ports {
            let PortHalves { rx, tx } = match p.halves {
                Some(h) => h,
                None => reusable
                    .remove(&p.name)
                    .ok_or_else(|| internal(format!("port {:?} to reuse is missing", p.name)))?,
            };
            let id = sw
                .add_port(&p.name, rx, tx, p.options)
                .map_err(|e| internal(format!("adding port {:?}: {e}", p.name)))?;
            let counters = sw
                .port_counters(id)
                .ok_or_else(|| internal(format!("port {:?} has no counters", p.name)))?;
            ids.insert(p.name.clone(), id);
            ports.push((p.name, id, counters));
        }
        for (vlan, mac, port) in self.statics {
            let id = *ids
                .get(&port)
                .ok_or_else(|| internal(format!("static entry names unknown port {port:?}")))?;
            sw.add_static_mac(vlan, mac, id)
                .map_err(|e| internal(format!("static entry {mac}: {e}")))?;
        }
        let lookup = |n: &str| ids.get(n).copied();
        let mut rule_ids = Vec::with_capacity(self.rules.len());
        for spec in &self.rules {
            let rule = translate::rule(spec, &lookup)?;
            rule_ids.push(
                sw.add_rule(rule)
                    .map_err(|e| internal(format!("rule: {e}")))?,
            );
        }
        Ok(Built {
            ports,
            rule_ids,
            leftovers: Vec::new(),
        })
    }
}

impl Controller {
    /// The workers a new switch's lanes go to: the least loaded, one per lane. A switch
    /// with more lanes than weftd has workers is refused.
    pub(super) fn lane_workers(&self, switch: &SwitchState) -> Result<Vec<usize>, ControlError> {
        let lanes = switch.settings.lanes;
        if lanes > self.pool.len() {
            return Err(ControlError::invalid(format!(
                "switch {:?} asks for {lanes} lanes, but weftd runs {} worker(s)",
                switch.name,
                self.pool.len()
            ))
            .with_hint(
                "give it at most as many lanes as workers, or run weftd with more \
                 ([workers] count in the file given to weftd --config)",
            ));
        }
        Ok(least_loaded_n(&self.loads(), lanes))
    }

    /// Each worker's load: one per switch lane plus one per port on it.
    fn loads(&self) -> Vec<usize> {
        let mut loads = vec![0; self.pool.len()];
        for rt in self.switches.values() {
            for &w in &rt.workers {
                if let Some(l) = loads.get_mut(w) {
                    *l += 1 + rt.ports.len();
                }
            }
        }
        loads
    }

    /// Builds `switch` on `workers` (one per lane; a switch being rebuilt keeps its own)
    /// with these port sources (one per port) and tracks it. With any [`Source::Reuse`],
    /// the switch of that name is rebuilt in place: its ports keep their devices (and
    /// their counters start again).
    pub(super) fn install(
        &mut self,
        switch: &SwitchState,
        sources: Vec<Source>,
        workers: Vec<usize>,
    ) -> Result<(), ControlError> {
        let replace = sources.iter().any(|s| matches!(s, Source::Reuse))
            || self.switches.contains_key(&switch.name);
        let old = self.switches.get(&switch.name);
        let workers = old.map_or(workers, |o| o.workers.clone());
        let lanes = workers.len();
        if lanes != switch.settings.lanes {
            return Err(internal(format!(
                "switch {:?} wants {} lane(s) but has {lanes} worker(s) for them",
                switch.name, switch.settings.lanes
            )));
        }
        let mut meta = Vec::with_capacity(sources.len());
        // Per lane, per port: the halves to attach (`None`: reuse the lane's old ones).
        let mut per_lane: Vec<Vec<Option<PortHalves>>> = (0..lanes)
            .map(|_| Vec::with_capacity(sources.len()))
            .collect();
        for (source, port) in sources.into_iter().zip(&switch.ports) {
            match source {
                Source::Opened(o) => {
                    meta.push((o.failed, o.device.handle.clone()));
                    let halves = lane_halves(&port.name, o.device.lanes, lanes)?;
                    for (lane, halves) in per_lane.iter_mut().zip(halves) {
                        lane.push(Some(halves));
                    }
                }
                Source::Reuse => {
                    let prev = old.and_then(|o| o.ports.get(&port.name)).ok_or_else(|| {
                        internal(format!("port {:?} to reuse is unknown", port.name))
                    })?;
                    meta.push((prev.failed.clone(), prev.device.clone()));
                    for lane in &mut per_lane {
                        lane.push(None);
                    }
                }
            }
        }
        if replace {
            self.captures.end_switch(&switch.name);
        }
        let mut handles: Vec<Option<Lane>> = if lanes > 1 {
            LaneGroup::lanes(lanes)
                .map_err(|e| ControlError::invalid(format!("switch {:?}: {e}", switch.name)))?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        let options = switch
            .ports
            .iter()
            .map(|p| translate::port_options(&p.options))
            .collect::<Result<Vec<_>, ControlError>>()?;
        let mut built_lanes: Vec<Built> = Vec::with_capacity(lanes);
        for ((&worker, halves), lane) in workers.iter().zip(per_lane).zip(&mut handles) {
            let mut plan = SwitchPlan::new(switch, halves, &options, replace, lane.take())?;
            plan.upcall_hub = Some(self.upcalls.hub());
            match self.pool.exec(worker, move |reg, _| plan.build(reg))? {
                Ok(b) => built_lanes.push(b),
                Err(e) => {
                    // A failed build leaves no switch of that name on any lane's worker.
                    for &w in &workers {
                        let owned = switch.name.clone();
                        let _ = self.pool.exec(w, move |reg, _| reg.delete(&owned, true));
                    }
                    self.switches.remove(&switch.name);
                    return Err(e);
                }
            }
        }
        let added = built_lanes
            .into_iter()
            .map(|b| {
                drop(b.leftovers);
                (b.ports, b.rule_ids)
            })
            .collect();
        let (added, rule_ids) = merge_lanes(added)?;
        let ports = added
            .into_iter()
            .zip(meta)
            .map(|((name, id, counters), (failed, device))| {
                (
                    name,
                    PortRt {
                        id,
                        counters,
                        failed,
                        device,
                    },
                )
            })
            .collect();
        self.switches.insert(
            switch.name.clone(),
            SwitchRt {
                workers,
                ports,
                rule_ids,
            },
        );
        Ok(())
    }

    /// Takes switch `name` off its worker with its ports, and forgets it. Its devices are
    /// closed here, not on the worker.
    pub(super) fn uninstall(&mut self, name: &str) -> Result<(), ControlError> {
        let rt = self
            .switches
            .remove(name)
            .ok_or_else(|| super::no_switch(name))?;
        self.captures.end_switch(name);
        for &worker in &rt.workers {
            let owned = name.to_string();
            let taken = self.pool.exec(worker, move |reg, _| reg.take(&owned))?;
            drop(taken);
        }
        Ok(())
    }

    /// Detaches a port on its worker; its device is closed here.
    pub(super) fn detach_port(&mut self, switch: &str, port: &str) -> Result<(), ControlError> {
        let rt = self
            .switches
            .get_mut(switch)
            .ok_or_else(|| super::no_switch(switch))?;
        let p = rt
            .ports
            .remove(port)
            .ok_or_else(|| super::no_port(switch, port))?;
        self.captures.end_port(switch, port);
        let id = p.id;
        for &worker in &rt.workers {
            let halves: Result<PortHalves, _> =
                self.pool
                    .on_switch(worker, switch, move |sw, _| sw.remove_port(id))?;
            drop(halves.map_err(|e| internal(format!("removing port {port:?}: {e}")))?);
        }
        Ok(())
    }

    /// [`Controller::rebalance`] after a change that is made already: a failure (a worker
    /// gone, a bug) is logged, not reported as the change's failure.
    pub(super) fn rebalance_or_log(&mut self) {
        if let Err(e) = self.rebalance() {
            tracing::error!(error = %e.message, "rebalancing the workers failed");
        }
    }

    /// Evens out the workers' loads by moving whole switches of one lane (a switch on
    /// several lanes stays where it was built, and counts as load where its lanes are). A
    /// switch in transit misses a few polls; its ports' queues keep the frames meanwhile.
    pub(super) fn rebalance(&mut self) -> Result<(), ControlError> {
        let mut fixed = vec![0usize; self.pool.len()];
        let mut movable = Vec::new();
        for (name, rt) in &self.switches {
            let weight = 1 + rt.ports.len();
            match rt.workers.as_slice() {
                [only] => movable.push((name.clone(), *only, weight)),
                lanes => {
                    for &w in lanes {
                        if let Some(l) = fixed.get_mut(w) {
                            *l += weight;
                        }
                    }
                }
            }
        }
        for (name, from, to) in plan_moves(&movable, &fixed, self.pool.len()) {
            let owned = name.clone();
            let Some(sw) = self.pool.exec(from, move |reg, _| reg.take(&owned))? else {
                return Err(internal(format!(
                    "switch {name:?} is missing from worker {from}"
                )));
            };
            self.pool
                .exec(to, move |reg, _| reg.insert(sw))?
                .map_err(|e| internal(format!("moving switch {name:?}: {e}")))?;
            if let Some(rt) = self.switches.get_mut(&name) {
                rt.workers = vec![to];
            }
            tracing::info!(switch = %name, from, to, "moved switch to another worker");
        }
        Ok(())
    }
}
