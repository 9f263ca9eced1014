//! `switch_add`, `switch_del`, `switch_list`.

use weft_control::response::SwitchInfo;
use weft_control::state::{SwitchSettings, SwitchState};
use weft_control::{ControlError, ErrorKind, Response};

use super::{limit, Controller};
use crate::model::{validate, MAX_SWITCHES};

impl Controller {
    pub(super) fn switch_add(
        &mut self,
        name: String,
        settings: SwitchSettings,
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
