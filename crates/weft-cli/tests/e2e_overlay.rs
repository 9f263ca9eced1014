//! weft to weft over VXLAN, every part real: three "hosts" (network namespaces joined by veth
//! to one Linux bridge, the underlay), each running its own weftd process driven by `weft`.
//! On each host switch `br0` has a VXLAN port (VNI 100, the other two hosts as remotes) and a
//! TAP whose other end is in an endpoint namespace on overlay subnet 10.100.0.0/24; switch
//! `br1` does the same for VNI 200 (subnet 10.200.0.0/24) on UDP port 4790, because one UDP
//! socket per VXLAN port cannot share 4789 with another VNI's port.
//!
//! Each host's `br0` also has a `vhost-user` port owned by a weft-client endpoint in the test
//! process (10.100.0.11-13), VNI 100's native endpoint beside the TAP.
//!
//! Checks: every endpoint pings every other; a broadcast (ARP) reaches all; every client's
//! hand-built UDP frame reaches every other host's client intact, a client's ARP broadcast
//! reaches every VNI 100 TAP and client and nothing in VNI 200, and each TAP endpoint pings
//! the client of another host (the client answers ARP and echo); an endpoint's capture shows
//! only overlay addresses; then 10^5 frames of every kind sent into one VNI leave the other
//! VNI's switches, TAPs and FDBs untouched, both ways. Bursts of one UDP flow between two TAP
//! endpoints arrive whole, having crossed host B's switch merged into USO super-frames.
//!
//! Needs root and `/dev/net/tun`; prints SKIP otherwise.

#[path = "common/client_endpoint.rs"]
mod client_endpoint;
mod common;

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use client_endpoint::{arp_request, udp_frame, ClientEndpoint};
use common::hosts::{Endpoint, Host, Underlay};
use weft_control::Response;
use weft_testlab::lab::{self, Netns};

/// Frames of each kind the leak test sends into each VNI.
const FRAMES_PER_KIND: usize = 100_000;

