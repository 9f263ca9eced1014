//! Handing a live link over (as to another weftd, in one process: the descriptors are
//! duplicates, so the old port may be dropped once the new one holds its own). The peer
//! must see nothing: no reconnection, no handshake, no frame lost or doubled.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use weft_packet::OffloadInfo;

use super::sockets::{config, connected, exchange, frame, receive, send, wait_for, End};
use crate::tcp_link::auth::{self, Hello, LinkKey, Role, HELLO_LEN, PROOF_LEN};
use crate::tcp_link::framing::{write_header, HEADER_LEN, MAGIC, MAX_WIRE_FRAME_LEN};
use crate::tcp_link::{
    TcpLinkConfig, TcpLinkHandover, TcpLinkHandoverSource, TcpLinkMode, TcpLinkPort,
};

fn key() -> LinkKey {
    LinkKey::new(vec![7; 32]).unwrap()
}

fn listening(key: Option<&LinkKey>) -> TcpLinkConfig {
    let mut c = config(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()));
    c.key = key.cloned();
    c
}

/// Opens a link and keeps its hand-over source.
fn open(c: &TcpLinkConfig) -> (End, TcpLinkHandoverSource, Option<SocketAddr>) {
    let port = TcpLinkPort::open(c).unwrap();
    let source = port.handover_source();
    let local = port.local_addr();
    (ends(port), source, local)
}

fn ends(port: TcpLinkPort) -> End {
    let (rx, tx, stats) = port.split();
    End { rx, tx, stats }
}

/// The description as weftd carries it: through JSON.
fn through_json(h: &TcpLinkHandover) -> TcpLinkHandover {
    serde_json::from_str(&serde_json::to_string(h).unwrap()).unwrap()
}

/// A frame as it travels: header, then its bytes.
fn encode(f: &[u8]) -> Vec<u8> {
    let mut h = [0u8; HEADER_LEN];
    let len = u32::try_from(f.len()).unwrap();
    write_header(&mut h, 5, len, &OffloadInfo::default());
    [&h[..], f].concat()
}

/// A hand-made peer that connects (and proves the key when given one).
fn raw_peer(addr: SocketAddr, key: Option<&LinkKey>) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if let Some(k) = key {
        let ours = Hello::fresh(Role::Connector, 5).unwrap();
        s.write_all(&ours.encode()).unwrap();
        let mut b = [0u8; HELLO_LEN];
        s.read_exact(&mut b).unwrap();
        let theirs = Hello::parse(&b).unwrap();
        s.write_all(&auth::prove(k, &ours, &theirs)).unwrap();
        let mut proof = [0u8; PROOF_LEN];
        s.read_exact(&mut proof).unwrap();
        auth::verify(k, &ours, &theirs, &proof).unwrap();
    }
    s
}

/// Reads `n` frames from the stream; anything but frames (a second hello, say) fails.
fn read_frames(s: &mut TcpStream, n: usize) -> Vec<Vec<u8>> {
    let mut frames = Vec::with_capacity(n);
    let mut header = [0u8; HEADER_LEN];
    while frames.len() < n {
        s.read_exact(&mut header).unwrap();
        assert_eq!(
            header[..3],
            MAGIC,
            "a frame header, after {} frames",
            frames.len()
        );
        let len = u32::from_be_bytes(header[8..12].try_into().unwrap());
        let len = usize::try_from(len).unwrap();
        assert!(len <= MAX_WIRE_FRAME_LEN);
        let mut f = vec![0u8; len];
        s.read_exact(&mut f).unwrap();
        frames.push(f);
    }
    frames
}

/// Sends all of `frames`, waiting for room as it goes.
fn send_all(end: &mut End, frames: &[Vec<u8>]) {
    let mut at = 0;
    wait_for("room to send", Duration::from_secs(10), || {
        at += send(end, &frames[at..]);
        at == frames.len()
    });
}

