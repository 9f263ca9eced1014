//! The text syntax of flow rules, in the style of `ovs-ofctl add-flow`:
//!
//! ```text
//! priority=10,in_port=vm1,tcp,dl_dst=52:54:00:00:00:02,nw_dst=10.0.0.0/8,tp_dst=80 actions=push_vlan:10,output:vm2
//! ```
//!
//! [`parse_rule`] turns it into a [`RuleSpec`] with errors that say where and what was wrong;
//! [`format_rule`] prints a [`RuleSpec`] back so that parsing the text gives the same rule.

mod lexer;
mod values;

use weft_control::rule::{ActionSpec, RuleSpec};

use lexer::{column_at, split_actions, split_fields, Token};
use values::{
    parse_mac, parse_number, parse_port_name, parse_prefix, parse_vlan, suggest, Builder,
};

/// The syntax, as `weft rule add --help` shows it.
pub const SYNTAX_HELP: &str = "\
RULE SYNTAX (like ovs-ofctl add-flow):
  [FIELD=VALUE|SHORTHAND],... actions=ACTION[,ACTION]...
  Fields are separated by commas (or spaces); 'actions=' comes last. An absent field
  matches anything.

  priority=N        0-65535, higher wins, ties go to the older rule (default 0)
  in_port=PORT      ingress port name
  dl_src=MAC[/MASK] source MAC, e.g. 52:54:00:00:00:01 or 01:00:00:00:00:00/01:00:00:00:00:00
  dl_dst=MAC[/MASK] destination MAC
  dl_vlan=V         VLAN id 0-4095 (0 = untagged)
  dl_type=T         EtherType, e.g. 0x0800
  nw_src=ADDR[/LEN] source IPv4/IPv6 address or prefix (alias ip_src, ipv6_src)
  nw_dst=ADDR[/LEN] destination address or prefix (alias ip_dst, ipv6_dst)
  nw_proto=P        IP protocol number, e.g. 6 (alias ip_proto)
  tp_src=N          L4 source port (ICMP type)
  tp_dst=N          L4 destination port (ICMP code)
  cookie=N          an opaque number for the rule's owner
  Numbers are decimal or 0x hex.

  Shorthands: ip (dl_type=0x0800)  ipv6 (0x86dd)  arp (0x0806)
              tcp udp icmp (ip + nw_proto 6, 17, 1)  tcp6 udp6 icmp6 (ipv6 + 6, 17, 58)

ACTIONS (applied in order):
  output:PORT   send to the named port        flood       every port but the ingress one
  normal        let the learning bridge decide drop        drop the packet
  push_vlan:V   tag with VLAN V               pop_vlan    remove the outer tag (alias strip_vlan)
  controller    hand a copy to weftd

EXAMPLES:
  weft rule add br0 'priority=10,in_port=vm1,tcp,tp_dst=80 actions=output:vm2'
  weft rule add br0 'priority=100,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=drop'
  weft rule add br0 'ip,nw_dst=10.0.0.0/8 actions=push_vlan:10,output:uplink'
  weft rule add br0 --json-rule rule.json";

/// A rule text that cannot be parsed: what is wrong and where (1-based character column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuleSyntaxError {
    /// 1-based column (in characters) of the offending part.
    pub column: usize,
    /// What is wrong, the column included.
    pub message: String,
}

impl RuleSyntaxError {
    fn at(column: usize, message: impl Into<String>) -> Self {
        RuleSyntaxError {
            column,
            message: message.into(),
        }
    }
}

/// Match keys with the field they set (canonical key first of each group).
const KEYS: &[&str] = &[
    "priority", "in_port", "dl_src", "dl_dst", "dl_vlan", "dl_type", "nw_src", "nw_dst", "ip_src",
    "ip_dst", "ipv6_src", "ipv6_dst", "nw_proto", "ip_proto", "tp_src", "tp_dst", "cookie",
    "actions",
];

