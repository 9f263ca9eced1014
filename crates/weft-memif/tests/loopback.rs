//! Two weft memif ports, a server and a client, connected to each other in one process:
//! each role's rings written by one side and read by the other.
// Frame sizes and seeds here are small constants.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::time::Duration;

use common::pair::{connected_halves, frame, pair, receive_n, send_all};
use weft_memif::{MemifConfig, MemifPort, MemifPortRx};
use weft_switch::{PortRx, RxBatch};

fn exchange(config: MemifConfig, sizes: &[usize]) {
    let (_dir, mut server, mut client) = pair(&format!("x{}", sizes[0]), config);
    let [(mut srx, mut stx), (mut crx, mut ctx)] = connected_halves(&mut server, &mut client);
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| frame(*n, i as u8))
        .collect();
    assert_eq!(send_all(&mut ctx, &frames), frames.len());
    assert_eq!(
        receive_n(&mut srx, frames.len()),
        frames,
        "client to server"
    );
    assert_eq!(send_all(&mut stx, &frames), frames.len());
    assert_eq!(
        receive_n(&mut crx, frames.len()),
        frames,
        "server to client"
    );
    let s = server.stats();
    assert_eq!(
        (s.rx_frames, s.tx_frames),
        (frames.len() as u64, frames.len() as u64),
        "{s:?}"
    );
    assert_eq!(
        s.tx_ring_full + s.rx_bad_descriptor + s.rx_bad_chain,
        0,
        "{s:?}"
    );
}

#[test]
fn a_client_and_a_server_port_exchange_frames_both_ways() {
    exchange(MemifConfig::default(), &[60, 64, 1514, 128, 1000]);
}

#[test]
fn frames_longer_than_a_buffer_travel_chained_both_ways() {
    let config = MemifConfig {
        mtu: 9000,
        buffer_size: 2048,
        ..MemifConfig::default()
    };
    exchange(config, &[9022, 2048, 2049, 60, 4096 + 17]);
}

#[test]
fn a_full_ring_drops_and_counts_the_rest_of_a_burst() {
    let config = MemifConfig {
        log2_ring_size: 4,
        ..MemifConfig::default()
    };
    let (_dir, mut server, mut client) = pair("full", config);
    assert!(server.wait_connected(Duration::from_secs(5)));
    assert!(client.wait_connected(Duration::from_secs(5)));
    let (_srx, _stx) = server.take_halves().unwrap();
    let (_crx, mut ctx) = client.take_halves().unwrap();
    let frames: Vec<Vec<u8>> = (0..20).map(|i| frame(64, i)).collect();
    assert_eq!(send_all(&mut ctx, &frames), 16);
    assert_eq!(client.stats().tx_ring_full, 4);
}

#[test]
fn frames_sent_with_no_peer_are_counted_as_not_connected() {
    let dir = common::Dir::new("alone");
    let mut port =
        MemifPort::open(dir.socket_dir(), "a.sock".as_ref(), MemifConfig::default()).unwrap();
    let (_rx, mut tx) = port.take_halves().unwrap();
    assert_eq!(send_all(&mut tx, &[frame(60, 1)]), 1);
    assert_eq!(port.stats().tx_not_connected, 1);
    assert!(!port.is_connected());
}

#[test]
fn two_queue_pairs_on_two_lanes_each_carry_their_own_frames() {
    let config = MemifConfig {
        queue_pairs: 2,
        ..MemifConfig::default()
    };
    let (_dir, mut server, mut client) = pair("mq", config);
    assert!(server.wait_connected(Duration::from_secs(5)));
    assert!(client.wait_connected(Duration::from_secs(5)));
    assert_eq!(server.status().rings, (2, 2));
    let mut s = server.take_lane_halves(2).unwrap();
    let mut c = client.take_lane_halves(2).unwrap();
    for (crx, _) in c.iter_mut() {
        let mut b = RxBatch::new(8);
        crx.receive(&mut b);
        crx.finish();
    }
    for lane in 0..2 {
        let f = vec![frame(100, lane as u8 * 50)];
        assert_eq!(send_all(&mut c[lane].1, &f), 1);
        assert_eq!(
            receive_n(&mut s[lane].0, 1),
            f,
            "client lane {lane} to server"
        );
        assert_eq!(send_all(&mut s[lane].1, &f), 1);
        assert_eq!(
            receive_n(&mut c[lane].0, 1),
            f,
            "server lane {lane} to client"
        );
    }
    // A lane reads only its own queue: nothing crossed over.
    assert!(receive_n_quick(&mut s[0].0).is_empty() && receive_n_quick(&mut s[1].0).is_empty());
}

