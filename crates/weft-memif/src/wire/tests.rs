use super::*;

fn roundtrip(m: Message) {
    let bytes = m.encode();
    assert_eq!(Message::decode(&bytes), Ok(m));
}

#[test]
fn every_message_survives_encode_then_decode() {
    roundtrip(Message::Ack);
    roundtrip(Message::Hello(Hello {
        name: Name::new(b"weft"),
        min_version: VERSION,
        max_version: VERSION,
        max_region: 3,
        max_s2c_ring: 7,
        max_c2s_ring: 5,
        max_log2_ring_size: 14,
    }));
    roundtrip(Message::Init(Init {
        version: VERSION,
        id: 0xdead_beef,
        mode: MODE_ETHERNET,
        secret: *b"s3cret\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        name: Name::new(b"DPDK 22.11.4"),
    }));
    roundtrip(Message::AddRegion(AddRegion {
        index: 2,
        size: 1 << 33,
    }));
    for direction in [Direction::ClientToServer, Direction::ServerToClient] {
        roundtrip(Message::AddRing(AddRing {
            direction,
            index: 1,
            region: 0,
            offset: 0x1234_5678,
            log2_ring_size: 10,
            private_hdr_size: 0,
        }));
    }
    roundtrip(Message::Connect(Name::new(b"net_memif0")));
    roundtrip(Message::Connected(Name::new(b"weft:a")));
    roundtrip(Message::disconnect("Incorrect secret"));
}

/// The packed layout of `memif.h`: type at 0, the union from byte 2.
#[test]
fn add_ring_fields_sit_where_memif_h_puts_them() {
    let m = Message::AddRing(AddRing {
        direction: Direction::ClientToServer,
        index: 0x0102,
        region: 0x0304,
        offset: 0x0506_0708,
        log2_ring_size: 9,
        private_hdr_size: 0x0a0b,
    });
    let b = m.encode();
    assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 5);
    assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 1);
    assert_eq!(u16::from_ne_bytes([b[4], b[5]]), 0x0102);
    assert_eq!(u16::from_ne_bytes([b[6], b[7]]), 0x0304);
    assert_eq!(u32::from_ne_bytes([b[8], b[9], b[10], b[11]]), 0x0506_0708);
    assert_eq!(b[12], 9);
    assert_eq!(u16::from_ne_bytes([b[13], b[14]]), 0x0a0b);
    assert!(b[15..].iter().all(|x| *x == 0));
}

#[test]
fn init_fields_sit_where_memif_h_puts_them() {
    let mut secret = [0; SECRET_LEN];
    secret[0] = b'k';
    let b = Message::Init(Init {
        version: VERSION,
        id: 7,
        mode: 0,
        secret,
        name: Name::new(b"n"),
    })
    .encode();
    assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 0x0200);
    assert_eq!(u32::from_ne_bytes([b[4], b[5], b[6], b[7]]), 7);
    assert_eq!(b[8], 0);
    assert_eq!(b[9], b'k');
    assert_eq!(b[33], b'n');
}

#[test]
fn a_message_of_another_size_is_refused() {
    assert_eq!(Message::decode(&[0; 127]), Err(DecodeError::Size(127)));
    assert_eq!(Message::decode(&[0; 129]), Err(DecodeError::Size(129)));
    assert_eq!(Message::decode(&[]), Err(DecodeError::Size(0)));
}

#[test]
fn unknown_types_and_ring_flags_are_refused() {
    let mut b = [0u8; MSG_SIZE];
    assert_eq!(Message::decode(&b), Err(DecodeError::UnknownType(0)));
    b[..2].copy_from_slice(&9u16.to_ne_bytes());
    assert_eq!(Message::decode(&b), Err(DecodeError::UnknownType(9)));
    b[..2].copy_from_slice(&5u16.to_ne_bytes());
    b[2..4].copy_from_slice(&0x8001u16.to_ne_bytes());
    assert_eq!(Message::decode(&b), Err(DecodeError::RingFlags(0x8001)));
}

#[test]
fn text_stops_at_the_first_nul_and_is_bounded_without_one() {
    let mut b = Message::Connect(Name::new(b"abc")).encode();
    b[2 + 3] = 0;
    b[2 + 4] = b'x'; // garbage after the NUL is not part of the name
    let Ok(Message::Connect(n)) = Message::decode(&b) else {
        panic!("decodes")
    };
    assert_eq!(n.as_bytes(), b"abc");
    // No NUL at all: the whole 32-byte field, never more.
    let mut b = [b'z'; MSG_SIZE];
    b[..2].copy_from_slice(&6u16.to_ne_bytes());
    let Ok(Message::Connect(n)) = Message::decode(&b) else {
        panic!("decodes")
    };
    assert_eq!(n.as_bytes().len(), NAME_LEN);
}

#[test]
fn names_leave_room_for_a_c_reader_nul_and_print_safely() {
    let long = [b'a'; 40];
    assert_eq!(Name::new(&long).as_bytes().len(), NAME_LEN - 1);
    assert_eq!(Name::new(b"a\nb\xff").printable(), "a?b?");
}
