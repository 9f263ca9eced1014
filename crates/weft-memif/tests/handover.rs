//! A live memif port handed over as weftd's upgrade does it: described by the old port
//! (its control thread then parked, as in an old weftd about to exit), the description
//! sent as JSON, and the port adopted from it. The peer must see no disconnect, and every
//! frame must arrive once: those waiting in the rings at the hand-over, and those after.
// Frame sizes and seeds here are small constants.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::time::Duration;

use common::pair::{connected_halves, frame, pair, receive_n, send_all};
use weft_memif::{MemifConfig, MemifHandover, MemifPort, MemifPortRx, Role};
use weft_switch::{PortRx, RxBatch};

fn frames(n: usize, seed: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| frame(60 + 97 * i, seed.wrapping_add(i as u8)))
        .collect()
}

fn nothing_more(rx: &mut MemifPortRx) {
    std::thread::sleep(Duration::from_millis(20));
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    assert!(
        batch.is_empty(),
        "{} frames more than were sent",
        batch.len()
    );
    rx.finish();
}

/// Hands over the port of `role`; its peer stays.
fn hand_over(tag: &str, role: Role) {
    let config = MemifConfig::default();
    let (dir, mut server, mut client) = pair(tag, config.clone());
    let [(mut srx, mut stx), (mut crx, mut ctx)] = connected_halves(&mut server, &mut client);
    let a = frames(3, 1);
    assert_eq!(send_all(&mut ctx, &a), 3);
    assert_eq!(receive_n(&mut srx, 3), a);
    let b = frames(3, 40);
    assert_eq!(send_all(&mut stx, &b), 3);
    assert_eq!(receive_n(&mut crx, 3), b);
    // Frames in flight both ways at the hand-over.
    let c = frames(4, 80);
    assert_eq!(send_all(&mut ctx, &c), 4);
    let d = frames(2, 120);
    assert_eq!(send_all(&mut stx, &d), 2);

    let (old, mut old_rx, mut old_tx, peer, mut peer_rx, mut peer_tx) = match role {
        Role::Server => (server, srx, stx, client, crx, ctx),
        Role::Client => (client, crx, ctx, server, srx, stx),
    };
    let (parked, (described, fds)) = old
        .handover_source()
        .suspend(Duration::from_secs(2))
        .unwrap();
    let json = serde_json::to_string(&described).unwrap();
    let described: MemifHandover = serde_json::from_str(&json).unwrap();
    assert_eq!(described.connection.as_ref().map(|c| c.rx.len()), Some(1));
    let mut new = MemifPort::adopt(
        dir.socket_dir(),
        "m.sock".as_ref(),
        MemifConfig { role, ..config },
        described,
        fds,
    )
    .unwrap();
    assert!(new.is_connected(), "{new:?}");
    // The old process exits without closing anything: here it is never dropped.
    std::mem::forget(parked);
    std::mem::forget(old);
    let (mut new_rx, mut new_tx) = new.take_halves().unwrap();

    // What waited for the handed-over port arrives once, at the new one.
    let (waiting_new, waiting_peer) = match role {
        Role::Server => (c, d),
        Role::Client => (d, c),
    };
    assert_eq!(receive_n(&mut new_rx, waiting_new.len()), waiting_new);
    assert_eq!(receive_n(&mut peer_rx, waiting_peer.len()), waiting_peer);
    // And traffic goes on both ways.
    let e = frames(5, 160);
    assert_eq!(send_all(&mut new_tx, &e), 5);
    assert_eq!(receive_n(&mut peer_rx, 5), e);
    let f = frames(5, 200);
    assert_eq!(send_all(&mut peer_tx, &f), 5);
    assert_eq!(receive_n(&mut new_rx, 5), f);
    nothing_more(&mut new_rx);
    nothing_more(&mut peer_rx);
    // The old halves see nothing more either (a paused old worker would not look).
    let _ = (&mut old_rx, &mut old_tx);

    // The peer never saw the port go.
    let p = peer.stats();
    assert_eq!((p.connects, p.disconnects), (1, 0), "{p:?}");
    let n = new.stats();
    assert_eq!((n.connects, n.disconnects), (0, 0), "{n:?}");
    assert_eq!(n.rx_frames, (waiting_new.len() + 5) as u64, "{n:?}");
    assert_eq!(n.tx_frames, 5, "{n:?}");
    drop(new);
    // The new port closing is a disconnect the peer sees.
    assert!(
        (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            peer.stats().disconnects == 1
        }),
        "{:?}",
        peer.stats()
    );
}

#[test]
fn a_server_port_handed_over_keeps_its_client_connected_and_every_frame_arrives_once() {
    hand_over("ho-server", Role::Server);
}

#[test]
fn a_client_port_handed_over_keeps_its_server_connected_and_every_frame_arrives_once() {
    hand_over("ho-client", Role::Client);
}

/// A server's listener outlives the hand-over: a second client can still connect to
/// the adopted port once the first one leaves.
#[test]
fn an_adopted_server_accepts_the_next_client_on_the_listener_it_was_handed() {
    let (dir, server, client) = pair("ho-listen", MemifConfig::default());
    assert!(client.wait_connected(Duration::from_secs(5)));
    let (parked, (described, fds)) = server
        .handover_source()
        .suspend(Duration::from_secs(2))
        .unwrap();
    let new = MemifPort::adopt(
        dir.socket_dir(),
        "m.sock".as_ref(),
        MemifConfig::default(),
        described,
        fds,
    )
    .unwrap();
    std::mem::forget(parked);
    std::mem::forget(server);
    drop(client);
    assert!(
        (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            !new.is_connected()
        }),
        "the first client's goodbye reached the adopted port"
    );
    let again = MemifPort::open(
        dir.socket_dir(),
        "m.sock".as_ref(),
        MemifConfig {
            role: Role::Client,
            ..MemifConfig::default()
        },
    )
    .unwrap();
    assert!(again.wait_connected(Duration::from_secs(5)), "{again:?}");
    assert!(new.wait_connected(Duration::from_secs(5)), "{new:?}");
    assert_eq!(new.stats().connects, 1);
}