fn receive_n_quick(rx: &mut MemifPortRx) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    let got = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).to_vec())
        .collect();
    rx.finish();
    got
}

/// The receive half's readiness descriptor: readable once the peer published frames and
/// signalled, quiet again once they were taken and the ring found empty.
#[test]
fn the_readiness_descriptor_wakes_on_the_peers_interrupt_and_quiets_when_drained() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::BorrowedFd;
    let (_dir, mut server, mut client) = pair("ready", MemifConfig::default());
    assert!(server.wait_connected(Duration::from_secs(5)));
    assert!(client.wait_connected(Duration::from_secs(5)));
    let (mut srx, _stx) = server.take_halves().unwrap();
    let (_crx, mut ctx) = client.take_halves().unwrap();
    let readable = |rx: &MemifPortRx, ms: u16| {
        let raw = rx.readiness_fd().unwrap();
        // SAFETY: the half owns the descriptor and outlives this call.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(ms)).unwrap() > 0
    };
    // The connection's arrival woke it; a look picks it up (and asks for interrupts).
    assert!(readable(&srx, 1000));
    assert!(receive_n_quick(&mut srx).is_empty());
    assert!(receive_n_quick(&mut srx).is_empty());
    assert!(!readable(&srx, 50), "quiet with nothing to receive");
    assert_eq!(send_all(&mut ctx, &[frame(60, 1)]), 1);
    assert!(
        readable(&srx, 1000),
        "the client's interrupt did not wake the half"
    );
    assert_eq!(client.stats().interrupts_sent, 1);
    assert_eq!(receive_n_quick(&mut srx).len(), 1);
    assert!(receive_n_quick(&mut srx).is_empty());
    assert!(
        !readable(&srx, 50),
        "still readable after the ring was drained"
    );
}

/// The peer is asked to signal only when the worker may sleep: frames coming in turn its
/// interrupts off, a look that finds the ring empty turns them on again, and a sustained
/// high rate (switch-driven, as VNET/P's adaptive dispatch) keeps them off while the half
/// asks to be polled.
#[test]
fn the_peer_signals_only_while_the_receive_half_may_sleep() {
    let (_dir, mut server, mut client) = pair("mask", MemifConfig::default());
    let [(mut srx, _stx), (_crx, mut ctx)] = connected_halves(&mut server, &mut client);
    let signals = |c: &MemifPort| c.stats().interrupts_sent;
    let one = [frame(60, 1)];
    // An empty look: interrupts on, nothing to poll for.
    assert!(receive_n_quick(&mut srx).is_empty());
    assert!(!srx.needs_polling());
    send_all(&mut ctx, &one);
    assert_eq!(signals(&client), 1);
    // Frames came: the peer is asked not to signal, and the half polls.
    assert_eq!(receive_n_quick(&mut srx).len(), 1);
    assert!(srx.needs_polling());
    send_all(&mut ctx, &one);
    assert_eq!(signals(&client), 1, "signalled while masked");
    assert_eq!(receive_n_quick(&mut srx).len(), 1);
    // The ring found empty: interrupts on again.
    assert!(receive_n_quick(&mut srx).is_empty());
    assert!(!srx.needs_polling());
    send_all(&mut ctx, &one);
    assert_eq!(signals(&client), 2);
    assert_eq!(receive_n_quick(&mut srx).len(), 1);
    // 30 ms of 64 frames every half millisecond or so (far above 10 000 frames/s even
    // on a loaded machine): switch-driven, so empty looks leave them off.
    let burst: Vec<Vec<u8>> = (0..64).map(|i| frame(60, i)).collect();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(30) {
        send_all(&mut ctx, &burst);
        while !receive_n_quick(&mut srx).is_empty() {}
        std::thread::sleep(Duration::from_micros(500));
    }
    while !receive_n_quick(&mut srx).is_empty() {}
    assert!(
        srx.needs_polling(),
        "a busy port's empty look turned interrupts on"
    );
    let before = signals(&client);
    send_all(&mut ctx, &one);
    assert_eq!(signals(&client), before, "signalled while switch-driven");
}
