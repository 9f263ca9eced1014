use super::*;

const L: Layout = Layout { frames: 64 };

#[test]
fn a_descriptor_inside_a_receive_chunk_is_lent_from_where_it_lies() {
    let addr = Layout::chunk_addr(3) + 256;
    assert_eq!(
        L.check_rx(addr, 60),
        Ok(RxSlot {
            start: 3 * 4096 + 256,
            len: 60,
            chunk: 3
        })
    );
    // Exactly to the end of the chunk.
    assert!(L.check_rx(addr, 4096 - 256).is_ok());
}

#[test]
fn descriptors_outside_the_receive_chunks_are_refused_with_nothing_to_give_back() {
    // Past the UMEM, and in the transmit half.
    for addr in [
        Layout::chunk_addr(64),
        u64::MAX - 10,
        Layout::chunk_addr(32),
        Layout::chunk_addr(63) + 100,
    ] {
        assert_eq!(
            L.check_rx(addr, 60),
            Err((XdpDrop::BadAddress, None)),
            "{addr}"
        );
    }
}

#[test]
fn a_frame_crossing_its_chunk_or_shorter_than_a_header_is_refused_and_its_chunk_returned() {
    let addr = Layout::chunk_addr(5) + 256;
    assert_eq!(
        L.check_rx(addr, 4096 - 255),
        Err((XdpDrop::CrossesChunk, Some(5)))
    );
    assert_eq!(
        L.check_rx(addr, u32::MAX),
        Err((XdpDrop::CrossesChunk, Some(5)))
    );
    assert_eq!(L.check_rx(addr, 13), Err((XdpDrop::Runt, Some(5))));
    assert_eq!(L.check_rx(addr, 0), Err((XdpDrop::Runt, Some(5))));
}

#[test]
fn a_receive_chunk_named_twice_is_held_and_given_back_once() {
    let mut rx = RxChunks::new(L);
    assert!(rx.take(7));
    assert!(!rx.take(7), "the second naming is refused");
    assert!(rx.take(8));
    assert!(!rx.take(32), "not a receive chunk");
    assert_eq!(rx.pending(), [7, 8]);
    rx.filled(1);
    assert_eq!(rx.pending(), [8]);
    assert!(
        rx.take(7),
        "back in the fill ring, the kernel may hand it over again"
    );
    rx.filled(10);
    assert_eq!(rx.held(), 0);
}

#[test]
fn transmit_chunks_cycle_through_the_free_list_and_only_completions_in_flight_count() {
    let mut tx = TxChunks::new(L);
    assert_eq!(tx.free(), 32);
    let mut taken = Vec::new();
    while let Some(c) = tx.alloc() {
        assert!((32..64).contains(&c), "{c}: transmit side only");
        tx.sent(c);
        taken.push(c);
    }
    assert_eq!(taken.len(), 32);
    assert_eq!(taken[0], 32, "lowest first");
    // Not in flight twice, not a receive chunk, not inside the UMEM.
    assert!(tx.completed(&L, Layout::chunk_addr(40) + 12));
    assert!(!tx.completed(&L, Layout::chunk_addr(40)));
    assert!(!tx.completed(&L, Layout::chunk_addr(3)));
    assert!(!tx.completed(&L, Layout::chunk_addr(64)));
    assert_eq!(tx.free(), 1);
    assert_eq!(tx.alloc(), Some(40));
    tx.unalloc(40);
    assert_eq!(tx.alloc(), Some(40));
}
