//! Interop with the Linux kernel's vxlan: namespace A holds a kernel `vxlan` device (VNI 42,
//! port 4789, `nolearning`, a static all-zeroes FDB entry toward B); a veth pair is the
//! underlay between A and B; in B's network namespace a weft switch's `VxlanPort` is the
//! tunnel endpoint, and a TAP port on the same switch leads into namespace C. Ping and
//! iperf3 TCP both ways between A's vxlan address and C's, over an IPv4 and an IPv6
//! underlay; tshark (when installed) decodes the captured underlay as VXLAN with VNI 42.
//! A burst of equal small frames that weft sends as `UDP_SEGMENT` runs reaches a socket
//! behind the kernel's vxlan, every datagram in order.
//! Needs root (prints SKIP otherwise).

mod common;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::lab::{self, iperf3, run, tcp_bytes_received, Background, Netns};
use common::runner::{IdlePolicy, SwitchThread};
use weft_overlay::{DecapDrop, VxlanConfig, VxlanPort};
use weft_packet::{MacAddr, Vni};
use weft_switch::{DropReason, PortTx, Switch, SwitchConfig, TxFrame};
use weft_tap::Offloads;
use weft_testlab::ports;

/// Outer TTL / hop limit and DSCP weft is configured with (the kernel's differ).
const TTL: u8 = 17;
const DSCP: u8 = 10;
/// C's TAP MTU: more than the overlay's.
const C_MTU: u32 = 4000;
const A_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0x0a, 0x01]);

struct Underlay {
    a: &'static str,
    b: &'static str,
    prefix: u8,
    mtu: u32,
}

const V4: Underlay = Underlay {
    a: "192.168.77.1",
    b: "192.168.77.2",
    prefix: 24,
    mtu: 1450,
};
const V6: Underlay = Underlay {
    a: "fd00:77::1",
    b: "fd00:77::2",
    prefix: 64,
    mtu: 1430,
};

fn tshark_installed() -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("tshark").is_file()))
        .unwrap_or(false)
}

