//! `config_apply`: make the running configuration equal to a given one.
//!
//! The target is validated as a whole first; then the devices it needs are opened; only
//! then is anything changed (state file first, then the data path). A switch whose settings
//! change is rebuilt in place (its ports keep their devices); any other switch is changed
//! by one job on its worker: rules after the first difference are removed and re-added
//! (insertion order breaks priority ties), ports and static entries are added, removed or
//! updated, and everything else is left alone, so traffic on untouched ports goes on.

use std::collections::BTreeMap;
use std::sync::Arc;

use weft_control::rule::RuleSpec;
use weft_control::state::{State, SwitchState};
use weft_control::{ControlError, Response};
use weft_packet::MacAddr;
use weft_switch::{PortCounters, PortHalves, PortId, PortOptions, RuleId, Switch};

use super::build::{lane_halves, merge_lanes, open_all, Opened, Source};
use super::diff::SwitchDiff;
use super::{internal, Controller, PortRt};
use crate::devices::OpenContext;
use crate::model::{translate, validate};

/// What the worker is handed to change one switch.
struct Job {
    remove_rules: Vec<RuleId>,
    remove_statics: Vec<(u16, MacAddr)>,
    remove_ports: Vec<PortId>,
    add_ports: Vec<(String, PortHalves, PortOptions)>,
    set_ports: Vec<(PortId, PortOptions)>,
    add_statics: Vec<(u16, MacAddr, String)>,
    add_rules: Vec<RuleSpec>,
}

/// What it gives back.
struct Done {
    added: Vec<(String, PortId, Arc<PortCounters>)>,
    rule_ids: Vec<RuleId>,
    detached: Vec<PortHalves>,
}

impl Job {
    /// The same changes without the ports to add (each lane gets its own halves).
    fn clone_without_ports(&self) -> Job {
        Job {
            remove_rules: self.remove_rules.clone(),
            remove_statics: self.remove_statics.clone(),
            remove_ports: self.remove_ports.clone(),
            add_ports: Vec::new(),
            set_ports: self.set_ports.clone(),
            add_statics: self.add_statics.clone(),
            add_rules: self.add_rules.clone(),
        }
    }

    fn run(self, sw: &mut Switch) -> Result<Done, ControlError> {
        for id in self.remove_rules.iter().rev() {
            sw.remove_rule(*id);
        }
        for (vlan, mac) in self.remove_statics {
            sw.remove_mac(vlan, mac);
        }
        let mut detached = Vec::new();
        for id in self.remove_ports {
            detached.push(
                sw.remove_port(id)
                    .map_err(|e| internal(format!("removing a port: {e}")))?,
            );
        }
        let mut added = Vec::new();
        for (name, PortHalves { rx, tx }, options) in self.add_ports {
            let id = sw
                .add_port(&name, rx, tx, options)
                .map_err(|e| internal(format!("adding port {name:?}: {e}")))?;
            let counters = sw
                .port_counters(id)
                .ok_or_else(|| internal("a new port has no counters"))?;
            added.push((name, id, counters));
        }
        for (id, options) in self.set_ports {
            sw.set_port_options(id, options)
                .map_err(|e| internal(format!("setting port options: {e}")))?;
        }
        for (vlan, mac, port) in self.add_statics {
            let id = sw
                .port_id(&port)
                .ok_or_else(|| internal(format!("no port {port:?} for a static entry")))?;
            sw.add_static_mac(vlan, mac, id)
                .map_err(|e| internal(format!("static entry {mac}: {e}")))?;
        }
        let mut rule_ids = Vec::new();
        for spec in &self.add_rules {
            let rule = translate::rule(spec, &|n: &str| sw.port_id(n))?;
            rule_ids.push(
                sw.add_rule(rule)
                    .map_err(|e| internal(format!("rule: {e}")))?,
            );
        }
        Ok(Done {
            added,
            rule_ids,
            detached,
        })
    }
}

