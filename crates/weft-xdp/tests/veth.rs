//! AF_XDP ports on a real veth pair (root; prints SKIP otherwise): frames from the peer's
//! namespace arrive whole through the receive half, frames given to the transmit half
//! arrive whole in the namespace, in native and generic XDP; the program is detached when
//! the port goes.

mod common;

use std::time::Duration;

use common::{can_run, lab, receive_test_frames, send_all, test_frame, Veth};
use weft_switch::{PortDevice, PortHalves};
use weft_xdp::{XdpDrop, XdpMode, XdpOptions, XdpPort};

/// Frame lengths from the shortest Ethernet frame to a full 1500-byte MTU.
const LENS: [usize; 6] = [60, 64, 128, 511, 1024, 1514];
const COUNT: u32 = 240;

fn frames() -> Vec<Vec<u8>> {
    (0..COUNT)
        .map(|s| test_frame(s, LENS[s as usize % LENS.len()]))
        .collect()
}

fn open(veth: &Veth, mode: XdpMode) -> (XdpPort, PortHalves) {
    let mut port = weft_xdp::open(&XdpOptions {
        mode,
        ..XdpOptions::new(&veth.host)
    })
    .unwrap_or_else(|e| panic!("AF_XDP on {}: {e}", veth.host));
    let mut lanes = port.take_lanes(1).expect("halves");
    assert_eq!(lanes.len(), 1, "one pair");
    assert!(port.take_lanes(1).is_err(), "given once");
    (port, lanes.remove(0))
}

/// Frames both ways through a port in `mode`; returns its status words.
fn frames_cross_both_ways(test: &str, mode: XdpMode) -> Vec<String> {
    let _serial = lab::serial();
    let veth = Veth::new("x");
    let (port, mut halves) = open(&veth, mode);
    let (mut peer_rx, mut peer_tx) = veth.peer_socket();
    let rx = halves.rx.as_mut().expect("receive half");
    let sent = frames();

    // Namespace → port.
    assert_eq!(
        send_all(&mut peer_tx, &sent),
        sent.len(),
        "{test}: the peer sent all"
    );
    let got = receive_test_frames(rx.as_mut(), sent.len(), Duration::from_secs(2));
    assert_eq!(got.len(), sent.len(), "{test}: every frame arrived");
    assert!(got == sent, "{test}: whole and in order");

    // Port → namespace.
    let back: Vec<Vec<u8>> = (0..COUNT)
        .map(|s| test_frame(COUNT + s, LENS[s as usize % 6]))
        .collect();
    assert_eq!(
        send_all(halves.tx.as_mut(), &back),
        back.len(),
        "{test}: all taken"
    );
    let got = receive_test_frames(&mut peer_rx, back.len(), Duration::from_secs(2));
    assert_eq!(
        got.len(),
        back.len(),
        "{test}: every frame reached the namespace"
    );
    assert!(got == back, "{test}: whole and in order");

    let mut drops = 0;
    port.visit_counters(&mut |c| {
        if c.class == weft_switch::CounterClass::Drop {
            drops += c.value;
        }
    });
    assert_eq!(drops, 0, "{test}: nothing dropped");
    assert_eq!(port.stats().rx_frames.get(), u64::from(COUNT));
    assert_eq!(port.stats().tx_frames.get(), u64::from(COUNT));
    assert_eq!(port.kind(), "af_xdp");
    assert_eq!(port.mtu(), 1500);
    port.status().offloads
}

#[test]
fn native_xdp_on_veth_carries_frames_both_ways_whole_in_copy_mode() {
    let test = "native_xdp_on_veth_carries_frames_both_ways_whole_in_copy_mode";
    if !can_run(test) {
        return;
    }
    assert_eq!(
        frames_cross_both_ways(test, XdpMode::Native),
        ["native", "copy"]
    );
}

#[test]
fn generic_xdp_on_veth_carries_frames_both_ways_whole() {
    let test = "generic_xdp_on_veth_carries_frames_both_ways_whole";
    if !can_run(test) {
        return;
    }
    assert_eq!(
        frames_cross_both_ways(test, XdpMode::Generic),
        ["generic", "copy"]
    );
}

#[test]
fn auto_mode_picks_native_xdp_on_veth_and_falls_back_to_copy_mode() {
    let test = "auto_mode_picks_native_xdp_on_veth_and_falls_back_to_copy_mode";
    if !can_run(test) {
        return;
    }
    assert_eq!(
        frames_cross_both_ways(test, XdpMode::Auto),
        ["native", "copy"]
    );
}