/// Shorthands: name, EtherType, IP protocol.
const SHORTHANDS: &[(&str, u16, Option<u8>)] = &[
    ("ip", 0x0800, None),
    ("ipv6", 0x86dd, None),
    ("arp", 0x0806, None),
    ("tcp", 0x0800, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("icmp", 0x0800, Some(1)),
    ("tcp6", 0x86dd, Some(6)),
    ("udp6", 0x86dd, Some(17)),
    ("icmp6", 0x86dd, Some(58)),
];

const ACTIONS: &[&str] = &[
    "output",
    "flood",
    "normal",
    "drop",
    "push_vlan",
    "pop_vlan",
    "strip_vlan",
    "controller",
];

/// Parses a rule in the text syntax ([`SYNTAX_HELP`]).
pub fn parse_rule(text: &str) -> Result<RuleSpec, RuleSyntaxError> {
    let (fields, actions) = split_fields(text);
    let mut b = Builder::default();
    for field in &fields {
        apply_field(&mut b, field)?;
    }
    let Some(actions) = actions else {
        return Err(RuleSyntaxError::at(
            column_at(text, text.len()),
            "missing 'actions=' at the end of the rule: e.g. 'in_port=vm1 actions=output:vm2' \
             (use actions=drop to drop)",
        ));
    };
    let items = split_actions(&actions);
    if items.iter().all(|t| t.text.is_empty()) {
        return Err(RuleSyntaxError::at(
            actions.column,
            format!(
                "no actions after 'actions=' at column {}: use actions=drop to drop",
                actions.column
            ),
        ));
    }
    let mut parsed = Vec::with_capacity(items.len());
    for item in &items {
        parsed.push(parse_action(item)?);
    }
    Ok(b.finish(parsed))
}

fn apply_field(b: &mut Builder, field: &Token) -> Result<(), RuleSyntaxError> {
    let col = field.column;
    let (key, value) = match field.text.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (field.text.as_str(), None),
    };
    if let Some(&(name, ethertype, proto)) = SHORTHANDS.iter().find(|s| s.0 == key) {
        if value.is_some() {
            return Err(RuleSyntaxError::at(
                col,
                format!("'{name}' at column {col} is a shorthand and takes no value"),
            ));
        }
        b.set_ethertype(ethertype, field)?;
        if let Some(p) = proto {
            b.set_ip_proto(p, field)?;
        }
        return Ok(());
    }
    if !KEYS.contains(&key) {
        let mut candidates: Vec<&str> = KEYS.to_vec();
        candidates.extend(SHORTHANDS.iter().map(|s| s.0));
        let mut msg = format!("unknown key '{key}' at column {col}");
        match suggest(key, &candidates) {
            Some(s) => msg.push_str(&format!(": did you mean '{s}'?")),
            None => msg.push_str(" (see `weft rule add --help` for the keys)"),
        }
        return Err(RuleSyntaxError::at(col, msg));
    }
    let Some(value) = value else {
        return Err(RuleSyntaxError::at(
            col,
            format!("key '{key}' at column {col} needs a value: {key}=..."),
        ));
    };
    let vcol = col + key.chars().count() + 1;
    let bad = |expected: &str| {
        RuleSyntaxError::at(
            vcol,
            format!("invalid value '{value}' for '{key}' at column {vcol}: expected {expected}"),
        )
    };
    match key {
        "priority" => b.set_priority(parse_number(value).ok_or_else(|| bad(values::U16))?, field),
        "cookie" => b.set_cookie(parse_number(value).ok_or_else(|| bad(values::U64))?, field),
        "in_port" => b.set_in_port(
            parse_port_name(value).ok_or_else(|| bad(values::PORT))?,
            field,
        ),
        "dl_src" => b.set_src_mac(parse_mac(value).ok_or_else(|| bad(values::MAC))?, field),
        "dl_dst" => b.set_dst_mac(parse_mac(value).ok_or_else(|| bad(values::MAC))?, field),
        "dl_vlan" => b.set_vlan(parse_vlan(value).ok_or_else(|| bad(values::VLAN))?, field),
        "dl_type" => b.set_ethertype(parse_number(value).ok_or_else(|| bad(values::U16))?, field),
        "nw_src" | "ip_src" | "ipv6_src" => b.set_ip_src(
            parse_prefix(value).ok_or_else(|| bad(values::PREFIX))?,
            field,
        ),
        "nw_dst" | "ip_dst" | "ipv6_dst" => b.set_ip_dst(
            parse_prefix(value).ok_or_else(|| bad(values::PREFIX))?,
            field,
        ),
        "nw_proto" | "ip_proto" => {
            b.set_ip_proto(parse_number(value).ok_or_else(|| bad(values::U8))?, field)
        }
        "tp_src" => b.set_l4_src(parse_number(value).ok_or_else(|| bad(values::U16))?, field),
        "tp_dst" => b.set_l4_dst(parse_number(value).ok_or_else(|| bad(values::U16))?, field),
        // "actions" is split off by the lexer; here it can only be a second one.
        _ => Err(RuleSyntaxError::at(
            col,
            format!("'{key}' at column {col} must come last and only once"),
        )),
    }
}

