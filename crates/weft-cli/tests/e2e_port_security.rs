//! End to end: port security, VLAN hygiene and MAC flap dampening on a real weftd, with
//! TAP endpoints in network namespaces and frames crafted with scapy (Debian's
//! python3-scapy) on the restricted port's own interface.
//!
//! Needs root and `/dev/net/tun`; prints SKIP otherwise.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use weft_control::Response;
use weft_testlab::lab::{self, Netns};

use common::taps::{drop_count, port_counters, tap_endpoint};
use common::weftd::Weftd;
use common::{code, stderr};

/// Debian's Python, which has scapy (a Python of one's own on PATH may not).
const PYTHON: &str = "/usr/bin/python3";

/// Runs `script` (Python with scapy) inside `ns`; it must succeed.
fn scapy(ns: &Netns, script: &str) {
    let out = lab::run(ns.cmd(PYTHON).args(["-c", script]), Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "scapy failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mac_of(ns: &Netns, dev: &str) -> String {
    let out = lab::run_ok(
        ns.cmd("cat").arg(format!("/sys/class/net/{dev}/address")),
        Duration::from_secs(5),
    );
    out.trim().to_string()
}

/// The drops by reason of `port` (`SWITCH:PORT`).
fn drops(d: &Weftd, port: &str) -> Vec<(String, u64)> {
    port_counters(d, port).1
}

/// Where the FDB of `switch` puts `mac` (the port's name), if anywhere.
fn fdb_port(d: &Weftd, switch: &str, mac: &str) -> Option<String> {
    let Response::Fdb { entries } = d.json(&["fdb", "show", switch]) else {
        panic!("fdb show answered something else")
    };
    entries
        .into_iter()
        .find(|e| e.mac.eq_ignore_ascii_case(mac))
        .map(|e| e.port)
}

fn can_run(test: &str) -> bool {
    if !lab::can_run(test) {
        return false;
    }
    let scapy = Command::new(PYTHON)
        .args(["-c", "import scapy.all"])
        .stderr(Stdio::null())
        .status();
    assert!(
        scapy.is_ok_and(|s| s.success()),
        "python3-scapy is missing: run scripts/install-test-deps"
    );
    true
}

/// The value of `field` (a tshark field name) of each frame matching the capture `filter`
/// that arrives on `dev` in `ns` while `during` runs: the first `count` of them, or those
/// of 12 s.
fn frames_seen(
    ns: &Netns,
    dev: &str,
    (filter, count): (&str, usize),
    field: &str,
    during: impl FnOnce(),
) -> Vec<String> {
    let tshark = ns
        .cmd("tshark")
        .args(["-Q", "-l", "-i", dev, "-a", "duration:12", "-T", "fields"])
        .args(["-c", &count.to_string()])
        .args(["-e", field, "-f", filter])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // tshark needs a moment before it captures.
    std::thread::sleep(Duration::from_secs(3));
    during();
    let out = tshark.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_restricted_tap_port_sends_only_as_itself_and_every_spoof_is_dropped_by_reason() {
    if !can_run("a_restricted_tap_port_sends_only_as_itself_and_every_spoof_is_dropped_by_reason") {
        return;
    }
    let _serial = lab::serial();
    let d = Weftd::start();
    let (vm_ns, victim_ns) = (Netns::new("psvm"), Netns::new("psvi"));
    let (vm, victim) = (lab::unique("vm"), lab::unique("vi"));
    tap_endpoint(
        &d,
        &vm,
        &vm_ns,
        Some("10.77.0.1/24"),
        Some("2001:db8:77::1/64"),
    );
    tap_endpoint(
        &d,
        &victim,
        &victim_ns,
        Some("10.77.0.2/24"),
        Some("2001:db8:77::2/64"),
    );
    let (vm_mac, victim_mac) = (mac_of(&vm_ns, &vm), mac_of(&victim_ns, &victim));
    let o = d.weft(&[
        "port",
        "set",
        &format!("br0:{vm}"),
        "--allowed-mac",
        &vm_mac,
        "--allowed-ip",
        "10.77.0.1/32,2001:db8:77::1/128",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // Its own traffic passes: ARP, IPv4, and IPv6 with neighbour discovery for its own
    // addresses (and its link-local one).
    assert!(vm_ns.ping("10.77.0.2", 3, 56), "IPv4 ping\n{}", d.log());
    assert!(
        vm_ns.ping("2001:db8:77::2", 3, 56),
        "IPv6 ping\n{}",
        d.log()
    );
    assert_eq!(
        fdb_port(&d, "br0", &victim_mac).as_deref(),
        Some(victim.as_str())
    );
    let before = drops(&d, &format!("br0:{vm}"));

    let n = 5;
    let spoofs = format!(
        r#"
from scapy.all import *
conf.verb = 0
vm, me, victim = "{vm}", "{vm_mac}", "{victim_mac}"
ll = "fe80::" + in6_mactoifaceid(me)
def send(frames):
    sendp(frames * {n}, iface=vm)
# spoofed_src_mac: the victim's MAC.
send([Ether(src=victim, dst=victim)/IP(src="10.77.0.1", dst="10.77.0.2")/UDP(dport=9)])
# spoofed_src_ip: IPv4 and IPv6 sources not its own.
send([Ether(src=me, dst=victim)/IP(src="10.77.0.99", dst="10.77.0.2")/UDP(dport=9),
      Ether(src=me, dst=victim)/IPv6(src="2001:db8:77::99", dst="2001:db8:77::2")/UDP(dport=9)])
# spoofed_arp: "10.77.0.2 is at my MAC".
send([Ether(src=me, dst="ff:ff:ff:ff:ff:ff")/ARP(op=2, hwsrc=me, psrc="10.77.0.2", hwdst="ff:ff:ff:ff:ff:ff", pdst="10.77.0.2")])
# spoofed_nd: an advertisement for the victim's address, and one with another link-layer address.
send([Ether(src=me, dst="33:33:00:00:00:01")/IPv6(src="2001:db8:77::1", dst="ff02::1")/ICMPv6ND_NA(tgt="2001:db8:77::2", R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr=me),
      Ether(src=me, dst="33:33:00:00:00:01")/IPv6(src="2001:db8:77::1", dst="ff02::1")/ICMPv6ND_NA(tgt="2001:db8:77::1", R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr=victim)])
# rogue_dhcp: a DHCP offer and a DHCPv6 advertise.
send([Ether(src=me, dst="ff:ff:ff:ff:ff:ff")/IP(src="10.77.0.1", dst="255.255.255.255")/UDP(sport=67, dport=68)/BOOTP(op=2, yiaddr="10.77.0.50")/DHCP(options=[("message-type", "offer"), "end"]),
      Ether(src=me, dst="33:33:00:01:00:02")/IPv6(src=ll, dst="fe80::1")/UDP(sport=547, dport=546)/DHCP6_Advertise()])
# rogue_ra: a router advertisement.
send([Ether(src=me, dst="33:33:00:00:00:01")/IPv6(src=ll, dst="ff02::1")/ICMPv6ND_RA()])
"#
    );
    scapy(&vm_ns, &spoofs);
    std::thread::sleep(Duration::from_millis(500));
    let after = drops(&d, &format!("br0:{vm}"));
    let delta = |r: &str| drop_count(&after, r) - drop_count(&before, r);
    assert_eq!(delta("spoofed_src_mac"), n, "{after:?}");
    assert_eq!(delta("spoofed_src_ip"), 2 * n, "{after:?}");
    assert_eq!(delta("spoofed_arp"), n, "{after:?}");
    assert_eq!(delta("spoofed_nd"), 2 * n, "{after:?}");
    assert_eq!(delta("rogue_dhcp"), 2 * n, "{after:?}");
    assert_eq!(delta("rogue_ra"), n, "{after:?}");
    // The victim's entry never moved to the spoofer's port.
    assert_eq!(
        fdb_port(&d, "br0", &victim_mac).as_deref(),
        Some(victim.as_str())
    );
    assert!(
        vm_ns.ping("10.77.0.2", 2, 56),
        "still talking after the spoofs"
    );

    // What a booting guest sends passes: DHCP and DHCPv6 client messages, duplicate address
    // detection for its own address, a router solicitation.
    let booting = format!(
        r#"
from scapy.all import *
conf.verb = 0
vm, me = "{vm}", "{vm_mac}"
ll = "fe80::" + in6_mactoifaceid(me)
sendp([Ether(src=me, dst="ff:ff:ff:ff:ff:ff")/IP(src="0.0.0.0", dst="255.255.255.255")/UDP(sport=68, dport=67)/BOOTP(chaddr=mac2str(me))/DHCP(options=[("message-type", "discover"), "end"]),
       Ether(src=me, dst="33:33:00:01:00:02")/IPv6(src=ll, dst="ff02::1:2")/UDP(sport=546, dport=547)/DHCP6_Solicit(),
       Ether(src=me, dst="33:33:ff:00:00:01")/IPv6(src="::", dst="ff02::1:ff00:1")/ICMPv6ND_NS(tgt="2001:db8:77::1"),
       Ether(src=me, dst="33:33:00:00:00:02")/IPv6(src=ll, dst="ff02::2")/ICMPv6ND_RS()] * {n}, iface=vm)
"#
    );
    let before = drops(&d, &format!("br0:{vm}"));
    let seen = frames_seen(
        &victim_ns,
        &victim,
        (
            &format!(
                "ether src {vm_mac} and (udp port 67 or udp port 547 or icmp6[0] == 135 or \
                 icmp6[0] == 133)"
            ),
            usize::try_from(4 * n).unwrap_or(usize::MAX),
        ),
        "frame.number",
        || scapy(&vm_ns, &booting),
    )
    .len();
    let after = drops(&d, &format!("br0:{vm}"));
    let total = |v: &[(String, u64)]| v.iter().map(|(_, c)| c).sum::<u64>();
    assert_eq!(total(&after), total(&before), "dropped: {after:?}");
    assert!(seen as u64 >= 4 * n, "the victim saw {seen} of {}", 4 * n);
}

#[test]
fn an_access_port_drops_double_tagged_frames_and_a_flapping_mac_is_held() {
    if !can_run("an_access_port_drops_double_tagged_frames_and_a_flapping_mac_is_held") {
        return;
    }
    let _serial = lab::serial();
    let d = Weftd::start_with(Some(
        "[[switch]]\nname = \"br0\"\n\n[switch.settings]\nmac_move_limit = 5\nmac_move_hold_secs = 30\n",
    ));
    let (a_ns, b_ns, trunk_ns) = (Netns::new("psa"), Netns::new("psb"), Netns::new("pst"));
    let (a, b, trunk) = (lab::unique("a"), lab::unique("b"), lab::unique("t"));
    tap_endpoint(
        &d,
        &a,
        &a_ns,
        Some("10.78.0.1/24"),
        Some("2001:db8:78::1/64"),
    );
    tap_endpoint(
        &d,
        &b,
        &b_ns,
        Some("10.78.0.2/24"),
        Some("2001:db8:78::2/64"),
    );
    tap_endpoint(
        &d,
        &trunk,
        &trunk_ns,
        Some("10.78.1.3/24"),
        Some("2001:db8:79::3/64"),
    );
    for (port, args) in [(&a, vec!["--access", "10"]), (&b, vec!["--access", "10"])] {
        let mut all = vec!["port", "set"];
        let name = format!("br0:{port}");
        all.push(&name);
        all.extend(args);
        let o = d.weft(&all);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let trunk_port = format!("br0:{trunk}");
    let o = d.weft(&["port", "set", &trunk_port, "--trunk", "10,20"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        a_ns.ping("10.78.0.2", 2, 56),
        "access ports talk\n{}",
        d.log()
    );

    // [10][20] from the access-10 port: nothing may leave the trunk tagged 20.
    let a_mac = mac_of(&a_ns, &a);
    let hop = format!(
        r#"
from scapy.all import *
conf.verb = 0
sendp([Ether(src="{a_mac}", dst="ff:ff:ff:ff:ff:ff")/Dot1Q(vlan=10)/Dot1Q(vlan=20)/IP(src="10.78.0.1", dst="10.78.20.9")/UDP(dport=9),
       Ether(src="{a_mac}", dst="ff:ff:ff:ff:ff:ff")/Dot1Q(vlan=20)/IP(src="10.78.0.1", dst="10.78.20.9")/UDP(dport=9),
       Ether(src="{a_mac}", dst="ff:ff:ff:ff:ff:ff")/IP(src="10.78.0.1", dst="10.78.20.9")/UDP(dport=9)] * 5, iface="{a}")
"#
    );
    let before = drop_count(&drops(&d, &format!("br0:{a}")), "tagged_on_access_port");
    let vlans = frames_seen(
        &trunk_ns,
        &trunk,
        ("vlan and udp port 9", 5),
        "vlan.id",
        || scapy(&a_ns, &hop),
    );
    let after = drop_count(&drops(&d, &format!("br0:{a}")), "tagged_on_access_port");
    assert_eq!(after - before, 10);
    // The untagged ones leave the trunk in VLAN 10 (so the capture works); none in 20.
    assert_eq!(
        vlans.iter().filter(|v| v.as_str() == "10").count(),
        5,
        "{vlans:?}"
    );
    assert!(
        vlans.iter().all(|v| v.as_str() == "10"),
        "a frame hopped: {vlans:?}"
    );

    // One MAC sent from two ports in turn, a hundred times a second (two TAP ports in one
    // namespace, so one process alternates): held on the port it was on.
    let flap_ns = Netns::new("psf");
    let (f1, f2) = (lab::unique("f"), lab::unique("f"));
    for port in [&f1, &f2] {
        let o = d.weft(&[
            "port",
            "add",
            &format!("br0:{port}"),
            "tap",
            "--netns",
            &flap_ns.name,
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        flap_ns.ip(&["link", "set", port, "up"]);
    }
    let flap = format!(
        r#"
from scapy.all import *
import time
conf.verb = 0
f = Ether(src="02:aa:bb:cc:dd:01", dst="02:aa:bb:cc:dd:02")/IP(src="10.78.0.9", dst="10.78.0.10")/UDP(dport=9)
for _ in range(20):
    for dev in ("{f1}", "{f2}"):
        sendp(f, iface=dev)
        time.sleep(0.005)
"#
    );
    scapy(&flap_ns, &flap);
    std::thread::sleep(Duration::from_millis(1500));
    let held: u64 = [&f1, &f2]
        .iter()
        .map(|p| drop_count(&drops(&d, &format!("br0:{p}")), "mac_flap_held"))
        .sum();
    let log = d.log();
    assert!(held > 0, "no frame dropped as mac_flap_held\n{log}");
    let where_held = fdb_port(&d, "br0", "02:aa:bb:cc:dd:01");
    assert!(
        where_held == Some(f1.clone()) || where_held == Some(f2.clone()),
        "{where_held:?}"
    );
    let Response::Stats { switches, .. } = d.json(&["stats"]) else {
        panic!("stats answered something else")
    };
    assert_eq!(switches[0].mac_flap_episodes, 1, "{switches:?}");
    // Logged once for the episode, on the sweep after it began.
    assert_eq!(
        log.matches("02:aa:bb:cc:dd:01").count(),
        1,
        "the episode is logged once:\n{log}"
    );
}