#[test]
fn dropping_the_port_and_its_halves_detaches_the_program_and_frees_the_interface() {
    if !can_run("dropping_the_port_and_its_halves_detaches_the_program_and_frees_the_interface") {
        return;
    }
    let _serial = lab::serial();
    let veth = Veth::new("x");
    assert!(!veth.link_show().contains("xdp"), "no program before");
    let (port, halves) = open(&veth, XdpMode::Native);
    let shown = veth.link_show();
    assert!(shown.contains("xdp"), "attached: {shown}");

    let second = weft_xdp::open(&XdpOptions::new(&veth.host)).err();
    let second = second.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        second.contains("already open"),
        "a second port is refused: {second}"
    );

    // The halves keep the program while the device is gone, and the other way round.
    drop(port);
    assert!(veth.link_show().contains("xdp"), "the halves still hold it");
    drop(halves);
    let shown = veth.link_show();
    assert!(!shown.contains("xdp"), "detached: {shown}");

    // The interface is free again.
    let (port, halves) = open(&veth, XdpMode::Generic);
    assert!(veth.link_show().contains("xdpgeneric"));
    drop((halves, port));
    assert!(!veth.link_show().contains("xdp"));
}

#[test]
fn frames_larger_than_a_chunk_are_dropped_and_counted_on_transmit() {
    if !can_run("frames_larger_than_a_chunk_are_dropped_and_counted_on_transmit") {
        return;
    }
    let _serial = lab::serial();
    let veth = Veth::new("x");
    let (port, mut halves) = open(&veth, XdpMode::Native);
    let (mut peer_rx, _peer_tx) = veth.peer_socket();
    let frames = vec![test_frame(1, 64), test_frame(2, 5000), test_frame(3, 64)];
    assert_eq!(send_all(halves.tx.as_mut(), &frames), 3, "all taken");
    assert_eq!(port.stats().drops(XdpDrop::TxTooBig), 1);
    let got = receive_test_frames(&mut peer_rx, 2, Duration::from_secs(2));
    assert_eq!(got, [frames[0].clone(), frames[2].clone()]);
}

#[test]
fn a_small_umem_recycles_its_chunks_through_fill_and_completion_rings() {
    if !can_run("a_small_umem_recycles_its_chunks_through_fill_and_completion_rings") {
        return;
    }
    let _serial = lab::serial();
    let veth = Veth::new("x");
    // 32 receive and 32 transmit chunks: 960 frames each way go through each chunk 30 times.
    let mut port = weft_xdp::open(&XdpOptions {
        frames: weft_xdp::MIN_FRAMES,
        ..XdpOptions::new(&veth.host)
    })
    .unwrap_or_else(|e| panic!("AF_XDP on {}: {e}", veth.host));
    let mut halves = port.take_lanes(1).expect("halves").remove(0);
    let (mut peer_rx, mut peer_tx) = veth.peer_socket();
    let rx = halves.rx.as_mut().expect("receive half");
    let mut received = Vec::new();
    for round in 0..60u32 {
        let burst: Vec<Vec<u8>> = (0..16).map(|i| test_frame(round * 16 + i, 60)).collect();
        assert_eq!(send_all(&mut peer_tx, &burst), 16);
        received.extend(receive_test_frames(rx.as_mut(), 16, Duration::from_secs(2)));
    }
    let seqs: Vec<u32> = received.iter().filter_map(|f| common::seq_of(f)).collect();
    assert_eq!(
        seqs,
        (0..960).collect::<Vec<u32>>(),
        "every frame, in order"
    );

    let out: Vec<Vec<u8>> = (0..960).map(|s| test_frame(5000 + s, 60)).collect();
    assert_eq!(
        send_all(halves.tx.as_mut(), &out),
        out.len(),
        "all taken in time"
    );
    let got = receive_test_frames(&mut peer_rx, out.len(), Duration::from_secs(2));
    assert!(
        got == out,
        "all {} of {} reached the namespace in order",
        got.len(),
        out.len()
    );
    let mut dropped = 0;
    port.visit_counters(&mut |c| {
        if c.class == weft_switch::CounterClass::Drop {
            dropped += c.value;
        }
    });
    assert_eq!(dropped, 0);
}

#[test]
fn the_receive_half_is_readable_on_its_socket_when_frames_wait() {
    if !can_run("the_receive_half_is_readable_on_its_socket_when_frames_wait") {
        return;
    }
    let _serial = lab::serial();
    let veth = Veth::new("x");
    let (_port, mut halves) = open(&veth, XdpMode::Native);
    let (_peer_rx, mut peer_tx) = veth.peer_socket();
    let rx = halves.rx.as_mut().expect("receive half");
    let fd = rx.readiness_fd().expect("a readiness descriptor");
    let readable = |timeout_ms: i32| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        n == 1 && p.revents & libc::POLLIN != 0
    };
    assert!(!readable(50), "nothing waits yet");
    assert_eq!(send_all(&mut peer_tx, &[test_frame(1, 60)]), 1);
    assert!(readable(2000), "a frame waits");
    assert_eq!(
        receive_test_frames(rx.as_mut(), 1, Duration::from_secs(2)).len(),
        1
    );
    assert!(!readable(50), "drained");
}
