use proptest::prelude::*;

use super::*;
use crate::handshake::Outgoing;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_control_bytes_are_refused_or_taken_without_panic(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = control_messages(&data);
    }

    #[test]
    fn a_peer_writing_anything_into_the_rings_never_panics_the_port(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        hostile_rings(&data);
    }
}

/// The fuzz body's input format fed a real client's messages: the server takes them all.
#[test]
fn the_control_body_reaches_connect_with_a_real_clients_messages() {
    let mut client = ClientHandshake::new(ClientPlan {
        id: 0,
        secret: [0; SECRET_LEN],
        queue_pairs: 1,
        log2_ring_size: 4,
        buffer_size: 2048,
        name: Name::new(b"c"),
        interface_name: Name::new(b"c0"),
    });
    let hello = ServerHandshake::new(ServerLimits {
        id: 0,
        secret: None,
        max_rings: 2,
        max_regions: 2,
        max_log2_ring_size: 10,
        max_region_bytes: 1 << 24,
        name: Name::new(b"fuzz"),
    })
    .hello();
    client.on_message(&hello, 0).unwrap();
    let mut data = Vec::new();
    let mut next: Option<Outgoing> = client.next_outgoing();
    while let Some(o) = next {
        data.push(u8::from(o.attach != crate::handshake::Attach::Nothing));
        data.extend_from_slice(&o.message.encode());
        next = client.next_outgoing();
    }
    assert!(control_messages(&data));
}