/// Removes a file on drop.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn interop(test: &str, u: &Underlay) {
    if !lab::can_run(test) {
        return;
    }
    let _serial = lab::serial();
    let ns_a = Netns::new("a");
    let ns_b = Netns::new("b");
    let ns_c = Netns::new("c");
    let (veth_a, veth_b) = (lab::unique("ua"), lab::unique("ub"));
    ns_a.ip(&[
        "link", "add", &veth_a, "type", "veth", "peer", "name", &veth_b, "netns", &ns_b.name,
    ]);
    let v6 = u.a.contains(':');
    for (ns, dev, addr) in [(&ns_a, &veth_a, u.a), (&ns_b, &veth_b, u.b)] {
        let cidr = format!("{addr}/{}", u.prefix);
        let mut args = vec!["addr", "add", &cidr, "dev", dev];
        if v6 {
            args.push("nodad");
        }
        ns.ip(&args);
        ns.ip(&["link", "set", dev, "up"]);
    }

    // A veth may hand an encapsulated frame to the other namespace with its inner L4
    // checksum still to be computed (CHECKSUM_PARTIAL survives the crossing because veth
    // advertises checksum offload for encapsulated traffic); a kernel vxlan receiver keeps
    // that state, but a UDP socket has no way to report it, so weft would forward TCP
    // segments with unfinished checksums. A real wire always carries finished checksums:
    // make A's underlay behave like one (Open vSwitch's userspace tests do the same).
    lab::run_ok(
        ns_a.cmd("ethtool").args(["-K", &veth_a, "tx", "off"]),
        Duration::from_secs(10),
    );

    // A: the kernel's VXLAN tunnel endpoint.
    let mtu = u.mtu.to_string();
    ns_a.ip(&[
        "link",
        "add",
        "vx0",
        "type",
        "vxlan",
        "id",
        "42",
        "dstport",
        "4789",
        "local",
        u.a,
        "dev",
        &veth_a,
        "nolearning",
    ]);
    ns_a.ip(&[
        "link",
        "set",
        "vx0",
        "address",
        &A_MAC.to_string(),
        "mtu",
        &mtu,
        "up",
    ]);
    ns_a.ip(&["addr", "add", "10.78.0.1/24", "dev", "vx0"]);
    lab::run_ok(
        ns_a.cmd("bridge").args([
            "fdb",
            "append",
            "00:00:00:00:00:00",
            "dev",
            "vx0",
            "dst",
            u.b,
        ]),
        Duration::from_secs(10),
    );

    // B: a weft switch with a VXLAN port (sockets in B) and a TAP into C.
    let mut switch = Switch::new("overlay", SwitchConfig::default()).expect("switch");
    let (a_ip, b_ip): (IpAddr, IpAddr) = (u.a.parse().unwrap(), u.b.parse().unwrap());
    let mut config = VxlanConfig::new(SocketAddr::new(b_ip, 4789), Vni::new(42).unwrap())
        .remote(a_ip)
        .static_mac(A_MAC, a_ip)
        .netns(ns_b.path());
    // Ignored: the inner MTU comes from the route to A (veth, 1500) minus the overlay's cost.
    config.mtu = 9000;
    config.ttl = Some(TTL);
    config.dscp = DSCP;
    let vx_port = VxlanPort::open(&config).unwrap_or_else(|e| panic!("open VXLAN port: {e}"));
    assert_eq!(vx_port.mtu(), u.mtu as usize, "inner MTU from the underlay");
    let (vx_rx, vx_tx, vx_stats) = vx_port.split();
    // The port advertises the overlay's real MTU; the switch hands it what is larger.
    assert_eq!(PortTx::caps(&vx_tx).mtu, u.mtu as usize);
    let vxlan = ports::add_port(&mut switch, "vxlan42", vx_rx, vx_tx);
    ports::add_tap(&mut switch, &ns_c, "10.78.0.2/24", |tap| {
        // Larger than the overlay carries, like a misconfigured guest: TCP still works (A's
        // MSS bounds C's segments) and an oversize ping with DF must be answered.
        tap.offloads(Offloads::ALL).mtu(C_MTU)
    });
    let runner = SwitchThread::spawn(switch, Vec::new(), IdlePolicy::default());

    // Capture the underlay while the pings run.
    let capture = TempFile(std::env::temp_dir().join(format!("{}.pcap", lab::unique("cap"))));
    let tshark = tshark_installed().then(|| {
        let cap = Background::spawn(ns_a.cmd("tshark").args([
            "-i",
            &veth_a,
            "-w",
            capture.0.to_str().unwrap(),
            "-a",
            "duration:20",
        ]));
        // tshark creates the file once it captures; on a loaded machine that takes a while.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !capture.0.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(1));
        cap
    });

    assert!(
        ns_a.ping("10.78.0.2", 3, 56),
        "ping A (kernel vxlan) -> C (weft)"
    );
    assert!(
        ns_c.ping("10.78.0.1", 3, 56),
        "ping C (weft) -> A (kernel vxlan)"
    );
    let big = usize::try_from(u.mtu).unwrap() - 28;
    assert!(ns_c.ping("10.78.0.1", 2, big), "full-MTU ping C -> A");
    assert!(ns_a.ping("10.78.0.2", 2, big), "full-MTU ping A -> C");

    if let Some(mut cap) = tshark {
        std::thread::sleep(Duration::from_millis(500));
        cap.interrupt(Duration::from_secs(10));
        check_capture(&capture.0, u);
    } else {
        println!("tshark not installed: underlay capture not checked");
    }

    segmented_burst_reaches_kernel_vxlan(&ns_a, &ns_b, a_ip, b_ip);

    for reverse in [false, true] {
        let mut args = vec!["-t", "2"];
        if reverse {
            args.push("-R");
        }
        let report = iperf3(&ns_c, "10.78.0.2", &ns_a, &args);
        let bytes = tcp_bytes_received(&report);
        assert!(bytes > 5 << 20, "TCP reverse={reverse}: only {bytes} bytes");
        let bps = report["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        println!(
            "{test}: iperf3 TCP A{}C {:.2} Gbit/s",
            if reverse { "<-" } else { "->" },
            bps / 1e9
        );
    }

    // An oversize frame with DF (C's TAP allows more than the overlay carries): weft
    // answers "fragmentation needed" from A's address and MAC, and C learns the path MTU.
    let out = run(
        ns_c.cmd("ping").args([
            "-M",
            "do",
            "-s",
            "2000",
            "-c",
            "2",
            "-i",
            "0.5",
            "-W",
            "1",
            "10.78.0.1",
        ]),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("mtu = {}", u.mtu)) || text.contains(&format!("mtu={}", u.mtu)),
        "frag needed with the overlay's MTU: {text}"
    );

    let switch = runner.stop();
    let refused = switch
        .port_counters(vxlan)
        .expect("the VXLAN port")
        .snapshot();
    let s = vx_stats.snapshot();
    assert!(s.too_big >= 1 && s.too_big_answered >= 1, "{s:?}");
    assert_eq!(
        refused.drops(DropReason::FrameTooBig),
        s.too_big,
        "the switch counted every frame it handed the port as too big"
    );
    println!("{test}: {s:?}");
    assert!(s.rx_frames > 0 && s.tx_frames > 0);
    assert_eq!(s.total_drops(), 0, "nothing the kernel sent was dropped");
    assert_eq!(s.drops(DecapDrop::UnknownRemote), 0);
    assert_eq!(s.tx_errors, 0);
    // The TAP (TSO on) handed weft TCP super-frames: they left as UDP_SEGMENT sends, one
    // system call per up to 64 datagrams, which the kernel's vxlan took like any others.
    assert!(
        s.tx_super_frames > 0 && s.tx_gso_sends >= s.tx_super_frames,
        "{s:?}"
    );
    assert!(
        s.tx_datagrams > s.tx_frames,
        "super-frames became several datagrams: {s:?}"
    );
}