fn parse_action(item: &Token) -> Result<ActionSpec, RuleSyntaxError> {
    let col = item.column;
    let text = item.text.as_str();
    if text.is_empty() {
        return Err(RuleSyntaxError::at(
            col,
            format!("empty action at column {col}"),
        ));
    }
    let (name, arg) = match text.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (text, None),
    };
    let acol = col + name.chars().count() + 1;
    let no_arg = |action: ActionSpec| match arg {
        None => Ok(action),
        Some(_) => Err(RuleSyntaxError::at(
            col,
            format!("action '{name}' at column {col} takes no argument"),
        )),
    };
    match name {
        "flood" => no_arg(ActionSpec::Flood),
        "normal" => no_arg(ActionSpec::Normal),
        "drop" => no_arg(ActionSpec::Drop),
        "pop_vlan" | "strip_vlan" => no_arg(ActionSpec::PopVlan),
        "controller" => no_arg(ActionSpec::Controller),
        "output" => match arg {
            None | Some("") => Err(RuleSyntaxError::at(
                col,
                format!("action 'output' at column {col} needs a port: output:PORT"),
            )),
            Some(port) => parse_port_name(port)
                .map(ActionSpec::Output)
                .ok_or_else(|| {
                    RuleSyntaxError::at(
                        acol,
                        format!(
                            "invalid port name '{port}' at column {acol}: expected {}",
                            values::PORT
                        ),
                    )
                }),
        },
        "push_vlan" => match arg {
            None | Some("") => Err(RuleSyntaxError::at(
                col,
                format!("action 'push_vlan' at column {col} needs a VLAN: push_vlan:V"),
            )),
            Some(v) => parse_vlan(v).map(ActionSpec::PushVlan).ok_or_else(|| {
                RuleSyntaxError::at(
                    acol,
                    format!(
                        "invalid VLAN '{v}' for 'push_vlan' at column {acol}: expected {}",
                        values::VLAN
                    ),
                )
            }),
        },
        _ => {
            let mut msg = format!("unknown action '{name}' at column {col}");
            if let Some(s) = suggest(name, ACTIONS) {
                msg.push_str(&format!(": did you mean '{s}'?"));
            } else if let Some((n, port)) = text.split_once('=') {
                if n == "output" {
                    msg.push_str(&format!(": did you mean 'output:{port}'?"));
                }
            } else if arg.is_none() && parse_port_name(text).is_some() {
                msg.push_str(&format!(": to send to a port, write 'output:{text}'"));
            }
            Err(RuleSyntaxError::at(col, msg))
        }
    }
}

/// Prints a rule in the text syntax; [`parse_rule`] gives the same rule back (for port names
/// without commas or spaces, which the daemon does not accept anyway).
pub fn format_rule(rule: &RuleSpec) -> String {
    let m = &rule.matches;
    let mut parts = vec![format!("priority={}", rule.priority)];
    if rule.cookie != 0 {
        parts.push(format!("cookie={:#x}", rule.cookie));
    }
    if let Some(p) = &m.in_port {
        parts.push(format!("in_port={p}"));
    }
    let mut proto_printed = false;
    if let Some(t) = m.ethertype {
        let shorthand = SHORTHANDS
            .iter()
            .find(|s| s.1 == t && s.2.is_some() && s.2 == m.ip_proto)
            .or_else(|| SHORTHANDS.iter().find(|s| s.1 == t && s.2.is_none()));
        match shorthand {
            Some(s) => {
                parts.push(s.0.to_string());
                proto_printed = s.2.is_some();
            }
            None => parts.push(format!("dl_type={t:#06x}")),
        }
    }
    let optional = [
        ("dl_src", m.src_mac.map(|p| p.to_string())),
        ("dl_dst", m.dst_mac.map(|p| p.to_string())),
        ("dl_vlan", m.vlan.map(|v| v.to_string())),
        ("nw_src", m.ip_src.map(|p| p.to_string())),
        ("nw_dst", m.ip_dst.map(|p| p.to_string())),
        (
            "nw_proto",
            m.ip_proto.filter(|_| !proto_printed).map(|p| p.to_string()),
        ),
        ("tp_src", m.l4_src.map(|p| p.to_string())),
        ("tp_dst", m.l4_dst.map(|p| p.to_string())),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            parts.push(format!("{key}={v}"));
        }
    }
    let actions: Vec<String> = rule.actions.iter().map(format_action).collect();
    format!("{} actions={}", parts.join(","), actions.join(","))
}

fn format_action(a: &ActionSpec) -> String {
    match a {
        ActionSpec::Output(p) => format!("output:{p}"),
        ActionSpec::Flood => "flood".into(),
        ActionSpec::Normal => "normal".into(),
        ActionSpec::Drop => "drop".into(),
        ActionSpec::PushVlan(v) => format!("push_vlan:{v}"),
        ActionSpec::PopVlan => "pop_vlan".into(),
        ActionSpec::Controller => "controller".into(),
    }
}

#[cfg(test)]
mod tests;
