use super::*;
use crate::wire::{Disconnect, Reason};

fn limits() -> ServerLimits {
    let mut secret = [0; SECRET_LEN];
    secret[..4].copy_from_slice(b"open");
    ServerLimits {
        id: 7,
        secret: Some(secret),
        max_rings: 2,
        max_regions: 2,
        max_log2_ring_size: 12,
        max_region_bytes: 1 << 24,
        name: Name::new(b"weft"),
    }
}

fn init(id: u32, secret: &[u8]) -> Message {
    let mut s = [0; SECRET_LEN];
    s[..secret.len()].copy_from_slice(secret);
    Message::Init(Init {
        version: VERSION,
        id,
        mode: MODE_ETHERNET,
        secret: s,
        name: Name::new(b"peer"),
    })
}

fn ring(direction: Direction, index: u16, offset: u32) -> Message {
    Message::AddRing(AddRing {
        direction,
        index,
        region: 0,
        offset,
        log2_ring_size: 8,
        private_hdr_size: 0,
    })
}

fn region(index: u16, size: u64) -> Message {
    Message::AddRegion(AddRegion { index, size })
}

fn identified() -> ServerHandshake {
    let mut s = ServerHandshake::new(limits());
    assert_eq!(
        s.on_message(&init(7, b"open"), 0),
        Ok(ServerStep::Identified)
    );
    s
}

#[test]
fn a_well_behaved_client_is_taken_through_to_connect() {
    let mut s = identified();
    assert_eq!(s.on_message(&region(0, 1 << 20), 1), Ok(ServerStep::Ack));
    assert_eq!(
        s.on_message(&ring(Direction::ClientToServer, 0, 0), 1),
        Ok(ServerStep::Ack)
    );
    assert_eq!(
        s.on_message(&ring(Direction::ServerToClient, 0, 8192), 1),
        Ok(ServerStep::Ack)
    );
    assert_eq!(
        s.on_message(&Message::Connect(Name::new(b"if")), 0),
        Ok(ServerStep::Connect {
            interface: Name::new(b"if")
        })
    );
    assert_eq!(s.rings(Direction::ClientToServer).len(), 1);
    assert_eq!(s.peer_name().as_bytes(), b"peer");
}

#[test]
fn init_for_another_id_or_with_a_wrong_or_missing_secret_is_refused() {
    let mut s = ServerHandshake::new(limits());
    assert_eq!(
        s.on_message(&init(8, b"open"), 0),
        Err(HandshakeError::WrongId(8))
    );
    let mut s = ServerHandshake::new(limits());
    assert_eq!(
        s.on_message(&init(7, b"opem"), 0),
        Err(HandshakeError::WrongSecret)
    );
    let mut s = ServerHandshake::new(limits());
    assert_eq!(
        s.on_message(&init(7, b""), 0),
        Err(HandshakeError::SecretRequired)
    );
    // Bytes after the secret's NUL do not count (DPDK compares with strncmp).
    let mut s = ServerHandshake::new(limits());
    assert_eq!(
        s.on_message(&init(7, b"open\0junk"), 0),
        Ok(ServerStep::Identified)
    );
}

#[test]
fn a_wrong_version_or_mode_is_refused() {
    let mut s = ServerHandshake::new(limits());
    let Message::Init(mut i) = init(7, b"open") else {
        unreachable!()
    };
    i.version = 0x0100;
    assert_eq!(
        s.on_message(&Message::Init(i.clone()), 0),
        Err(HandshakeError::Version(0x0100))
    );
    i.version = VERSION;
    i.mode = 1;
    assert_eq!(
        s.on_message(&Message::Init(i), 0),
        Err(HandshakeError::Mode(1))
    );
}

