//! Two network namespaces, each with a TAP on one weft switch: ping, iperf3 TCP and UDP both
//! ways, a file with a checksum, MTU 1500 and 9000, multi-queue. Needs root (prints SKIP
//! otherwise).

mod common;

use std::time::Duration;

use common::lab::{self, iperf3, tcp_bytes_received, tcp_transfer, test_data, udp_result};
use common::LabBuilder;
use weft_switch::DropReason;
use weft_tap::{Offloads, PortDrop};

#[test]
fn two_tap_namespaces_ping_and_run_iperf3_tcp_and_udp_both_ways() {
    if !lab::can_run("two_tap_namespaces_ping_and_run_iperf3_tcp_and_udp_both_ways") {
        return;
    }
    let _serial = lab::serial();
    let lab = LabBuilder::new()
        .tap(1, 1500, Offloads::ALL, 1)
        .tap(2, 1500, Offloads::ALL, 1)
        .start();
    let (a, b) = (&lab.ends[0], &lab.ends[1]);
    assert!(a.ns.ping(&b.ip, 3, 56), "ping a -> b");
    assert!(b.ns.ping(&a.ip, 3, 56), "ping b -> a");

    for reverse in [false, true] {
        let mut args = vec!["-t", "2"];
        if reverse {
            args.push("-R");
        }
        let report = iperf3(&b.ns, &b.ip, &a.ns, &args);
        let bytes = tcp_bytes_received(&report);
        assert!(
            bytes > 10 << 20,
            "TCP reverse={reverse}: only {bytes} bytes"
        );

        args.extend(["-u", "-b", "100M"]);
        let report = iperf3(&b.ns, &b.ip, &a.ns, &args);
        let (bytes, lost) = udp_result(&report);
        assert!(bytes > 1 << 20, "UDP reverse={reverse}: only {bytes} bytes");
        // Loss here is the kernel's: a TAP's queue overflows while the switch thread waits
        // for a CPU (18 % was seen at 200 Mbit/s with a compiler on both CPUs). The switch's
        // own drops are asserted zero below.
        assert!(lost < 25.0, "UDP reverse={reverse}: {lost}% lost");
    }

    // TCP super-frames crossed the switch whole: the kernels sent them, and the switch
    // wrote them as they were.
    assert!(
        a.rx_gso() > 0 && b.rx_gso() > 0,
        "the kernels sent super-frames"
    );
    assert!(
        a.tx_gso() > 0 && b.tx_gso() > 0,
        "super-frames were delivered unsegmented"
    );
    assert_eq!(a.port_drops() + b.port_drops(), 0);
    for end in [a, b] {
        let c = end.counters.snapshot();
        assert_eq!(c.drops(DropReason::BadOffload), 0);
        assert_eq!(c.drops(DropReason::FrameTooBig), 0);
    }
}

#[test]
fn a_file_crosses_the_switch_intact_both_ways() {
    if !lab::can_run("a_file_crosses_the_switch_intact_both_ways") {
        return;
    }
    let _serial = lab::serial();
    let lab = LabBuilder::new()
        .tap(1, 1500, Offloads::ALL, 1)
        .tap(2, 1500, Offloads::ALL, 1)
        .start();
    let (a, b) = (&lab.ends[0], &lab.ends[1]);
    let data = test_data(8 << 20, 7);
    let want = (data.len(), lab::fnv1a(&data));
    assert_eq!(
        tcp_transfer(&a.ns, &b.ns, &b.ip, &data, Duration::from_secs(30)),
        want
    );
    assert_eq!(
        tcp_transfer(&b.ns, &a.ns, &a.ip, &data, Duration::from_secs(30)),
        want
    );
}

#[test]
fn mtu_9000_carries_jumbo_pings_and_tcp_with_and_without_offloads() {
    if !lab::can_run("mtu_9000_carries_jumbo_pings_and_tcp_with_and_without_offloads") {
        return;
    }
    let _serial = lab::serial();
    for (oa, ob) in [
        (Offloads::ALL, Offloads::ALL),
        (Offloads::ALL, Offloads::NONE),
    ] {
        let lab = LabBuilder::new()
            .tap(1, 9000, oa, 1)
            .tap(2, 9000, ob, 1)
            .start();
        let (a, b) = (&lab.ends[0], &lab.ends[1]);
        assert!(
            a.ns.ping(&b.ip, 3, 8972),
            "jumbo ping a -> b ({oa:?}/{ob:?})"
        );
        assert!(
            !a.ns.ping(&b.ip, 1, 8973),
            "a ping above the MTU must not pass"
        );
        let data = test_data(4 << 20, 9);
        let want = (data.len(), lab::fnv1a(&data));
        assert_eq!(
            tcp_transfer(&a.ns, &b.ns, &b.ip, &data, Duration::from_secs(30)),
            want
        );
        assert_eq!(
            tcp_transfer(&b.ns, &a.ns, &a.ip, &data, Duration::from_secs(30)),
            want
        );
        let report = iperf3(&b.ns, &b.ip, &a.ns, &["-t", "2"]);
        assert!(tcp_bytes_received(&report) > 10 << 20);
        if ob == Offloads::NONE {
            // A's super-frames were cut into 9000-byte segments for B.
            assert!(a.rx_gso() > 0);
            assert_eq!(b.tx_gso(), 0);
        }
        assert_eq!(a.port_drops() + b.port_drops(), 0);
    }
}

#[test]
fn a_multi_queue_tap_carries_parallel_streams() {
    if !lab::can_run("a_multi_queue_tap_carries_parallel_streams") {
        return;
    }
    let _serial = lab::serial();
    let lab = LabBuilder::new()
        .tap(1, 1500, Offloads::ALL, 2)
        .tap(2, 1500, Offloads::ALL, 2)
        .start();
    let (a, b) = (&lab.ends[0], &lab.ends[1]);
    assert_eq!(a.stats.len(), 2);
    assert!(a.ns.ping(&b.ip, 2, 56));
    let report = iperf3(&b.ns, &b.ip, &a.ns, &["-t", "2", "-P", "4"]);
    assert!(tcp_bytes_received(&report) > 10 << 20);
    let per_queue: Vec<u64> = a.stats.iter().map(|s| s.snapshot().rx_frames).collect();
    assert!(per_queue.iter().sum::<u64>() > 0, "{per_queue:?}");
}

#[test]
fn frames_above_the_mtu_the_port_was_opened_with_are_dropped_as_oversize() {
    if !lab::can_run("frames_above_the_mtu_the_port_was_opened_with_are_dropped_as_oversize") {
        return;
    }
    let _serial = lab::serial();
    let lab = LabBuilder::new()
        .tap(1, 1500, Offloads::ALL, 1)
        .tap(2, 1500, Offloads::ALL, 1)
        .start();
    let (a, b) = (&lab.ends[0], &lab.ends[1]);
    assert!(a.ns.ping(&b.ip, 1, 56));
    // Raised behind the port's back: the kernel now sends 4000-byte frames the port was not
    // opened for. They are dropped and counted; ordinary traffic goes on.
    a.ns.ip(&["link", "set", "dev", &a.ifname, "mtu", "9000"]);
    assert!(!a.ns.ping(&b.ip, 2, 4000));
    assert!(a.stats[0].drops(PortDrop::Oversize) >= 2);
    assert!(a.ns.ping(&b.ip, 2, 56));
}