/// Underlay addresses, one per host.
const UNDERLAY: [&str; 3] = ["10.99.0.1", "10.99.0.2", "10.99.0.3"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Host {
    /// (rx, tx) packets of `switch:port`.
    fn packets(&self, port: &str) -> (u64, u64) {
        let Response::Port { counters, .. } = self.json(&["port", "show", port]) else {
            panic!("port show answered something else")
        };
        (counters.rx_packets, counters.tx_packets)
    }

    /// The MACs in `switch`'s FDB, lower case.
    fn fdb_macs(&self, switch: &str) -> Vec<String> {
        let Response::Fdb { entries } = self.json(&["fdb", "show", switch]) else {
            panic!("fdb show answered something else")
        };
        entries.into_iter().map(|e| e.mac.to_lowercase()).collect()
    }
}

/// Sets up one VNI on every host: switch, VXLAN port, TAP, endpoint address (no IPv6, so
/// the endpoint is silent unless a test makes it speak).
fn overlay(hosts: &[Host], switch: &str, vni: u32, udp_port: u16, subnet: u8) -> Vec<Endpoint> {
    let ifname = if vni == 100 { "ep100" } else { "ep200" };
    let mut endpoints = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        if switch != "br0" {
            host.json(&["switch", "add", switch]);
        }
        let local = UNDERLAY[i];
        let vni_text = vni.to_string();
        let port_text = udp_port.to_string();
        let mut args = vec![
            "port",
            "add",
            &format!("{switch}:vx"),
            "vxlan",
            "--local",
            local,
            "--vni",
            &vni_text,
            "--udp-port",
            &port_text,
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        for remote in UNDERLAY.iter().filter(|r| **r != local) {
            args.extend(["--remote".to_string(), (*remote).to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        host.json(&args);
        let ip = format!("10.{subnet}.0.{}", i + 1);
        endpoints.push(host.endpoint(switch, ifname, &ip, &format!("e{subnet}")));
    }
    endpoints
}

/// Counter `name` of `switch:port`'s device (`weft port show`'s device section).
fn device_counter(host: &Host, port: &str, name: &str) -> u64 {
    let Response::Port { counters, .. } = host.json(&["port", "show", port]) else {
        panic!("port show answered something else")
    };
    counters.device.get(name).copied().unwrap_or(0)
}

/// Why a socket could not be opened inside a namespace.
struct InNamespace(String);

impl From<weft_netns::NetnsError> for InNamespace {
    fn from(e: weft_netns::NetnsError) -> Self {
        InNamespace(e.to_string())
    }
}

impl From<std::io::Error> for InNamespace {
    fn from(e: std::io::Error) -> Self {
        InNamespace(e.to_string())
    }
}

/// A UDP socket that `open` makes inside `ns` (it stays there once made).
fn socket_in(
    ns: &Netns,
    open: impl FnOnce() -> std::io::Result<std::net::UdpSocket> + Send,
) -> std::net::UdpSocket {
    weft_netns::run_in(Some(&ns.path()), || -> Result<_, InNamespace> {
        Ok(open()?)
    })
    .unwrap_or_else(|e| panic!("a socket in {}: {}", ns.name, e.0))
}

/// Bursts of 1000-byte datagrams from one connected socket in endpoint `a` (on host 0) to
/// one in `b` (each numbered, the rest deterministic bytes): host 0's VXLAN port sends each
/// burst's runs with `UDP_SEGMENT`, host `hb`'s receives them coalesced and merges each
/// into a USO super-frame for its TAP (the switch's other ports all take USO), and the kernel
/// behind the TAP cuts it again. Every datagram that arrives must be whole and once.
fn udp_runs_arrive_whole_through_merged_super_frames(
    hosts: &[Host],
    a: &Endpoint,
    b: &Endpoint,
    hb: usize,
) {
    use std::net::UdpSocket;
    const BURSTS: u32 = 20;
    const PER_BURST: u32 = 64;
    let payload = |seq: u32| {
        let mut p = seq.to_be_bytes().to_vec();
        p.extend(lab::test_data(996, u64::from(seq)));
        p
    };
    // A static remote MAC sends `b`'s frames to host `hb` alone: a run to one remote leaves
    // in one `UDP_SEGMENT` send (a flood to every remote would be replicated datagram by
    // datagram). Removed at the end, for the checks that follow.
    let b_mac = b.mac();
    hosts[0].json(&["remote-mac", "add", "br0:vx", &b_mac, UNDERLAY[hb]]);
    let merged_before = device_counter(&hosts[hb], "br0:vx", "vxlan_rx_merged");
    let b_ip = b.ip.clone();
    let rx = socket_in(&b.ns, || {
        let s = UdpSocket::bind((b_ip.as_str(), 7300))?;
        s.set_read_timeout(Some(Duration::from_millis(800)))?;
        Ok(s)
    });
    let (a_ip, to) = (a.ip.clone(), b.ip.clone());
    let tx = socket_in(&a.ns, || {
        let s = UdpSocket::bind((a_ip.as_str(), 0))?;
        s.connect((to.as_str(), 7300))?;
        Ok(s)
    });
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = rx.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        got
    });
    for burst in 0..BURSTS {
        for i in 0..PER_BURST {
            tx.send(&payload(burst * PER_BURST + i)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = receiver.join().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for d in &got {
        let seq = u32::from_be_bytes(d[..4].try_into().unwrap());
        assert_eq!(d, &payload(seq), "datagram {seq} arrived changed");
        assert!(seen.insert(seq), "datagram {seq} arrived twice");
    }
    let sent = BURSTS * PER_BURST;
    assert!(
        got.len() * 100 >= sent as usize * 95,
        "{} of {sent} datagrams arrived",
        got.len()
    );
    let merged = device_counter(&hosts[hb], "br0:vx", "vxlan_rx_merged") - merged_before;
    let show = |h: &Host, port: &str| {
        let Response::Port { port, counters } = h.json(&["port", "show", port]) else {
            panic!("port show answered something else")
        };
        format!("{:?} {:?}", port.offloads, counters.device)
    };
    assert!(
        merged > 0,
        "no run was merged into a super-frame: sender vx {}, receiver vx {}, receiver TAP {}",
        show(&hosts[0], "br0:vx"),
        show(&hosts[hb], "br0:vx"),
        show(&hosts[hb], "br0:ep100"),
    );
    eprintln!(
        "{} of {sent} datagrams arrived whole; {merged} merged super-frames",
        got.len()
    );
    hosts[0].json(&["remote-mac", "del", "br0:vx", &b_mac]);
}

/// Frames of every kind an endpoint may send, from source MAC `src`: unicast to a known
/// MAC and to an unknown one, broadcast, IPv4 multicast, VLAN-tagged, ARP, IPv6 ND-like
/// multicast, and a full-MTU frame.
fn frames_of_every_kind(src: [u8; 6], known: [u8; 6]) -> Vec<Vec<u8>> {
    let frame = |dst: [u8; 6], ethertype: u16, payload_len: usize| {
        let mut f = Vec::with_capacity(14 + payload_len);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.resize(14 + payload_len, 0x5a);
        f
    };
    let mut arp = frame([0xff; 6], 0x0806, 28);
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp[22..28].copy_from_slice(&src);
    arp[28..32].copy_from_slice(&[10, 254, 0, 1]);
    arp[32..38].copy_from_slice(&[0; 6]);
    arp[38..42].copy_from_slice(&[10, 254, 0, 2]);
    let mut tagged = frame([0xff; 6], 0x8100, 50);
    tagged[14..18].copy_from_slice(&[0x00, 0x05, 0x08, 0x00]);
    vec![
        frame(known, 0x0800, 50),
        frame([0x02, 0x77, 0, 0, 0, 1], 0x0800, 50),
        frame([0xff; 6], 0x0800, 50),
        frame([0x01, 0x00, 0x5e, 0, 0, 0xfb], 0x0800, 50),
        tagged,
        arp,
        frame([0x33, 0x33, 0xff, 0, 0, 2], 0x86dd, 72),
        frame([0xff; 6], 0x0800, 1500),
    ]
}

fn parse_mac(text: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (b, part) in mac.iter_mut().zip(text.split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap();
    }
    mac
}

/// Per host: (vxlan rx, tap tx) packets of `switch`'s ports.
fn delivered(hosts: &[Host], switch: &str, tap: &str) -> Vec<(u64, u64)> {
    hosts
        .iter()
        .map(|h| {
            (
                h.packets(&format!("{switch}:vx")).0,
                h.packets(&format!("{switch}:{tap}")).1,
            )
        })
        .collect()
}

/// Sends every kind of frame into one VNI from host 0's endpoint and checks that the other
/// VNI saw none of it while this one carried it.
fn no_leak(hosts: &[Host], from: (&str, &[Endpoint]), other: (&str, &[Endpoint]), marker: u8) {
    let (switch, endpoints) = from;
    let (other_switch, other_endpoints) = other;
    let src = [0x02, marker, 0, 0, 0, 1];
    let src_text = "02:".to_string() + &format!("{marker:02x}") + ":00:00:00:01";
    let frames = frames_of_every_kind(src, parse_mac(&endpoints[1].mac()));
    let other_before = delivered(hosts, other_switch, &other_endpoints[0].ifname);
    let before = delivered(hosts, switch, &endpoints[0].ifname);
    let started = Instant::now();
    let sent = weft_testlab::blast::send_frames(
        &endpoints[0].ns.path(),
        &endpoints[0].ifname,
        &frames,
        FRAMES_PER_KIND,
    );
    std::thread::sleep(Duration::from_secs(1));
    let after = delivered(hosts, switch, &endpoints[0].ifname);
    let other_after = delivered(hosts, other_switch, &other_endpoints[0].ifname);
    let carried: u64 = (1..3).map(|h| after[h].0 - before[h].0).sum();
    eprintln!(
        "{switch}: sent {sent} frames in {:?}; the other hosts' VXLAN ports received {carried}",
        started.elapsed()
    );
    assert_eq!(
        other_after, other_before,
        "frames leaked into {other_switch}"
    );
    for h in hosts {
        assert!(
            !h.fdb_macs(other_switch).contains(&src_text),
            "{src_text} learned on {other_switch}"
        );
    }
    // The blast really crossed the overlay, and the source MAC was learned on the far
    // switches. Not every frame: the TAP's queue drops what a (debug, shared-core) weftd
    // cannot take at the sender's pace; about a fifth crossed here, 2% is the floor.
    assert_eq!(sent, u64::try_from(frames.len() * FRAMES_PER_KIND).unwrap());
    assert!(
        carried * 50 >= sent,
        "only {carried} of {sent} frames crossed {switch}"
    );
    assert!(hosts[1].fdb_macs(switch).contains(&src_text));
}

/// On host 0: a route to the VXLAN port with a remote for endpoint 1's MAC pins that MAC
/// in the port's remote FDB, so frames to it reach host 1 only (before, and after `route
/// del` + `remote-mac del`, they are replicated to host 2 as well); on host 1, a route by
/// source and destination MAC overrides the learning bridge.
fn routes_and_remote_macs(hosts: &[Host], endpoints: &[Endpoint]) {
    let dst = endpoints[1].mac();
    let frames = frames_of_every_kind([0x02, 0x30, 0, 0, 0, 1], parse_mac(&dst));
    let unicast = std::slice::from_ref(&frames[0]);
    let blast = |n| {
        let before = delivered(hosts, "br0", "ep100");
        weft_testlab::blast::send_frames(&endpoints[0].ns.path(), "ep100", unicast, n);
        std::thread::sleep(Duration::from_millis(500));
        let after = delivered(hosts, "br0", "ep100");
        (after[1].0 - before[1].0, after[2].0 - before[2].0)
    };
    let (to_1, to_2) = blast(200);
    assert!(
        to_1 >= 200 && to_2 >= 200,
        "replicated before: {to_1} {to_2}"
    );

    let Response::RuleAdded { id } = hosts[0].json(&[
        "route",
        "add",
        "br0",
        "--dst",
        &dst,
        "--to",
        "vx",
        "--remote",
        UNDERLAY[1],
    ]) else {
        panic!("route add answered something else")
    };
    let (to_1, to_2) = blast(200);
    assert!(to_1 >= 200 && to_2 == 0, "pinned to host 1: {to_1} {to_2}");
    assert!(endpoints[0].ns.ping(&endpoints[1].ip, 3, 56));

    let routes = hosts[0].weft(&["--json", "route", "list", "br0"]);
    let routes: serde_json::Value = serde_json::from_slice(&routes.stdout).unwrap();
    assert_eq!(routes.as_array().map(Vec::len), Some(1), "{routes}");
    assert_eq!(routes[0]["id"], id);
    assert_eq!(routes[0]["dst"], dst.as_str());
    let Response::Rules { rules } = hosts[0].json(&["rule", "list", "br0"]) else {
        panic!("rule list answered something else")
    };
    assert!(rules.iter().any(|r| r.id == id), "{rules:?}");
    let Response::RemoteMacs { entries } = hosts[0].json(&["remote-mac", "show", "br0:vx"]) else {
        panic!("remote-mac show answered something else")
    };
    assert!(
        entries
            .iter()
            .any(|e| e.mac == dst && e.remote == UNDERLAY[1] && e.is_static),
        "{entries:?}"
    );

    hosts[0].json(&["route", "del", "br0", "--dst", &dst]);
    hosts[0].json(&["remote-mac", "del", "br0:vx", &dst]);
    let o = hosts[0].weft(&["route", "list", "br0"]);
    assert_eq!(text(&o.stdout), "no routes\n");
    let (to_1, to_2) = blast(200);
    assert!(
        to_1 >= 200 && to_2 >= 200,
        "replicated again: {to_1} {to_2}"
    );
}

/// Adds a weft-client endpoint on every host's `br0` (VNI 100) and checks it against the
/// other hosts' clients and TAP endpoints, and against VNI 200.
fn client_endpoints(hosts: &[Host], vni100: &[Endpoint], vni200: &[Endpoint]) {
    let mut clients: Vec<ClientEndpoint> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            // weftd puts sockets only in its allowed directories: its own vhost/ here.
            let socket = host.dir.path().join(format!("run/vhost/c{i}.sock"));
            let socket_text = socket.to_str().unwrap();
            host.json(&[
                "port",
                "add",
                "br0:c",
                "vhost-user",
                "--vhost-socket",
                socket_text,
            ]);
            let n = u8::try_from(i + 1).unwrap();
            ClientEndpoint::connect(
                &socket,
                [0x02, 0xc1, 0, 0, 0, n],
                Ipv4Addr::new(10, 100, 0, 10 + n),
            )
        })
        .collect();
    let wait = Duration::from_secs(3);

    // Unicast, every client to every other host's client: the first frame to a MAC no one
    // has learned yet is flooded, the rest follow the learned MACs; each must arrive whole.
    for a in 0..3 {
        for b in (0..3).filter(|b| *b != a) {
            let payload: Vec<u8> = (0..200u8)
                .map(|x| x ^ (16 * u8::try_from(a * 3 + b).unwrap()))
                .collect();
            let (from, to) = (&clients[a], &clients[b]);
            let frame = udp_frame((from.mac, from.ip), (to.mac, to.ip), 5555, &payload);
            clients[a].send(&frame);
            assert!(
                clients[b].receives(&frame, wait),
                "client {a} -> client {b}: not received intact"
            );
        }
    }

    // A client's ARP broadcast reaches every host's TAP endpoint and the other clients in VNI
    // 100, and nothing in VNI 200.
    const BROADCASTS: u64 = 50;
    let arp = arp_request(
        clients[0].mac,
        clients[0].ip,
        Ipv4Addr::new(10, 100, 0, 250),
    );
    let before = delivered(hosts, "br0", "ep100");
    let other_before = delivered(hosts, "br1", &vni200[0].ifname);
    for _ in 0..BROADCASTS {
        clients[0].send(&arp);
    }
    for (i, client) in clients.iter_mut().enumerate().skip(1) {
        let got = client.receive_for(Duration::from_millis(500));
        let copies = got.iter().filter(|f| **f == arp).count();
        assert_eq!(u64::try_from(copies).unwrap(), BROADCASTS, "client {i}");
    }
    let after = delivered(hosts, "br0", "ep100");
    for h in 0..3 {
        assert!(
            after[h].1 >= before[h].1 + BROADCASTS,
            "host {h}'s TAP: (vxlan rx, tap tx) {before:?} -> {after:?}"
        );
    }
    // VNI 200 may carry a stray ARP probe of its own endpoints meanwhile (the kernel checks a
    // neighbour a few seconds after the pings above), never the 50 broadcasts nor their
    // source MAC.
    let other_after = delivered(hosts, "br1", &vni200[0].ifname);
    let client_mac = clients[0].mac.map(|b| format!("{b:02x}")).join(":");
    for h in 0..3 {
        assert!(
            other_after[h].1 < other_before[h].1 + BROADCASTS,
            "a client's broadcast reached VNI 200 on host {h}: {other_before:?} -> {other_after:?}"
        );
        assert!(!hosts[h].fdb_macs("br1").contains(&client_mac));
    }

    // Each host's TAP endpoint pings the client of the next host, which answers ARP and ICMP
    // echo: TAP to client and client to TAP, across the overlay.
    let mut pings: Vec<Child> = (0..3)
        .map(|i| {
            let target = clients[(i + 1) % 3].ip.to_string();
            vni100[i]
                .ns
                .cmd("ping")
                .args(["-c", "3", "-i", "0.2", "-W", "2", "-q", &target])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut answered = [0usize; 3];
    let mut statuses = [None; 3];
    let deadline = Instant::now() + Duration::from_secs(15);
    while statuses.iter().any(Option::is_none) && Instant::now() < deadline {
        for (count, client) in answered.iter_mut().zip(clients.iter_mut()) {
            *count += client.answer_pending();
        }
        for (status, ping) in statuses.iter_mut().zip(pings.iter_mut()) {
            if status.is_none() {
                *status = ping.try_wait().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for (i, ping) in pings.iter_mut().enumerate() {
        let _ = ping.kill();
        let status = statuses[i].unwrap_or_else(|| ping.wait().unwrap());
        assert!(
            status.success(),
            "TAP endpoint {} could not ping client {} (answers sent per client: {answered:?})",
            vni100[i].ip,
            clients[(i + 1) % 3].ip
        );
    }
    drop(clients);
    for host in hosts {
        host.json(&["port", "del", "br0:c"]);
    }
}

/// Captures on an endpoint while `traffic` runs; the IPv4 addresses seen.
fn addresses_seen(endpoint: &Endpoint, traffic: impl FnOnce()) -> Vec<String> {
    let pcap = std::env::temp_dir().join(format!("weft-overlay-{}.pcap", std::process::id()));
    let mut capture = endpoint
        .ns
        .cmd("timeout")
        .args(["20", "tshark", "-q", "-i", &endpoint.ifname, "-w"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    traffic();
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").arg(capture.id().to_string()).status();
    let _ = capture.wait();
    let fields = lab::run_ok(
        Command::new("tshark").arg("-r").arg(&pcap).args([
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "arp.src.proto_ipv4",
            "-e",
            "arp.dst.proto_ipv4",
        ]),
        Duration::from_secs(20),
    );
    let _ = std::fs::remove_file(&pcap);
    fields
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn three_weftd_hosts_join_two_vnis_that_never_leak_into_each_other() {
    if !lab::can_run("three_weftd_hosts_join_two_vnis_that_never_leak_into_each_other") {
        return;
    }
    let _serial = lab::serial();
    let started = Instant::now();
    let binary = common::weftd_binary();

    // The underlay: one bridge, a veth to each host.
    let underlay = Underlay::new("10.99.0", 3, "");
    let host_ns = &underlay.hosts;
    let hosts: Vec<Host> = host_ns
        .iter()
        .map(|ns| Host::start(&binary, ns, &[]))
        .collect();
    let vni100 = overlay(&hosts, "br0", 100, 4789, 100);
    let vni200 = overlay(&hosts, "br1", 200, 4790, 200);

    // Every endpoint pings every other, in both VNIs; the first ping of each pair is an ARP
    // broadcast that must reach the target through head-end replication.
    for endpoints in [&vni100, &vni200] {
        for a in endpoints.iter() {
            for b in endpoints.iter().filter(|b| b.ip != a.ip) {
                assert!(
                    a.ns.ping(&b.ip, 2, 56),
                    "{} cannot ping {}:\n{}",
                    a.ip,
                    b.ip,
                    hosts[0].log()
                );
            }
        }
    }

    // A broadcast reaches every endpoint: 100 ARP requests for an address no one has, each
    // transmitted to the endpoint on both other hosts.
    let before = delivered(&hosts, "br0", "ep100");
    let src = parse_mac(&vni100[0].mac());
    let arp = frames_of_every_kind(src, src).swap_remove(5);
    let sent = weft_testlab::blast::send_frames(&vni100[0].ns.path(), "ep100", &[arp], 100);
    assert_eq!(sent, 100);
    std::thread::sleep(Duration::from_millis(500));
    let after = delivered(&hosts, "br0", "ep100");
    for h in 1..3 {
        assert!(
            after[h].1 >= before[h].1 + 100,
            "host {h}: (vxlan rx, tap tx) {before:?} -> {after:?}"
        );
    }

    eprintln!("pings and broadcast checked after {:?}", started.elapsed());
    // Before the weft-client ports join br0: a vhost-user port takes no USO, and with one on
    // the switch nothing is merged for it.
    udp_runs_arrive_whole_through_merged_super_frames(&hosts, &vni100[0], &vni100[1], 1);
    client_endpoints(&hosts, &vni100, &vni200);
    eprintln!(
        "weft-client endpoints checked after {:?}",
        started.elapsed()
    );
    // What the endpoint sees carries overlay addresses only, never the underlay's.
    let seen = addresses_seen(&vni100[0], || {
        let _ = vni100[0]
            .ns
            .cmd("ip")
            .args(["neigh", "flush", "all"])
            .output();
        assert!(vni100[0].ns.ping("10.100.0.2", 3, 56));
        assert!(vni100[0].ns.ping("10.100.0.3", 3, 56));
    });
    assert!(seen.iter().any(|a| a == "10.100.0.3"), "{seen:?}");
    assert!(
        seen.iter().all(|a| a.starts_with("10.100.0.")),
        "a non-overlay address reached the endpoint: {seen:?}"
    );

    routes_and_remote_macs(&hosts, &vni100);
    eprintln!(
        "routes and remote MACs checked after {:?}",
        started.elapsed()
    );

    // Leak test, both ways.
    no_leak(&hosts, ("br0", &vni100), ("br1", &vni200), 0x10);
    no_leak(&hosts, ("br1", &vni200), ("br0", &vni100), 0x20);
    eprintln!("overlay e2e took {:?}", started.elapsed());
    drop(hosts);
    drop(vni100);
    drop(vni200);
    drop(underlay);
}

/// Pings from `from` to `ip` until one answers or `limit` passes; how long it took.
fn ping_within(from: &Netns, ip: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if from.ping(ip, 1, 56) {
            return Some(start.elapsed());
        }
    }
    None
}

#[test]
fn two_weftd_hosts_over_a_tcp_link_resume_on_their_own_after_the_underlay_is_cut() {
    if !lab::can_run(
        "two_weftd_hosts_over_a_tcp_link_resume_on_their_own_after_the_underlay_is_cut",
    ) {
        return;
    }
    let _serial = lab::serial();
    let binary = common::weftd_binary();
    let underlay = Underlay::new("10.99.0", 2, "");
    let host_ns = &underlay.hosts;
    let hosts: Vec<Host> = host_ns
        .iter()
        .map(|ns| Host::start(&binary, ns, &[]))
        .collect();
    let listen = format!("{}:4795", UNDERLAY[0]);
    hosts[0].json(&["port", "add", "br0:t1", "tcp-link", "--listen", &listen]);
    hosts[1].json(&["port", "add", "br0:t1", "tcp-link", "--peer", &listen]);
    let endpoints: Vec<(Netns, String)> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let ns = Netns::new("e");
            host.json(&["port", "add", "br0:ep", "tap", "--netns", &ns.name]);
            let ip = format!("10.150.0.{}", i + 1);
            ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", "ep"]);
            ns.ip(&["link", "set", "ep", "up"]);
            (ns, ip)
        })
        .collect();
    let (e0, e1) = (&endpoints[0], &endpoints[1]);
    assert!(
        ping_within(&e0.0, &e1.1, Duration::from_secs(15)).is_some(),
        "no ping over the TCP link:\n{}\n{}",
        hosts[0].log(),
        hosts[1].log()
    );
    assert!(e1.0.ping(&e0.1, 3, 1400), "full-size pings the other way");

    // Cut the underlay long enough for pings to fail, then restore it: the link comes back
    // by itself (the connecting side retries with backoff).
    host_ns[1].ip(&["link", "set", "u0", "down"]);
    assert!(!e0.0.ping(&e1.1, 2, 56), "pings crossed a cut underlay");
    std::thread::sleep(Duration::from_secs(3));
    host_ns[1].ip(&["link", "set", "u0", "up"]);
    let resumed = ping_within(&e0.0, &e1.1, Duration::from_secs(20));
    eprintln!("traffic resumed {resumed:?} after the underlay came back");
    assert!(
        resumed.is_some(),
        "traffic did not resume:\n{}\n{}",
        hosts[0].log(),
        hosts[1].log()
    );
    assert!(e1.0.ping(&e0.1, 3, 56));
    drop(hosts);
    drop(endpoints);
    drop(underlay);
}
