//! `weft route`: VNET/P's routing table (source MAC, destination MAC → port) kept as flow
//! rules. A route is a rule whose cookie is [`ROUTE_COOKIE`], whose match is at most the two
//! MACs and whose one action is `output:PORT`; `route list` shows those rules only, and
//! `weft rule list` shows them among the others (with `cookie=0x...`).
//!
//! A route to a VXLAN port with several remotes leaves the choice of remote to the port's
//! remote FDB (by destination MAC): `--remote IP` adds that remote FDB entry too, in the
//! same request (`route_add`: both or neither), so the endpoint is per destination MAC, not
//! per (source, destination) pair — a rule action with an endpoint would be a change to the
//! switch's core for little gain.

use serde::Serialize;
use weft_control::response::RuleInfo;
use weft_control::rule::{ActionSpec, MacPattern, MatchSpec, RuleSpec};
use weft_control::{Request, Response};

use super::run::unexpected;
use crate::cli_overlay::{MacOrAny, RouteCmd, RouteMatchArgs};
use crate::client::Daemon;
use crate::error::CliError;
use crate::output::{json, Align, Table};

/// The cookie that tags a flow rule as a route ("VNETrout" in ASCII).
pub const ROUTE_COOKIE: u64 = 0x564e_4554_726f_7574;

/// One route, as `route list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteInfo {
    /// The rule's id.
    pub id: u64,
    /// Priority.
    pub priority: u16,
    /// Source MAC, or `any`.
    pub src: String,
    /// Destination MAC, or `any`.
    pub dst: String,
    /// The port.
    pub to: String,
    /// Packets that took the route.
    pub packets: u64,
}

/// A match of one whole address.
fn exactly(addr: weft_control::MacAddr) -> MacPattern {
    MacPattern { addr, mask: None }
}

/// The rule a route is.
pub fn route_rule(matches: &RouteMatchArgs, to: &str, priority: u16) -> RuleSpec {
    RuleSpec {
        priority,
        matches: MatchSpec {
            src_mac: matches.src.mac().map(exactly),
            dst_mac: matches.dst.mac().map(exactly),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output(to.to_string())],
        cookie: ROUTE_COOKIE,
    }
}

/// The route a listed rule is, if it is one.
pub fn route_of(info: &RuleInfo) -> Option<RouteInfo> {
    let r = &info.rule;
    let only_macs = MatchSpec {
        src_mac: r.matches.src_mac,
        dst_mac: r.matches.dst_mac,
        ..MatchSpec::default()
    };
    let [ActionSpec::Output(to)] = r.actions.as_slice() else {
        return None;
    };
    (r.cookie == ROUTE_COOKIE && r.matches == only_macs).then(|| RouteInfo {
        id: info.id,
        priority: r.priority,
        src: r
            .matches
            .src_mac
            .map_or_else(|| "any".into(), |p| p.to_string()),
        dst: r
            .matches
            .dst_mac
            .map_or_else(|| "any".into(), |p| p.to_string()),
        to: to.clone(),
        packets: info.packets,
    })
}

fn routes(daemon: &mut dyn Daemon, switch: &str) -> Result<Vec<RouteInfo>, CliError> {
    match daemon.call(Request::RuleList {
        switch: switch.to_string(),
    })? {
        Response::Rules { rules } => Ok(rules.iter().filter_map(route_of).collect()),
        other => Err(unexpected("rule_list", &other)),
    }
}

fn same_mac(shown: &str, wanted: &MacOrAny) -> bool {
    match wanted {
        MacOrAny::Any => shown == "any",
        MacOrAny::Mac(m) => shown == m.to_string(),
    }
}

/// Runs a `weft route` command; what to print.
pub fn run(daemon: &mut dyn Daemon, cmd: &RouteCmd, json_output: bool) -> Result<String, CliError> {
    match cmd {
        RouteCmd::Add {
            switch,
            matches,
            to,
            remote,
            priority,
        } => {
            let rule = route_rule(matches, to, *priority);
            let request = match remote {
                None => Request::RuleAdd {
                    switch: switch.clone(),
                    rule,
                },
                Some(remote) => {
                    if matches!(matches.dst, MacOrAny::Any) {
                        return Err(CliError::usage(
                            "--remote needs --dst MAC",
                            "the remote is chosen by destination MAC (the port's remote FDB): \
                             give the destination, or route to the port and let it replicate",
                        ));
                    }
                    Request::RouteAdd {
                        switch: switch.clone(),
                        rule,
                        remote: Some(*remote),
                    }
                }
            };
            let response = daemon.call(request)?;
            match response {
                Response::RuleAdded { id } if !json_output => Ok(format!("{id}\n")),
                Response::RuleAdded { .. } => Ok(json(&response)),
                other => Err(unexpected("rule_add", &other)),
            }
        }
        RouteCmd::Del {
            switch,
            id,
            matches,
        } => {
            let all = routes(daemon, switch)?;
            let chosen: Vec<u64> = all
                .iter()
                .filter(|r| match id {
                    Some(id) => r.id == *id,
                    None => same_mac(&r.src, &matches.src) && same_mac(&r.dst, &matches.dst),
                })
                .map(|r| r.id)
                .collect();
            if chosen.is_empty() {
                return Err(CliError::Daemon(
                    weft_control::ControlError::not_found(format!(
                        "no route on switch {switch:?} matches"
                    ))
                    .with_hint(format!("list the routes with `weft route list {switch}`")),
                ));
            }
            for rule in &chosen {
                daemon.call(Request::RuleDel {
                    switch: switch.clone(),
                    id: *rule,
                })?;
            }
            Ok(if json_output {
                json(&Response::Done)
            } else {
                String::new()
            })
        }
        RouteCmd::List { switch } => {
            let all = routes(daemon, switch)?;
            Ok(if json_output { json(&all) } else { table(&all) })
        }
    }
}

fn table(routes: &[RouteInfo]) -> String {
    if routes.is_empty() {
        return "no routes\n".into();
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("ID", R),
        ("PRIO", R),
        ("SRC", L),
        ("DST", L),
        ("TO", L),
        ("PACKETS", R),
    ]);
    for r in routes {
        t.row([
            r.id.to_string(),
            r.priority.to_string(),
            r.src.clone(),
            r.dst.clone(),
            r.to.clone(),
            r.packets.to_string(),
        ]);
    }
    t.render()
}