/// A second weft VXLAN port in B (its own receive port; the kernel only checks the
/// destination port) sends 100 equal 64 B frames and a shorter one to A's vxlan address as
/// UDP_SEGMENT runs; a UDP socket in A receives all 101 inner datagrams, in order.
fn segmented_burst_reaches_kernel_vxlan(ns_a: &Netns, ns_b: &Netns, a_ip: IpAddr, b_ip: IpAddr) {
    const SINK_PORT: u16 = 7000;
    let sink = weft_overlay::netns::run_in(Some(ns_a.path().as_path()), || {
        UdpSocket::bind("10.78.0.1:7000").map_err(|source| weft_overlay::OverlayError::Socket {
            call: "bind sink",
            source,
        })
    })
    .expect("a UDP socket in A");
    nix::sys::socket::setsockopt(&sink, nix::sys::socket::sockopt::RcvBufForce, &(4 << 20))
        .expect("SO_RCVBUFFORCE");
    sink.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let config = VxlanConfig::new(SocketAddr::new(b_ip, 4790), Vni::new(42).unwrap())
        .static_mac(A_MAC, a_ip)
        .netns(ns_b.path());
    let (_rx, mut tx, stats) = VxlanPort::open(&config)
        .unwrap_or_else(|e| panic!("open a second VXLAN port: {e}"))
        .split();
    let frames: Vec<Vec<u8>> = (0..101u8)
        .map(|i| {
            let mut out = Vec::new();
            etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xc], A_MAC.octets())
                .ipv4([10, 78, 0, 2], [10, 78, 0, 1], 64)
                .udp(40_000, SINK_PORT)
                .write(&mut out, &vec![i; if i == 100 { 10 } else { 18 }])
                .unwrap();
            out
        })
        .collect();
    let burst: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, weft_packet::OffloadInfo::default()))
        .collect();
    assert_eq!(tx.transmit(&burst), frames.len());
    let s = stats.snapshot();
    assert_eq!(
        (s.tx_small_gso_sends, s.tx_small_gso_datagrams, s.tx_errors),
        (2, 101, 0),
        "64 + 37 datagrams in two UDP_SEGMENT sends: {s:?}"
    );
    let mut buf = [0u8; 2048];
    let mut got = Vec::new();
    while let Ok(n) = sink.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    let want: Vec<Vec<u8>> = (0..101u8)
        .map(|i| vec![i; if i == 100 { 10 } else { 18 }])
        .collect();
    assert_eq!(
        got.len(),
        want.len(),
        "every datagram through the kernel's vxlan"
    );
    assert_eq!(got, want, "in order");
}

/// Every VXLAN packet on the underlay decodes with VNI 42; those weft sent carry its TTL,
/// DSCP and a source port from the dynamic range; none is malformed.
fn check_capture(file: &Path, u: &Underlay) {
    let v6 = u.a.contains(':');
    let (src, ttl, dscp) = if v6 {
        ("ipv6.src", "ipv6.hlim", "ipv6.tclass.dscp")
    } else {
        ("ip.src", "ip.ttl", "ip.dsfield.dscp")
    };
    let out = run(
        Command::new("tshark").args([
            "-r",
            file.to_str().unwrap(),
            "-Y",
            "vxlan",
            "-T",
            "fields",
            "-e",
            "vxlan.vni",
            "-e",
            src,
            "-e",
            "udp.srcport",
            "-e",
            ttl,
            "-e",
            dscp,
        ]),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    // Inner IP fields come after the outer ones (ICMP inside VXLAN): keep the outer.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| {
            l.split('\t')
                .map(|f| f.split(',').next().unwrap_or(""))
                .collect()
        })
        .collect();
    assert!(
        rows.len() >= 10,
        "tshark decoded {} VXLAN packets: {text} {}",
        rows.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut from_weft = 0;
    for row in &rows {
        assert_eq!(row.len(), 5, "{row:?}");
        assert_eq!(row[0], "42", "{row:?}");
        if row[1] == u.b {
            from_weft += 1;
            let port: u16 = row[2].parse().unwrap();
            assert!(port >= 49_152, "{row:?}");
            assert_eq!(row[3], TTL.to_string(), "{row:?}");
            assert_eq!(row[4], DSCP.to_string(), "{row:?}");
        }
    }
    assert!(from_weft >= 5, "{from_weft} packets from weft in {text}");
    let malformed = run(
        Command::new("tshark").args([
            "-r",
            file.to_str().unwrap(),
            "-Y",
            "_ws.malformed || _ws.expert.severity == error",
        ]),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        String::from_utf8_lossy(&malformed.stdout).trim().is_empty(),
        "tshark found malformed packets: {}",
        String::from_utf8_lossy(&malformed.stdout)
    );
}

#[test]
fn kernel_vxlan_and_weft_ping_and_run_iperf3_both_ways_over_ipv4() {
    interop(
        "kernel_vxlan_and_weft_ping_and_run_iperf3_both_ways_over_ipv4",
        &V4,
    );
}

#[test]
fn kernel_vxlan_and_weft_ping_and_run_iperf3_both_ways_over_ipv6() {
    interop(
        "kernel_vxlan_and_weft_ping_and_run_iperf3_both_ways_over_ipv6",
        &V6,
    );
}