impl Controller {
    pub(super) fn config_apply(
        &mut self,
        mut target: State,
        dry_run: bool,
    ) -> Result<Response, ControlError> {
        validate::state(&target)?;
        self.vhost_sockets_distinct(&target)?;
        target.switches.sort_by(|a, b| a.name.cmp(&b.name));
        let current: BTreeMap<String, SwitchState> = self
            .state
            .switches
            .iter()
            .map(|s| (s.name.clone(), s.clone()))
            .collect();
        let mut changes = Vec::new();
        let mut deletes = Vec::new();
        for name in current.keys() {
            if !target.switches.iter().any(|t| &t.name == name) {
                changes.push(format!("delete switch {name}"));
                deletes.push(name.clone());
            }
        }
        let mut creates = Vec::new();
        let mut rebuilds = Vec::new();
        let mut diffs = Vec::new();
        for t in &target.switches {
            match current.get(&t.name) {
                None => {
                    changes.push(format!(
                        "create switch {} ({} port(s), {} static entr(ies), {} rule(s))",
                        t.name,
                        t.ports.len(),
                        t.static_macs.len(),
                        t.rules.len()
                    ));
                    creates.push(t.clone());
                }
                Some(c) if c.settings.lanes != t.settings.lanes => {
                    // Each lane holds its own share of every port's queues: a switch
                    // keeps its lanes for as long as it exists.
                    return Err(ControlError::invalid(format!(
                        "switch {} runs on {} lane(s); the configuration asks for {}",
                        t.name, c.settings.lanes, t.settings.lanes
                    ))
                    .with_hint(
                        "lanes cannot change on a running switch: apply a configuration \
                         without the switch first, then one with it (or weft switch del and \
                         weft switch add --lanes)",
                    ));
                }
                Some(c) if c.settings != t.settings => {
                    changes.push(format!("rebuild switch {} (its settings change)", t.name));
                    rebuilds.push((c.clone(), t.clone()));
                }
                Some(c) => {
                    let diff = SwitchDiff::new(c, t);
                    if !diff.is_empty(c) {
                        diff.describe(c, &t.name, &mut changes);
                        diffs.push((t.name.clone(), diff));
                    }
                }
            }
        }
        if dry_run || changes.is_empty() {
            return Ok(Response::Applied { changes });
        }
        // Open every new device before changing anything: a device that will not open
        // refuses the whole change.
        let mut create_devices = Vec::new();
        for t in &creates {
            let ctx = OpenContext {
                lanes: t.settings.lanes,
                ..self.open_ctx(&t.name)
            };
            create_devices.push(open_all(ctx, &t.ports)?);
        }
        let mut rebuild_sources = Vec::new();
        for (c, t) in &rebuilds {
            let mut sources = Vec::new();
            for p in &t.ports {
                if c.ports.iter().any(|o| o.name == p.name && o.kind == p.kind) {
                    sources.push(Source::Reuse);
                } else {
                    let ctx = OpenContext {
                        lanes: t.settings.lanes,
                        ..self.open_ctx(&t.name)
                    };
                    let mut opened = open_all(ctx, std::slice::from_ref(p))?;
                    sources.push(Source::Opened(
                        opened.pop().ok_or_else(|| internal("no device"))?,
                    ));
                }
            }
            rebuild_sources.push(sources);
        }
        let mut diff_devices = Vec::new();
        for (name, d) in &diffs {
            diff_devices.push(open_all(self.open_ctx(name), &d.add_ports)?);
        }
        self.commit(target.clone())?;
        let result = self.apply_all(
            deletes,
            creates,
            create_devices,
            rebuilds,
            rebuild_sources,
            diffs,
            diff_devices,
        );
        if let Err(e) = result {
            tracing::error!(error = %e.message, "config_apply failed half-way; the state file holds the new configuration");
            return Err(ControlError::new(
                e.kind,
                format!("{} (the change was applied in part: restart weftd to run the saved configuration)", e.message),
            ));
        }
        self.rebalance_or_log();
        Ok(Response::Applied { changes })
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_all(
        &mut self,
        deletes: Vec<String>,
        creates: Vec<SwitchState>,
        create_devices: Vec<Vec<Opened>>,
        rebuilds: Vec<(SwitchState, SwitchState)>,
        rebuild_sources: Vec<Vec<Source>>,
        diffs: Vec<(String, SwitchDiff)>,
        diff_devices: Vec<Vec<Opened>>,
    ) -> Result<(), ControlError> {
        for name in deletes {
            self.uninstall(&name)?;
        }
        for ((_, t), sources) in rebuilds.into_iter().zip(rebuild_sources) {
            let workers = self.switch_rt(&t.name)?.workers.clone();
            self.install(&t, sources, workers)?;
        }
        for ((name, diff), devices) in diffs.into_iter().zip(diff_devices) {
            self.apply_diff(&name, diff, devices)?;
        }
        for (t, devices) in creates.into_iter().zip(create_devices) {
            let workers = self.lane_workers(&t)?;
            self.install(
                &t,
                devices.into_iter().map(Source::Opened).collect(),
                workers,
            )?;
        }
        Ok(())
    }

    fn apply_diff(
        &mut self,
        name: &str,
        diff: SwitchDiff,
        devices: Vec<Opened>,
    ) -> Result<(), ControlError> {
        let rt = self.switch_rt(name)?;
        let workers = rt.workers.clone();
        let port_id = |p: &str| {
            rt.ports
                .get(p)
                .map(|r| r.id)
                .ok_or_else(|| internal(format!("unknown port {p:?}")))
        };
        let mut meta = Vec::new();
        // Per lane: the new ports' halves.
        let mut add_ports: Vec<Vec<(String, PortHalves, PortOptions)>> =
            workers.iter().map(|_| Vec::new()).collect();
        for (p, o) in diff.add_ports.iter().zip(devices) {
            meta.push((o.failed, o.device.handle.clone()));
            let halves = lane_halves(&p.name, o.device.lanes, workers.len())?;
            let options = translate::port_options(&p.options)?;
            for (lane, halves) in add_ports.iter_mut().zip(halves) {
                lane.push((p.name.clone(), halves, options.clone()));
            }
        }
        let template = Job {
            remove_rules: rt
                .rule_ids
                .get(diff.keep_rules..)
                .unwrap_or_default()
                .to_vec(),
            remove_statics: diff
                .remove_statics
                .iter()
                .map(|(v, m, _)| (*v, *m))
                .collect(),
            remove_ports: diff
                .remove_ports
                .iter()
                .map(|p| port_id(p))
                .collect::<Result<_, _>>()?,
            add_ports: Vec::new(),
            set_ports: diff
                .set_ports
                .iter()
                .map(|p| Ok((port_id(&p.name)?, translate::port_options(&p.options)?)))
                .collect::<Result<_, ControlError>>()?,
            add_statics: diff.add_statics.clone(),
            add_rules: diff.add_rules.clone(),
        };
        for p in &diff.remove_ports {
            self.captures.end_port(name, p);
        }
        let mut lanes_done = Vec::with_capacity(workers.len());
        for (&worker, add_ports) in workers.iter().zip(add_ports) {
            let job = Job {
                add_ports,
                ..template.clone_without_ports()
            };
            let done = self
                .pool
                .on_switch(worker, name, move |sw, _| job.run(sw))??;
            lanes_done.push(done);
        }
        let added = lanes_done
            .into_iter()
            .map(|d| {
                drop(d.detached);
                (d.added, d.rule_ids)
            })
            .collect();
        let (added, rule_ids) = merge_lanes(added)?;
        let rt = self
            .switches
            .get_mut(name)
            .ok_or_else(|| super::no_switch(name))?;
        for p in &diff.remove_ports {
            rt.ports.remove(p);
        }
        for ((port, id, counters), (failed, device)) in added.into_iter().zip(meta) {
            rt.ports.insert(
                port,
                PortRt {
                    id,
                    counters,
                    failed,
                    device,
                },
            );
        }
        rt.rule_ids.truncate(diff.keep_rules);
        rt.rule_ids.extend(rule_ids);
        Ok(())
    }
}