#[test]
fn messages_out_of_order_or_repeated_are_refused() {
    let mut s = ServerHandshake::new(limits());
    assert!(matches!(
        s.on_message(&region(0, 4096), 1),
        Err(HandshakeError::Unexpected { .. })
    ));
    let mut s = identified();
    assert_eq!(
        s.on_message(&init(7, b"open"), 0),
        Err(HandshakeError::Duplicate("INIT"))
    );
    let mut s = identified();
    assert_eq!(s.on_message(&region(0, 1 << 20), 1), Ok(ServerStep::Ack));
    assert!(matches!(
        s.on_message(&region(0, 1 << 20), 1),
        Err(HandshakeError::RegionIndex { .. })
    ));
    let mut s = identified();
    s.on_message(&region(0, 1 << 20), 1).unwrap();
    s.on_message(&ring(Direction::ClientToServer, 0, 0), 1)
        .unwrap();
    assert_eq!(
        s.on_message(&ring(Direction::ClientToServer, 0, 8192), 1),
        Err(HandshakeError::Duplicate("ADD_RING"))
    );
    let hello = ServerHandshake::new(limits()).hello();
    assert!(matches!(
        s.on_message(&hello, 0),
        Err(HandshakeError::Unexpected { .. })
    ));
}

#[test]
fn descriptors_missing_or_extra_are_refused() {
    let mut s = identified();
    assert_eq!(
        s.on_message(&region(0, 4096), 0),
        Err(HandshakeError::MissingFd("ADD_REGION"))
    );
    let mut s = identified();
    assert!(matches!(
        s.on_message(&region(0, 4096), 2),
        Err(HandshakeError::ExtraFds { .. })
    ));
    let mut s = ServerHandshake::new(limits());
    assert!(matches!(
        s.on_message(&init(7, b"open"), 1),
        Err(HandshakeError::ExtraFds { .. })
    ));
}

#[test]
fn regions_and_rings_outside_the_limits_are_refused() {
    let mut s = identified();
    assert!(matches!(
        s.on_message(&region(0, 0), 1),
        Err(HandshakeError::RegionSize { .. })
    ));
    let mut s = identified();
    assert!(matches!(
        s.on_message(&region(0, 1 << 25), 1),
        Err(HandshakeError::RegionSize { .. })
    ));
    let mut s = identified();
    s.on_message(&region(0, 4096), 1).unwrap();
    s.on_message(&region(1, 4096), 1).unwrap();
    assert_eq!(
        s.on_message(&region(2, 4096), 1),
        Err(HandshakeError::TooManyRegions(2))
    );
    // A ring past its region's end, misaligned, too large, in no region, over the index.
    assert!(matches!(
        s.on_message(&ring(Direction::ClientToServer, 0, 4096 - 64), 1),
        Err(HandshakeError::RingOutside { .. })
    ));
    assert_eq!(
        s.on_message(&ring(Direction::ClientToServer, 0, 8), 1),
        Err(HandshakeError::RingAlign(8))
    );
    assert_eq!(
        s.on_message(&ring(Direction::ClientToServer, 2, 0), 1),
        Err(HandshakeError::RingIndex(2))
    );
    let Message::AddRing(mut r) = ring(Direction::ClientToServer, 0, 0) else {
        unreachable!()
    };
    r.log2_ring_size = 13;
    assert_eq!(
        s.on_message(&Message::AddRing(r), 1),
        Err(HandshakeError::RingSize(13))
    );
    r.log2_ring_size = 8;
    r.region = 5;
    assert_eq!(
        s.on_message(&Message::AddRing(r), 1),
        Err(HandshakeError::RingRegion(5))
    );
    r.region = 0;
    r.private_hdr_size = 4;
    assert_eq!(
        s.on_message(&Message::AddRing(r), 1),
        Err(HandshakeError::PrivateHeader(4))
    );
}

#[test]
fn connect_without_rings_each_way_from_zero_is_refused() {
    let mut s = identified();
    s.on_message(&region(0, 1 << 20), 1).unwrap();
    s.on_message(&ring(Direction::ClientToServer, 1, 0), 1)
        .unwrap();
    s.on_message(&ring(Direction::ServerToClient, 0, 8192), 1)
        .unwrap();
    assert_eq!(
        s.on_message(&Message::Connect(Name::new(b"x")), 0),
        Err(HandshakeError::MissingRings)
    );
}

#[test]
fn a_disconnect_ends_the_handshake_with_the_peers_reason() {
    let mut s = identified();
    let d = Message::Disconnect(Disconnect {
        code: 0,
        reason: Reason::new(b"bye"),
    });
    assert_eq!(
        s.on_message(&d, 0),
        Err(HandshakeError::PeerDisconnected("bye".into()))
    );
}

