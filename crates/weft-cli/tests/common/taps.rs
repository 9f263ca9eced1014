//! TAP endpoints of a [`Weftd`] in network namespaces, and a port's drop counters.

use weft_control::Response;
use weft_testlab::lab::Netns;

use super::weftd::Weftd;
use super::{code, stderr};

/// A TAP port `br0:NAME` moved into `ns`, up, with the IPv4 address `v4` and the IPv6
/// address `v6` (without duplicate address detection) when given.
pub(crate) fn tap_endpoint(d: &Weftd, name: &str, ns: &Netns, v4: Option<&str>, v6: Option<&str>) {
    let o = d.weft(&[
        "port",
        "add",
        &format!("br0:{name}"),
        "tap",
        "--netns",
        &ns.name,
    ]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), d.log());
    if let Some(v4) = v4 {
        ns.ip(&["addr", "add", v4, "dev", name]);
    }
    if let Some(v6) = v6 {
        ns.ip(&["addr", "add", v6, "dev", name, "nodad"]);
    }
    ns.ip(&["link", "set", name, "up"]);
}

/// `port`'s (`SWITCH:PORT`) transmitted packets and drops by reason.
pub(crate) fn port_counters(d: &Weftd, port: &str) -> (u64, Vec<(String, u64)>) {
    let Response::Port { counters, .. } = d.json(&["port", "show", port]) else {
        panic!("port show answered something else")
    };
    (counters.tx_packets, counters.drops.into_iter().collect())
}

/// The count of `reason` among `drops`.
pub(crate) fn drop_count(drops: &[(String, u64)], reason: &str) -> u64 {
    drops
        .iter()
        .find(|(r, _)| r == reason)
        .map_or(0, |(_, n)| *n)
}

/// The interface index of `dev` in `ns` (the same device keeps it).
pub(crate) fn ifindex(ns: &Netns, dev: &str) -> String {
    weft_testlab::lab::run_ok(
        ns.cmd("cat").arg(format!("/sys/class/net/{dev}/ifindex")),
        std::time::Duration::from_secs(5),
    )
    .trim()
    .to_string()
}
