//! `rule_add`, `rule_del`, `rule_list`.
//!
//! Rule ids are the flow table's: they grow and are never reused while weftd runs. The
//! state file keeps the rules in insertion order (which breaks priority ties) but not their
//! ids, so after a restart the same rules have new ids; `rule_list` shows them.

use weft_control::response::RuleInfo;
use weft_control::rule::RuleSpec;
use weft_control::state::SwitchState;
use weft_control::{ControlError, Response};
use weft_switch::{FlowRule, RuleId};

use super::{limit, Controller};
use crate::model::translate;

fn no_rule(switch: &str, id: u64) -> ControlError {
    ControlError::not_found(format!("no rule {id} on switch {switch:?}"))
        .with_hint("list the rules and their ids with rule_list (weft rule list)")
}

/// A rule checked against its switch (ports resolved, limit kept), ready to go in.
pub(super) struct CheckedRule {
    spec: RuleSpec,
    rule: FlowRule,
    workers: Vec<usize>,
}

impl CheckedRule {
    /// Appends the rule to a copy of its switch's configuration.
    pub(super) fn stage(&self, s: &mut SwitchState) {
        s.rules.push(self.spec.clone());
    }
}

impl Controller {
    /// Checks `spec` against switch `switch`, changing nothing.
    pub(super) fn check_rule(
        &self,
        switch: &str,
        spec: RuleSpec,
    ) -> Result<CheckedRule, ControlError> {
        let conf = self.switch_conf(switch)?;
        let rt = self.switch_rt(switch)?;
        let lookup = |name: &str| rt.ports.get(name).map(|p| p.id);
        let rule = translate::rule(&spec, &lookup)?;
        if conf.rules.len() >= conf.settings.max_rules {
            return Err(limit(format!(
                "switch {switch:?} already has {} rules (max_rules)",
                conf.rules.len()
            )));
        }
        Ok(CheckedRule {
            spec,
            rule,
            workers: rt.workers.clone(),
        })
    }

    /// Puts a checked (and committed) rule in its switch's flow table.
    pub(super) fn install_rule(
        &mut self,
        switch: &str,
        checked: CheckedRule,
    ) -> Result<RuleId, ControlError> {
        let CheckedRule { rule, workers, .. } = checked;
        let ids = self
            .pool
            .on_lanes(&workers, switch, move |sw, _| sw.add_rule(rule))?
            .into_iter()
            .collect::<Result<Vec<RuleId>, _>>()
            .map_err(|e| super::internal(format!("adding the rule: {e}")))?;
        let id = *ids
            .first()
            .ok_or_else(|| super::internal("a switch has no lane"))?;
        if ids.iter().any(|other| *other != id) {
            return Err(super::internal(
                "the lanes of a switch gave a rule different ids",
            ));
        }
        if let Some(rt) = self.switches.get_mut(switch) {
            rt.rule_ids.push(id);
        }
        Ok(id)
    }

    pub(super) fn rule_add(
        &mut self,
        switch: &str,
        spec: RuleSpec,
    ) -> Result<Response, ControlError> {
        let checked = self.check_rule(switch, spec)?;
        let next = self.with_switch(switch, |s| {
            checked.stage(s);
            Ok(())
        })?;
        let mut added = None;
        self.commit_then(next, |c| {
            added = Some(c.install_rule(switch, checked)?);
            Ok(())
        })?;
        let id = added.ok_or_else(|| super::internal("the rule got no id"))?;
        Ok(Response::RuleAdded { id: id.0 })
    }

    pub(super) fn rule_del(&mut self, switch: &str, id: u64) -> Result<Response, ControlError> {
        let rt = self.switch_rt(switch)?;
        let workers = rt.workers.clone();
        let index = rt
            .rule_ids
            .iter()
            .position(|r| r.0 == id)
            .ok_or_else(|| no_rule(switch, id))?;
        let next = self.with_switch(switch, |s| {
            if index < s.rules.len() {
                s.rules.remove(index);
            }
            Ok(())
        })?;
        self.commit_then(next, |c| {
            let removed = c
                .pool
                .on_lanes(&workers, switch, move |sw, _| sw.remove_rule(RuleId(id)))?;
            if removed.iter().any(Option::is_none) {
                return Err(super::internal(format!(
                    "rule {id} was missing from its switch"
                )));
            }
            if let Some(rt) = c.switches.get_mut(switch) {
                rt.rule_ids.remove(index);
            }
            Ok(())
        })?;
        Ok(Response::Done)
    }

    pub(super) fn rule_list(&self, switch: &str) -> Result<Response, ControlError> {
        let conf = self.switch_conf(switch)?;
        let rt = self.switch_rt(switch)?;
        let mut lanes = self
            .pool
            .on_lanes(&rt.workers, switch, |sw, _| {
                sw.flow_table()
                    .rules()
                    .map(|(id, _, stats)| (id, stats))
                    .collect::<Vec<_>>()
            })?
            .into_iter();
        // Every lane holds the same rules; their hits add up.
        let mut in_order = lanes.next().unwrap_or_default();
        for lane in lanes {
            for ((_, sum), (_, stats)) in in_order.iter_mut().zip(lane) {
                sum.packets = sum.packets.saturating_add(stats.packets);
                sum.bytes = sum.bytes.saturating_add(stats.bytes);
            }
        }
        let index: std::collections::HashMap<RuleId, usize> = rt
            .rule_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect();
        let rules = in_order
            .into_iter()
            .filter_map(|(id, stats)| {
                let i = *index.get(&id)?;
                Some(RuleInfo {
                    id: id.0,
                    rule: conf.rules.get(i)?.clone(),
                    packets: stats.packets,
                    bytes: stats.bytes,
                })
            })
            .collect();
        Ok(Response::Rules { rules })
    }
}
