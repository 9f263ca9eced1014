//! Two TCP link ports (or a port and a hand-made peer) on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::tcp_link::framing::{write_header, HEADER_LEN};
use crate::tcp_link::{
    TcpLinkConfig, TcpLinkDrop, TcpLinkMode, TcpLinkPort, TcpLinkRx, TcpLinkStats, TcpLinkTx,
};

pub(super) struct End {
    pub(super) rx: TcpLinkRx,
    pub(super) tx: TcpLinkTx,
    pub(super) stats: Arc<TcpLinkStats>,
}

pub(super) fn config(mode: TcpLinkMode) -> TcpLinkConfig {
    let mut c = TcpLinkConfig::new(mode);
    c.link_id = 5;
    c.max_backoff = Duration::from_millis(200);
    c
}

pub(super) fn open(c: &TcpLinkConfig) -> (End, Option<SocketAddr>) {
    let port = TcpLinkPort::open(c).unwrap();
    let local = port.local_addr();
    let (rx, tx, stats) = port.split();
    (End { rx, tx, stats }, local)
}

fn listen() -> (End, SocketAddr) {
    let (end, local) = open(&config(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap())));
    (end, local.unwrap())
}

fn connect(to: SocketAddr) -> End {
    open(&config(TcpLinkMode::Connect(to))).0
}

pub(super) fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(super) fn connected(end: &End) -> bool {
    end.stats.snapshot().connected
}

/// A frame whose bytes say which it is.
pub(super) fn frame(n: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&n.to_be_bytes());
    f
}

pub(super) fn send(end: &mut End, frames: &[Vec<u8>]) -> usize {
    let tx: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::with_head(&f[..12], &f[12..], OffloadInfo::default()))
        .collect();
    end.tx.transmit(&tx)
}

/// Receives until `n` frames came (or panics after a while).
pub(super) fn receive(end: &mut End, n: usize) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::new(64);
    let mut got = Vec::new();
    wait_for("frames", Duration::from_secs(10), || {
        batch.clear();
        end.rx.receive(&mut batch);
        for d in batch.descs() {
            got.push(end.rx.frame(d.handle).to_vec());
        }
        end.rx.finish();
        got.len() >= n
    });
    got
}

pub(super) fn exchange(a: &mut End, b: &mut End, first: u16) {
    let ab: Vec<Vec<u8>> = (0..100)
        .map(|i| frame(first + i, 60 + usize::from(i) * 14))
        .collect();
    assert_eq!(send(a, &ab), ab.len());
    assert_eq!(receive(b, ab.len()), ab);
    let ba: Vec<Vec<u8>> = (0..100).map(|i| frame(first + 1000 + i, 1514)).collect();
    assert_eq!(send(b, &ba), ba.len());
    assert_eq!(receive(a, ba.len()), ba);
}

#[test]
fn two_ports_on_loopback_exchange_frames_both_ways() {
    let (mut a, addr) = listen();
    let mut b = connect(addr);
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    exchange(&mut a, &mut b, 0);
    let s = a.stats.snapshot();
    assert_eq!((s.tx_frames, s.rx_frames), (100, 100));
    assert_eq!(s.drops.iter().sum::<u64>(), 0);
}

