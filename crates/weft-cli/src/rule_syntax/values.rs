//! Values of rule fields, and the builder that notices conflicting fields.

use std::net::IpAddr;

use weft_control::rule::{ActionSpec, IpPattern, MacPattern, MatchSpec, RuleSpec};

use super::lexer::Token;
use super::RuleSyntaxError;

pub(super) const U8: &str = "a number from 0 to 255 (decimal or 0x hex)";
pub(super) const U16: &str = "a number from 0 to 65535 (decimal or 0x hex)";
pub(super) const U64: &str = "a number from 0 to 2^64-1 (decimal or 0x hex)";
pub(super) const VLAN: &str = "a VLAN id from 0 to 4095";
pub(super) const PORT: &str = "a port name (1 to 64 characters, no ':', ',' or spaces)";
pub(super) const MAC: &str =
    "a MAC address like 52:54:00:00:00:01, optionally /MASK in the same form";
pub(super) const PREFIX: &str = "an IPv4 or IPv6 address, optionally /LEN (e.g. 10.0.0.0/8)";

/// A decimal or `0x` hexadecimal number that fits `T`.
pub(super) fn parse_number<T: TryFrom<u64>>(s: &str) -> Option<T> {
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()?
        }
        Some(_) => return None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok()?,
        None => return None,
    };
    T::try_from(n).ok()
}

/// A VLAN id, 0 to 4095.
pub(super) fn parse_vlan(s: &str) -> Option<u16> {
    parse_number::<u16>(s).filter(|v| *v <= 4095)
}

fn is_mac(s: &str) -> bool {
    let groups: Vec<&str> = s.split(':').collect();
    groups.len() == 6
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `MAC` or `MAC/MASK` (colons only, as `weft` prints them).
pub(super) fn parse_mac(s: &str) -> Option<MacPattern> {
    let ok = match s.split_once('/') {
        Some((addr, mask)) => is_mac(addr) && is_mac(mask),
        None => is_mac(s),
    };
    ok.then(|| s.parse().ok()).flatten()
}

/// `ADDR` or `ADDR/LEN`, IPv4 or IPv6 (the length in decimal digits only).
pub(super) fn parse_prefix(s: &str) -> Option<IpPattern> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    if let Some(len) = len {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let len: u32 = len.parse().ok()?;
        if len > max {
            return None;
        }
    }
    s.parse().ok()
}

/// A port name as the text syntax can carry it.
pub(super) fn parse_port_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.chars().count() <= 64
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == ':' || c == ',');
    ok.then(|| s.to_string())
}

/// The closest candidate to a misspelt `word`, if one is close enough.
pub(super) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = if word.chars().count() >= 4 { 2 } else { 1 };
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, counting characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Where a field got its value, to explain conflicts.
struct Origin {
    field: &'static str,
    column: usize,
    text: String,
}

/// Collects fields; setting a field twice to different values is an error.
#[derive(Default)]
pub(super) struct Builder {
    priority: Option<u16>,
    cookie: Option<u64>,
    m: MatchSpec,
    origins: Vec<Origin>,
}

fn put<T: PartialEq>(
    slot: &mut Option<T>,
    value: T,
    field: &'static str,
    token: &Token,
    origins: &mut Vec<Origin>,
) -> Result<(), RuleSyntaxError> {
    match slot {
        Some(old) if *old == value => Ok(()),
        Some(_) => {
            let (pcol, ptext) = origins
                .iter()
                .find(|o| o.field == field)
                .map_or((0, String::new()), |o| (o.column, o.text.clone()));
            Err(RuleSyntaxError::at(
                token.column,
                format!(
                    "'{}' at column {} conflicts with '{ptext}' at column {pcol}: both set {field}",
                    token.text, token.column
                ),
            ))
        }
        None => {
            *slot = Some(value);
            origins.push(Origin {
                field,
                column: token.column,
                text: token.text.clone(),
            });
            Ok(())
        }
    }
}

macro_rules! setters {
    ($($name:ident: $ty:ty => $($slot:ident).+, $field:literal;)*) => {
        impl Builder {
            $(
                pub(super) fn $name(&mut self, v: $ty, t: &Token) -> Result<(), RuleSyntaxError> {
                    put(&mut self.$($slot).+, v, $field, t, &mut self.origins)
                }
            )*
        }
    };
}

setters! {
    set_priority: u16 => priority, "priority";
    set_cookie: u64 => cookie, "cookie";
    set_in_port: String => m.in_port, "in_port";
    set_src_mac: MacPattern => m.src_mac, "dl_src";
    set_dst_mac: MacPattern => m.dst_mac, "dl_dst";
    set_vlan: u16 => m.vlan, "dl_vlan";
    set_ethertype: u16 => m.ethertype, "dl_type";
    set_ip_src: IpPattern => m.ip_src, "nw_src";
    set_ip_dst: IpPattern => m.ip_dst, "nw_dst";
    set_ip_proto: u8 => m.ip_proto, "nw_proto";
    set_l4_src: u16 => m.l4_src, "tp_src";
    set_l4_dst: u16 => m.l4_dst, "tp_dst";
}

impl Builder {
    /// The rule, with its actions.
    pub(super) fn finish(self, actions: Vec<ActionSpec>) -> RuleSpec {
        RuleSpec {
            priority: self.priority.unwrap_or(0),
            matches: self.m,
            actions,
            cookie: self.cookie.unwrap_or(0),
        }
    }
}
