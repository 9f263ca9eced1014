//! `route_add`: a VNET/P route is a flow rule, and a route to a VXLAN port with a remote
//! also pins the rule's destination MAC to that endpoint in the port's remote FDB. The two
//! are one change: checked together, written to the state file once, and if the data path
//! refuses the rule, the remote FDB entry it replaced comes back.

use std::net::IpAddr;

use weft_control::rule::{ActionSpec, MacPattern, RuleSpec};
use weft_control::{ControlError, Response};

use super::Controller;
use weft_control::MacAddr;

/// The port and destination MAC of a route that has a remote.
fn remote_target(spec: &RuleSpec) -> Result<(&str, MacAddr), ControlError> {
    match (spec.actions.as_slice(), spec.matches.dst_mac) {
        ([ActionSpec::Output(port)], Some(MacPattern { addr, mask: None })) => Ok((port, addr)),
        ([ActionSpec::Output(_)], Some(dst)) => Err(ControlError::invalid(format!(
            "destination MAC {dst} has a mask: a remote FDB entry is for one MAC"
        ))
        .with_hint("match one dst_mac (no /MASK), or leave out the remote")),
        _ => Err(ControlError::invalid(
            "a route with a remote needs a destination MAC and exactly one output action: \
             the remote is chosen by destination MAC in the output port's remote FDB",
        )
        .with_hint("match dst_mac and output to the VXLAN port, or leave out the remote")),
    }
}

impl Controller {
    pub(super) fn route_add(
        &mut self,
        switch: &str,
        spec: RuleSpec,
        remote: Option<IpAddr>,
    ) -> Result<Response, ControlError> {
        let Some(remote) = remote else {
            return self.rule_add(switch, spec);
        };
        let (port, dst) = remote_target(&spec)?;
        let mac = self.check_remote_mac(switch, port, dst, remote)?;
        let rule = self.check_rule(switch, spec)?;
        let next = self.with_switch(switch, |s| {
            mac.stage(s)?;
            rule.stage(s);
            Ok(())
        })?;
        let endpoint = mac.endpoint();
        let mut added = None;
        self.commit_then(next, |c| {
            let replaced = mac.install(endpoint)?;
            match c.install_rule(switch, rule) {
                Ok(id) => {
                    added = Some(id);
                    Ok(())
                }
                Err(e) => {
                    mac.restore(replaced);
                    Err(e)
                }
            }
        })?;
        let id = added.ok_or_else(|| super::internal("the rule got no id"))?;
        Ok(Response::RuleAdded { id: id.0 })
    }
}
