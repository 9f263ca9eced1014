//! `switch_add`, `switch_del`, `switch_list`.

use weft_control::response::SwitchInfo;
use weft_control::state::{PortKind, PortSettings, SwitchSettings, SwitchState};
use weft_control::{ControlError, ErrorKind, Response};

use super::{limit, Controller};
use crate::model::{validate, MAX_SWITCHES};

impl Controller {
    pub(super) fn switch_add(
        &mut self,
        name: String,
        settings: SwitchSettings,
    ) -> Result<Response, ControlError> {
        self.switch_create(name, settings, false)
    }

    /// Creates switch `name`; `on_demand`: for a port being added to it (it goes away with
    /// its last port).
    fn switch_create(
        &mut self,
        name: String,
        settings: SwitchSettings,
        on_demand: bool,
    ) -> Result<Response, ControlError> {
        validate::switch_name(&name)?;
        if self.switch_index(&name).is_ok() {
            return Err(ControlError::exists(format!(
                "switch {name:?} already exists"
            )));
        }
        if self.state.switches.len() >= MAX_SWITCHES {
            return Err(limit(format!("weftd already runs {MAX_SWITCHES} switches")));
        }
        let switch = SwitchState {
            name,
            settings,
            ports: Vec::new(),
            static_macs: Vec::new(),
            rules: Vec::new(),
            on_demand,
        };
        validate::switch_state(&switch)?;
        let mut next = self.state.clone();
        let at = next.switches.partition_point(|s| s.name < switch.name);
        next.switches.insert(at, switch.clone());
        validate::totals(&next.switches)?;
        let workers = self.lane_workers(&switch)?;
        self.commit_then(next, |c| c.install(&switch, Vec::new(), workers))?;
        self.rebalance_or_log();
        Ok(Response::Done)
    }

    /// `port add` to switch `switch`: creates the switch first when it does not exist and
    /// `create_switch` allows (VALE's switches on demand), and removes it again when the
    /// port cannot be added.
    pub(super) fn port_add_creating(
        &mut self,
        switch: &str,
        name: String,
        kind: PortKind,
        options: PortSettings,
        create_switch: bool,
    ) -> Result<Response, ControlError> {
        let create = create_switch && self.switch_index(switch).is_err();
        if create {
            self.switch_create(switch.to_string(), SwitchSettings::default(), true)
                .map_err(|mut e| {
                    e.message = format!("creating switch {switch:?} for the port: {}", e.message);
                    e
                })?;
        }
        let added = self.port_add(switch, name, kind, options);
        if added.is_err() && create {
            if let Err(e) = self.switch_del(switch, false) {
                tracing::warn!(switch, error = %e, "cannot remove the switch made for a port that failed");
            }
        }
        added
    }

    /// After a port of `switch` went: a switch made on demand goes with its last port,
    /// unless rules are left on it.
    pub(super) fn drop_if_emptied_on_demand(&mut self, switch: &str) {
        let Ok(i) = self.switch_index(switch) else {
            return;
        };
        let s = &self.state.switches[i];
        if s.on_demand && s.ports.is_empty() && s.rules.is_empty() {
            if let Err(e) = self.switch_del(switch, false) {
                tracing::warn!(switch, error = %e, "cannot remove an emptied on-demand switch");
            }
        }
    }

    pub(super) fn switch_del(&mut self, name: &str, force: bool) -> Result<Response, ControlError> {
        let i = self.switch_index(name)?;
        let ports = self.state.switches[i].ports.len();
        if ports > 0 && !force {
            return Err(ControlError::new(
                ErrorKind::Invalid,
                format!("switch {name:?} still has {ports} port(s)"),
            )
            .with_hint(
                "remove its ports first, or delete it with force (weft switch del --force)",
            ));
        }
        let mut next = self.state.clone();
        next.switches.remove(i);
        self.commit_then(next, |c| c.uninstall(name))?;
        self.rebalance_or_log();
        Ok(Response::Done)
    }

    pub(super) fn switch_list(&self) -> Result<Response, ControlError> {
        let mut switches = Vec::with_capacity(self.state.switches.len());
        for s in &self.state.switches {
            let rt = self.switch_rt(&s.name)?;
            let fdb_entries = self.pool.on_switch(rt.home(), &s.name, |sw, now| {
                sw.sync_lanes(now);
                sw.fdb().len()
            })?;
            switches.push(SwitchInfo {
                name: s.name.clone(),
                settings: s.settings,
                ports: s.ports.len(),
                fdb_entries,
                rules: s.rules.len(),
                worker: rt.home(),
                workers: rt.workers.clone(),
            });
        }
        Ok(Response::Switches { switches })
    }
}