fn plan() -> ClientPlan {
    ClientPlan {
        id: 3,
        secret: [0; SECRET_LEN],
        queue_pairs: 4,
        log2_ring_size: 10,
        buffer_size: 2048,
        name: Name::new(b"weft"),
        interface_name: Name::new(b"w0"),
    }
}

#[test]
fn a_client_negotiates_down_to_the_servers_maxima_and_sends_one_message_per_ack() {
    let mut c = ClientHandshake::new(plan());
    let server = ServerHandshake::new(ServerLimits {
        max_rings: 2,
        max_log2_ring_size: 8,
        secret: None,
        id: 3,
        ..limits()
    });
    let Ok(ClientStep::Negotiated(n, layout)) = c.on_message(&server.hello(), 0) else {
        panic!("negotiates")
    };
    assert_eq!(
        n,
        Negotiated {
            c2s: 2,
            s2c: 2,
            log2_ring_size: 8
        }
    );
    // INIT, ADD_REGION, 4 x ADD_RING, CONNECT; each after an ACK.
    let mut sent = vec![c.next_outgoing().unwrap()];
    while let Ok(ClientStep::Send(o)) = c.on_message(&Message::Ack, 0) {
        sent.push(o);
    }
    let kinds: Vec<_> = sent.iter().map(|o| o.message.kind()).collect();
    assert_eq!(
        kinds,
        [
            "INIT",
            "ADD_REGION",
            "ADD_RING",
            "ADD_RING",
            "ADD_RING",
            "ADD_RING",
            "CONNECT"
        ]
    );
    assert_eq!(sent[1].attach, Attach::Region(0));
    assert_eq!(sent[4].attach, Attach::Ring(Direction::ServerToClient, 0));
    let Message::AddRegion(r) = &sent[1].message else {
        unreachable!()
    };
    assert_eq!(r.size, layout.region_size());
    // The server takes what the client sent, in that order.
    let mut s = ServerHandshake::new(ServerLimits {
        max_rings: 2,
        max_log2_ring_size: 8,
        secret: None,
        id: 3,
        ..limits()
    });
    for o in &sent {
        let fds = usize::from(o.attach != Attach::Nothing);
        assert!(s.on_message(&o.message, fds).is_ok(), "{o:?}");
    }
    assert_eq!(
        c.on_message(&Message::Connected(Name::new(b"srv")), 0),
        Ok(ClientStep::Connected {
            interface: Name::new(b"srv")
        })
    );
}

#[test]
fn a_client_refuses_a_hello_without_version_two() {
    let mut c = ClientHandshake::new(plan());
    let Message::Hello(mut h) = ServerHandshake::new(limits()).hello() else {
        unreachable!()
    };
    h.min_version = 0x0300;
    h.max_version = 0x0300;
    assert!(matches!(
        c.on_message(&Message::Hello(h), 0),
        Err(HandshakeError::VersionRange { .. })
    ));
}

#[test]
fn a_client_refuses_messages_out_of_order_and_descriptors_from_the_server() {
    let mut c = ClientHandshake::new(plan());
    assert!(matches!(
        c.on_message(&Message::Ack, 0),
        Err(HandshakeError::Unexpected { .. })
    ));
    let mut c = ClientHandshake::new(plan());
    let hello = ServerHandshake::new(limits()).hello();
    assert!(matches!(
        c.on_message(&hello, 1),
        Err(HandshakeError::ExtraFds { .. })
    ));
    let mut c = ClientHandshake::new(plan());
    c.on_message(&hello, 0).unwrap();
    assert!(matches!(
        c.on_message(&Message::Connected(Name::new(b"x")), 0),
        Err(HandshakeError::Unexpected { .. })
    ));
}

#[test]
fn every_error_has_a_counted_reason() {
    assert_eq!(HandshakeError::WrongSecret.refusal(), Refusal::Secret);
    assert_eq!(HandshakeError::MissingRings.refusal(), Refusal::Ring);
    assert_eq!(Refusal::Timeout.index(), Refusal::ALL.len() - 1);
}
