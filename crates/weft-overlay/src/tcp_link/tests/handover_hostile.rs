//! TCP link hand-overs that do not hold are refused with a typed error, never a panic.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;

use super::sockets::config;
use crate::tcp_link::{
    LinkKey, TcpConnectionHandover, TcpLinkConfig, TcpLinkHandover, TcpLinkMode, TcpLinkPort,
};
use crate::{HandoverError, OverlayError};

/// A listener on loopback and the configuration that listens there.
fn listener() -> (TcpListener, TcpLinkConfig) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = config(TcpLinkMode::Listen(l.local_addr().unwrap()));
    (l, c)
}

/// A connection accepted on `l`, and the peer's end.
fn accepted(l: &TcpListener) -> (TcpStream, TcpStream) {
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l.accept().unwrap().0, peer)
}

fn description(connection: Option<TcpConnectionHandover>) -> TcpLinkHandover {
    TcpLinkHandover {
        version: crate::handover::HANDOVER_VERSION,
        link_id: 5,
        listener_fd: Some(0),
        connection,
    }
}

fn connection(fd: usize) -> TcpConnectionHandover {
    TcpConnectionHandover {
        fd,
        authenticated: false,
        received: Vec::new(),
        unsent: Vec::new(),
    }
}

fn refusal(r: Result<TcpLinkPort, OverlayError>) -> HandoverError {
    match r {
        Err(OverlayError::Handover(e)) => e,
        Err(e) => panic!("not a hand-over error: {e}"),
        Ok(_) => panic!("adopted"),
    }
}

#[test]
fn a_well_formed_hand_over_of_a_listener_and_its_connection_is_adopted() {
    let (l, c) = listener();
    let (conn, _peer) = accepted(&l);
    let fds = vec![OwnedFd::from(l), OwnedFd::from(conn)];
    let port = TcpLinkPort::adopt(&c, description(Some(connection(1))), fds).unwrap();
    assert!(port.split().2.snapshot().connected);
}

#[test]
fn another_version_or_link_id_is_refused() {
    let (l, c) = listener();
    let mut h = description(None);
    h.version = 0;
    let e = refusal(TcpLinkPort::adopt(&c, h, vec![OwnedFd::from(l)]));
    assert!(matches!(e, HandoverError::Version { found: 0, .. }), "{e}");
    let (l, c) = listener();
    let mut h = description(None);
    h.link_id = 6;
    let e = refusal(TcpLinkPort::adopt(&c, h, vec![OwnedFd::from(l)]));
    assert!(matches!(e, HandoverError::Mismatch(_)), "{e}");
}

#[test]
fn descriptor_indexes_out_of_range_or_left_over_are_refused() {
    let (l, c) = listener();
    let mut h = description(None);
    h.listener_fd = Some(7);
    let e = refusal(TcpLinkPort::adopt(&c, h, vec![OwnedFd::from(l)]));
    assert!(
        matches!(e, HandoverError::FdIndex { index: 7, count: 1 }),
        "{e}"
    );
    let (l, c) = listener();
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(Some(connection(0))),
        vec![OwnedFd::from(l)],
    ));
    assert!(matches!(e, HandoverError::FdReused(0)), "{e}");
    let (l, c) = listener();
    let extra = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(None),
        vec![OwnedFd::from(l), extra],
    ));
    assert!(
        matches!(
            e,
            HandoverError::FdUnused {
                unused: 1,
                count: 2
            }
        ),
        "{e}"
    );
    let (_l, c) = listener();
    let e = refusal(TcpLinkPort::adopt(&c, description(None), Vec::new()));
    assert!(
        matches!(e, HandoverError::FdIndex { index: 0, count: 0 }),
        "{e}"
    );
}

