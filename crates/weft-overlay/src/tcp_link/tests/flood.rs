//! A listening link under a connection flood, and newcomers to a live link without a key
//! (on loopback: the real peer connects from 127.0.0.1, the others from 127.0.0.2).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::sys::socket::{bind, connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn};

use super::sockets::{config, connected, exchange, open, wait_for};
use crate::tcp_link::auth::{self, Hello, LinkKey, Role, HELLO_LEN, PROOF_LEN};
use crate::tcp_link::{TcpLinkDrop, TcpLinkMode};

const ELSEWHERE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// A TCP connection to `to` from address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let fd: OwnedFd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(from, 0)),
    )
    .unwrap();
    let SocketAddr::V4(to) = to else {
        panic!("IPv4 only")
    };
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
    let s = TcpStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn drops(end: &super::sockets::End, reason: TcpLinkDrop) -> u64 {
    end.stats.snapshot().drops(reason)
}

/// A listener with a key, and a real peer that has read the listener's hello: its
/// handshake is under way.
fn keyed_listener_with_a_peer_half_way() -> (super::sockets::End, SocketAddr, RealPeer) {
    let key = LinkKey::new(vec![7; 32]).unwrap();
    let mut c = config(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()));
    c.key = Some(key.clone());
    c.handshake_timeout = Duration::from_secs(10);
    let (a, addr) = open(&c);
    let addr = addr.unwrap();
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut hello = [0u8; HELLO_LEN];
    (&stream).read_exact(&mut hello).unwrap();
    let theirs = Hello::parse(&hello).unwrap();
    (
        a,
        addr,
        RealPeer {
            stream,
            key,
            theirs,
        },
    )
}

/// The real peer of [`keyed_listener_with_a_peer_half_way`].
struct RealPeer {
    stream: TcpStream,
    key: LinkKey,
    theirs: Hello,
}

/// Sends the real peer's hello and proof; its key and both hellos, to check the answer.
fn finish_handshake(real: &mut RealPeer) -> (LinkKey, Hello, Hello) {
    let ours = Hello::fresh(Role::Connector, 5).unwrap();
    real.stream.write_all(&ours.encode()).unwrap();
    let proof = auth::prove(&real.key, &ours, &real.theirs);
    real.stream.write_all(&proof).unwrap();
    (real.key.clone(), ours, real.theirs)
}

#[test]
fn a_connection_flood_from_one_address_does_not_stop_the_real_peer_connecting() {
    // The real peer starts its handshake...
    let (a, addr, mut real) = keyed_listener_with_a_peer_half_way();
    // ...then a flood of silent connections from one other address arrives (more than the
    // listener holds), and is pushed out by itself.
    let flood: Vec<TcpStream> = (0..32).map(|_| connect_from(ELSEWHERE, addr)).collect();
    wait_for("the flood to be handled", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::HandshakeLimit) >= 30
    });
    // The real peer finishes its handshake: it was not pushed out.
    let (k, ours, theirs) = finish_handshake(&mut real);
    let mut proof = [0u8; PROOF_LEN];
    real.stream.read_exact(&mut proof).unwrap();
    auth::verify(&k, &ours, &theirs, &proof).unwrap();
    wait_for("the real peer's link", Duration::from_secs(5), || {
        connected(&a)
    });
    assert_eq!(a.stats.snapshot().connects, 1);
    assert_eq!(drops(&a, TcpLinkDrop::AuthFailed), 0);
    drop(flood);
}

#[test]
fn a_flood_from_many_addresses_pushes_out_the_busiest_address_first() {
    let (a, addr, mut real) = keyed_listener_with_a_peer_half_way();
    // Two each from four other addresses fill the rest (and more): the real peer's one
    // handshake is never the busiest address's.
    let mut flood = Vec::new();
    for _ in 0..3 {
        for last in 2..6 {
            flood.push(connect_from(Ipv4Addr::new(127, 0, 0, last), addr));
        }
    }
    wait_for("the flood to be handled", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::HandshakeLimit) >= 5
    });
    finish_handshake(&mut real);
    wait_for("the real peer's link", Duration::from_secs(5), || {
        connected(&a)
    });
    drop(flood);
}

#[test]
fn without_a_key_a_newcomer_from_another_address_does_not_replace_a_live_link() {
    let (mut a, addr) = open(&config(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap())));
    let addr = addr.unwrap();
    let (mut b, _) = open(&config(TcpLinkMode::Connect(addr)));
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    let mut newcomer = connect_from(ELSEWHERE, addr);
    wait_for("the refusal", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::RefusedTakeover) == 1
    });
    let mut rest = Vec::new();
    let _ = newcomer.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed without a byte");
    assert_eq!(a.stats.snapshot().connects, 1, "the live link stays");
    exchange(&mut a, &mut b, 600);
    // Once the live connection is gone, a newcomer from anywhere is taken.
    drop(b);
    wait_for("the loss", Duration::from_secs(5), || !connected(&a));
    let _later = connect_from(ELSEWHERE, addr);
    wait_for("the newcomer's link", Duration::from_secs(5), || {
        a.stats.snapshot().connects == 2
    });
    assert!(connected(&a));
}
