//! A namespace reached through a veth pair whose other end is an AF_PACKET port, talking to
//! a namespace on a TAP port of the same switch. Needs root (prints SKIP otherwise).

mod common;

use std::time::Duration;

use common::lab::{self, iperf3, tcp_bytes_received, tcp_transfer, test_data, udp_result};
use common::LabBuilder;
use weft_switch::DropReason;
use weft_tap::Offloads;

#[test]
fn a_veth_namespace_on_af_packet_talks_to_a_tap_namespace() {
    if !lab::can_run("a_veth_namespace_on_af_packet_talks_to_a_tap_namespace") {
        return;
    }
    let _serial = lab::serial();
    for mtu in [1500, 9000] {
        let lab = LabBuilder::new()
            .veth(3, mtu, Offloads::ALL)
            .tap(2, mtu, Offloads::ALL, 1)
            .start();
        let (v, t) = (&lab.ends[0], &lab.ends[1]);
        let size = mtu as usize - 28;
        assert!(v.ns.ping(&t.ip, 3, size), "MTU {mtu}: ping veth -> tap");
        assert!(t.ns.ping(&v.ip, 3, size), "MTU {mtu}: ping tap -> veth");

        for reverse in [false, true] {
            let mut args = vec!["-t", "2"];
            if reverse {
                args.push("-R");
            }
            let report = iperf3(&t.ns, &t.ip, &v.ns, &args);
            let bytes = tcp_bytes_received(&report);
            assert!(
                bytes > 10 << 20,
                "MTU {mtu} TCP reverse={reverse}: {bytes} bytes"
            );
            args.extend(["-u", "-b", "100M"]);
            let (bytes, lost) = udp_result(&iperf3(&t.ns, &t.ip, &v.ns, &args));
            assert!(
                bytes > 1 << 20,
                "MTU {mtu} UDP reverse={reverse}: {bytes} bytes"
            );
            assert!(lost < 10.0, "MTU {mtu} UDP reverse={reverse}: {lost}% lost");
        }

        let data = test_data(4 << 20, u64::from(mtu));
        let want = (data.len(), lab::fnv1a(&data));
        assert_eq!(
            tcp_transfer(&v.ns, &t.ns, &t.ip, &data, Duration::from_secs(30)),
            want
        );
        assert_eq!(
            tcp_transfer(&t.ns, &v.ns, &v.ip, &data, Duration::from_secs(30)),
            want
        );

        // Frames the switch sent on the veth never came back in: no source address moved
        // and nothing bounced to the port it came from.
        let c = v.counters.snapshot();
        assert_eq!(c.drops(DropReason::SamePort), 0, "{c:?}");
        assert_eq!(v.stats[0].snapshot().rx_own_skipped, 0);
        assert!(v.rx_gso() > 0, "super-frames came in through the ring");
        assert!(
            t.tx_gso() > 0 && v.tx_gso() > 0,
            "and went out whole both ways"
        );
        assert_eq!(v.port_drops() + t.port_drops(), 0);
    }
}

#[test]
fn an_af_packet_port_without_offloads_gets_segmented_frames() {
    if !lab::can_run("an_af_packet_port_without_offloads_gets_segmented_frames") {
        return;
    }
    let _serial = lab::serial();
    let lab = LabBuilder::new()
        .veth(3, 1500, Offloads::NONE)
        .tap(2, 1500, Offloads::ALL, 1)
        .start();
    let (v, t) = (&lab.ends[0], &lab.ends[1]);
    assert!(t.ns.ping(&v.ip, 2, 56));
    let data = test_data(4 << 20, 3);
    let want = (data.len(), lab::fnv1a(&data));
    assert_eq!(
        tcp_transfer(&t.ns, &v.ns, &v.ip, &data, Duration::from_secs(30)),
        want
    );
    assert!(t.rx_gso() > 0, "the TAP side sent super-frames");
    assert_eq!(v.tx_gso(), 0, "the core segmented them for the veth");
    assert_eq!(v.tx_csum_partial(), 0, "with checksums complete");
}