#[test]
fn a_file_a_udp_socket_or_a_connection_in_place_of_the_listener_is_refused() {
    let (_l, c) = listener();
    let file = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let e = refusal(TcpLinkPort::adopt(&c, description(None), vec![file]));
    assert!(matches!(e, HandoverError::NotASocket { .. }), "{e}");
    let udp = OwnedFd::from(UdpSocket::bind("127.0.0.1:0").unwrap());
    let e = refusal(TcpLinkPort::adopt(&c, description(None), vec![udp]));
    assert!(matches!(e, HandoverError::WrongSocket { .. }), "{e}");
    let (l, c) = listener();
    let (conn, _peer) = accepted(&l);
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(None),
        vec![OwnedFd::from(conn)],
    ));
    assert!(matches!(e, HandoverError::WrongSocket { .. }), "{e}");
    // And a listener where the connection belongs.
    let (l, c) = listener();
    let twin = l.try_clone().unwrap();
    let fds = vec![OwnedFd::from(l), OwnedFd::from(twin)];
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(Some(connection(1))),
        fds,
    ));
    assert!(matches!(e, HandoverError::WrongSocket { .. }), "{e}");
}

#[test]
fn a_listener_bound_elsewhere_or_a_connection_to_another_peer_is_refused() {
    let (l, _) = listener();
    let (_, c) = listener();
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(None),
        vec![OwnedFd::from(l)],
    ));
    assert!(matches!(e, HandoverError::WrongAddress { .. }), "{e}");
    // A connecting link whose connection goes elsewhere than its peer's address.
    let (l, _) = listener();
    let (_accepted, conn) = accepted(&l);
    let other: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let c = config(TcpLinkMode::Connect(other));
    let mut h = description(Some(connection(0)));
    h.listener_fd = None;
    let e = refusal(TcpLinkPort::adopt(&c, h, vec![OwnedFd::from(conn)]));
    assert!(matches!(e, HandoverError::WrongAddress { .. }), "{e}");
    // A listening link handed a connecting one's description.
    let (l, c) = listener();
    let mut h = description(None);
    h.listener_fd = None;
    drop(l);
    let e = refusal(TcpLinkPort::adopt(&c, h, Vec::new()));
    assert!(matches!(e, HandoverError::Mismatch(_)), "{e}");
}

#[test]
fn garbage_buffered_lengths_are_refused() {
    for (received, unsent) in [(10 << 20, 0), (0, 10 << 20)] {
        let (l, c) = listener();
        let (conn, _peer) = accepted(&l);
        let mut carried = connection(1);
        carried.received = vec![0xaa; received];
        carried.unsent = vec![0xbb; unsent];
        let fds = vec![OwnedFd::from(l), OwnedFd::from(conn)];
        let e = refusal(TcpLinkPort::adopt(&c, description(Some(carried)), fds));
        assert!(matches!(e, HandoverError::BadState(_)), "{e}");
    }
}

#[test]
fn a_connection_authenticated_otherwise_than_the_configuration_says_is_refused() {
    let (l, c) = listener();
    let (conn, _peer) = accepted(&l);
    let mut carried = connection(1);
    carried.authenticated = true;
    let fds = vec![OwnedFd::from(l), OwnedFd::from(conn)];
    let e = refusal(TcpLinkPort::adopt(&c, description(Some(carried)), fds));
    assert!(matches!(e, HandoverError::Mismatch(_)), "{e}");
    let (l, mut c) = listener();
    c.key = Some(LinkKey::new(vec![1; 32]).unwrap());
    let (conn, _peer) = accepted(&l);
    let fds = vec![OwnedFd::from(l), OwnedFd::from(conn)];
    let e = refusal(TcpLinkPort::adopt(
        &c,
        description(Some(connection(1))),
        fds,
    ));
    assert!(matches!(e, HandoverError::Mismatch(_)), "{e}");
}

#[test]
fn garbage_carried_bytes_cut_the_connection_like_garbage_from_the_peer() {
    use weft_switch::{PortRx, RxBatch};
    let (l, c) = listener();
    let (conn, _peer) = accepted(&l);
    let mut carried = connection(1);
    carried.received = vec![0xcc; 100];
    let fds = vec![OwnedFd::from(l), OwnedFd::from(conn)];
    let (mut rx, _tx, stats) = TcpLinkPort::adopt(&c, description(Some(carried)), fds)
        .unwrap()
        .split();
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    rx.finish();
    assert_eq!(batch.len(), 0);
    assert_eq!(
        stats
            .snapshot()
            .drops(crate::tcp_link::TcpLinkDrop::BadMagic),
        1
    );
}