/// A listening link with a hand-made peer: the peer sends a frame's first half, the link
/// queues more than the peer reads; the link is handed over; the peer sends the rest, then
/// reads. Every frame arrives once, in order, and nothing but frames is on the wire.
fn a_listening_link_moves_mid_frame_with_unsent_bytes(key: Option<&LinkKey>) {
    let mut c = listening(key);
    c.socket_buffer = Some(16 << 10);
    c.out_buffer = HEADER_LEN + MAX_WIRE_FRAME_LEN;
    let (mut a, source, addr) = open(&c);
    let mut peer = raw_peer(addr.unwrap(), key);
    wait_for("the connection", Duration::from_secs(5), || connected(&a));

    let split = frame(1, 1000);
    let wire = encode(&split);
    let cut = HEADER_LEN + 500;
    peer.write_all(&wire[..cut]).unwrap();
    for _ in 0..20 {
        assert!(
            receive_now(&mut a).is_empty(),
            "half a frame is not a frame"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut queued = Vec::new();
    for n in 0.. {
        assert!(n < 1000, "the peer never stopped taking");
        let batch: Vec<Vec<u8>> = (0..32).map(|i| frame(100 + n * 32 + i, 1514)).collect();
        let taken = send(&mut a, &batch);
        queued.extend_from_slice(&batch[..taken]);
        if taken < batch.len() {
            break;
        }
    }

    let (h, fds) = source.handover().unwrap();
    let conn = h.connection.as_ref().expect("the connection is carried");
    assert_eq!(
        conn.received,
        wire[..cut],
        "the half frame, from user space"
    );
    assert!(!conn.unsent.is_empty(), "bytes wait in the output buffer");
    assert_eq!(conn.authenticated, key.is_some());
    assert!(h.listener_fd.is_some());

    // Paused: the peer finishes its frame and sends another; the old port goes away.
    let next = frame(2, 60);
    peer.write_all(&wire[cut..]).unwrap();
    peer.write_all(&encode(&next)).unwrap();
    drop(a);
    std::thread::sleep(Duration::from_millis(200));

    let mut a = ends(TcpLinkPort::adopt(&c, through_json(&h), fds).unwrap());
    assert!(connected(&a), "the connection is up at once");
    assert_eq!(receive(&mut a, 2), [split, next]);
    let after: Vec<Vec<u8>> = (0..50).map(|i| frame(30_000 + i, 300)).collect();
    let total = queued.len() + after.len();
    let reader = std::thread::spawn(move || (read_frames(&mut peer, total), peer));
    send_all(&mut a, &after);
    // The peer stays connected until the end.
    let (got, _peer) = reader.join().unwrap();
    queued.extend(after);
    assert_eq!(got.len(), queued.len());
    assert!(got == queued, "every frame once, in order");
    let s = a.stats.snapshot();
    assert_eq!((s.connects, s.disconnects), (1, 0), "{s:?}");
}

/// Frames received now (no waiting).
fn receive_now(end: &mut End) -> Vec<Vec<u8>> {
    use weft_switch::{PortRx, RxBatch};
    let mut batch = RxBatch::new(64);
    end.rx.receive(&mut batch);
    let got = batch
        .descs()
        .iter()
        .map(|d| end.rx.frame(d.handle).to_vec())
        .collect();
    end.rx.finish();
    got
}

#[test]
fn a_listening_link_moves_mid_frame_with_unsent_bytes_and_its_peer_gets_every_frame_once() {
    a_listening_link_moves_mid_frame_with_unsent_bytes(None);
}

#[test]
fn an_authenticated_listening_link_moves_mid_frame_without_a_new_handshake() {
    a_listening_link_moves_mid_frame_with_unsent_bytes(Some(&key()));
}

#[test]
fn an_authenticated_connecting_link_moves_and_both_ends_keep_one_connection() {
    let k = key();
    let (mut a, _, addr) = open(&listening(Some(&k)));
    let mut cb = config(TcpLinkMode::Connect(addr.unwrap()));
    cb.key = Some(k.clone());
    let (mut b, source, _) = open(&cb);
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    exchange(&mut a, &mut b, 0);

    let (h, fds) = source.handover().unwrap();
    assert!(h.listener_fd.is_none());
    let while_paused: Vec<Vec<u8>> = (0..20).map(|i| frame(500 + i, 800)).collect();
    assert_eq!(send(&mut a, &while_paused), while_paused.len());
    drop(b);
    std::thread::sleep(Duration::from_millis(200));

    let mut b = ends(TcpLinkPort::adopt(&cb, through_json(&h), fds).unwrap());
    assert_eq!(receive(&mut b, while_paused.len()), while_paused);
    exchange(&mut a, &mut b, 2000);
    let s = a.stats.snapshot();
    assert_eq!(
        (s.connects, s.disconnects),
        (1, 0),
        "the peer saw one connection: {s:?}"
    );
    assert_eq!(s.drops.iter().sum::<u64>(), 0, "{s:?}");
    assert_eq!(b.stats.snapshot().drops.iter().sum::<u64>(), 0);
}

#[test]
fn an_abandoned_hand_over_resumes_the_link_where_it_was() {
    let (mut a, source, addr) = open(&listening(None));
    let mut b = super::sockets::open(&config(TcpLinkMode::Connect(addr.unwrap()))).0;
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    let (_h, fds) = source.handover().unwrap();
    drop(fds);
    source.resume();
    exchange(&mut a, &mut b, 0);
    // Taken and abandoned again, with bytes waiting for the link thread to flush.
    let (_h, _fds) = source.handover().unwrap();
    source.resume();
    exchange(&mut b, &mut a, 300);
    assert_eq!(a.stats.snapshot().connects, 1);
}

#[test]
fn a_listening_link_without_a_connection_hands_over_its_listener_to_which_the_peer_connects() {
    let c = listening(None);
    let (a, source, addr) = open(&c);
    let (h, fds) = source.handover().unwrap();
    assert!(h.connection.is_none());
    assert_eq!(fds.len(), 1);
    drop(a);
    let mut a = ends(TcpLinkPort::adopt(&c, through_json(&h), fds).unwrap());
    let mut b = super::sockets::open(&config(TcpLinkMode::Connect(addr.unwrap()))).0;
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    exchange(&mut a, &mut b, 0);
}