#[test]
fn a_connecting_port_reconnects_after_its_peer_dies_and_counts_drops_meanwhile() {
    let (a, addr) = listen();
    let mut b = connect(addr);
    wait_for("the connection", Duration::from_secs(5), || connected(&b));
    drop(a);
    wait_for("the loss", Duration::from_secs(5), || !connected(&b));
    let lost: Vec<Vec<u8>> = (0..10).map(|i| frame(i, 100)).collect();
    assert_eq!(
        send(&mut b, &lost),
        10,
        "a disconnected port takes and drops"
    );
    assert_eq!(b.stats.snapshot().drops(TcpLinkDrop::Disconnected), 10);
    // The peer comes back on the same address; the port finds it on its own.
    let mut again = None;
    wait_for("the address to be free", Duration::from_secs(5), || {
        let port = TcpLinkPort::open(&config(TcpLinkMode::Listen(addr)));
        again = port.ok();
        again.is_some()
    });
    let (rx, tx, stats) = again.unwrap().split();
    let mut a = End { rx, tx, stats };
    wait_for("the reconnection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    exchange(&mut a, &mut b, 200);
    let s = b.stats.snapshot();
    // At least the first connection and the one after the peer came back (a loaded machine
    // may see one more attempt land on the old listener while it closes).
    assert!(s.connects >= 2, "{s:?}");
    assert!(s.disconnects >= 1);
}

#[test]
fn a_listening_port_takes_the_newest_connection() {
    let (mut a, addr) = listen();
    let b = connect(addr);
    wait_for("the connection", Duration::from_secs(5), || connected(&b));
    // The peer restarts (say, it noticed a dead link first): the new connection wins.
    drop(b);
    let mut b = connect(addr);
    wait_for("the reconnection", Duration::from_secs(5), || {
        connected(&b) && a.stats.snapshot().connects == 2
    });
    exchange(&mut a, &mut b, 400);
}

#[test]
fn frames_sent_while_nobody_listens_are_counted_drops_and_attempts_go_on() {
    // A port nobody listens on: bind one and close it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut b = connect(addr);
    let frames: Vec<Vec<u8>> = (0..32).map(|i| frame(i, 64)).collect();
    assert_eq!(send(&mut b, &frames), 32);
    let s = b.stats.snapshot();
    assert_eq!(s.drops(TcpLinkDrop::Disconnected), 32);
    assert_eq!(s.tx_frames, 0);
    wait_for("retries", Duration::from_secs(5), || {
        b.stats.snapshot().connect_failures >= 3
    });
}

fn raw_peer(addr: SocketAddr, link_id: u32, len: u32, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut h = [0u8; HEADER_LEN];
    write_header(&mut h, link_id, len, &OffloadInfo::default());
    s.write_all(&h).unwrap();
    s.write_all(body).unwrap();
    s
}

/// Polls the port until the peer's connection is closed by it; the peer sees EOF.
fn assert_cut(a: &mut End, peer: &mut TcpStream, reason: TcpLinkDrop) {
    let mut batch = RxBatch::new(8);
    wait_for("the cut", Duration::from_secs(5), || {
        a.rx.receive(&mut batch);
        assert!(batch.is_empty(), "a bad peer's frame reached the switch");
        a.rx.finish();
        a.stats.snapshot().drops(reason) == 1
    });
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(peer.read(&mut buf), Ok(0) | Err(_)),
        "still connected"
    );
}

#[test]
fn a_peer_with_another_link_id_is_cut_off_and_counted() {
    let (mut a, addr) = listen();
    let mut peer = raw_peer(addr, 6, 60, &frame(1, 60));
    assert_cut(&mut a, &mut peer, TcpLinkDrop::WrongLinkId);
}

#[test]
fn a_peer_claiming_a_huge_frame_is_cut_off_without_waiting_for_it() {
    let (mut a, addr) = listen();
    let mut peer = raw_peer(addr, 5, u32::MAX, &[]);
    assert_cut(&mut a, &mut peer, TcpLinkDrop::BadLength);
}

#[test]
fn a_peer_that_does_not_read_fills_a_bounded_buffer_and_transmit_never_blocks() {
    let mut c = config(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()));
    c.socket_buffer = Some(64 * 1024);
    let (mut a, addr) = open(&c);
    let _peer = TcpStream::connect(addr.unwrap()).unwrap();
    wait_for("the connection", Duration::from_secs(5), || connected(&a));
    let frames: Vec<Vec<u8>> = (0..16).map(|i| frame(i, 1514)).collect();
    let start = Instant::now();
    let mut taken = 0;
    for _ in 0..200 {
        taken += send(&mut a, &frames);
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    let s = a.stats.snapshot();
    assert!(s.drops(TcpLinkDrop::BufferFull) > 0, "{s:?}");
    assert_eq!(
        s.tx_frames + s.drops(TcpLinkDrop::BufferFull),
        200 * 16,
        "every frame taken or counted"
    );
    assert_eq!(s.tx_frames, taken as u64);
    // What was taken fits in the output buffer plus the socket's buffers.
    assert!(taken * (1514 + HEADER_LEN) < (1 << 20) + 4 * 1024 * 1024);
}
