use weft_packet::OffloadInfo;
use weft_switch::TxFrame;

use super::*;
use crate::config::Role;
use crate::layout::{ClientLayout, Desc, DESC_FLAG_NEXT, RING_HEADER};

const LAYOUT: ClientLayout = ClientLayout {
    c2s: 1,
    s2c: 1,
    log2: 3,
    buffer_size: 128,
};

fn memory() -> SharedMemory {
    SharedMemory::create(LAYOUT.region_size()).unwrap().0
}

fn place(mem: &SharedMemory, d: Direction) -> RingPlace {
    RingPlace::new(mem, 0, LAYOUT.ring_offset(d, 0), 3).unwrap()
}

fn own(d: Direction) -> Option<OwnBuffers> {
    Some(OwnBuffers {
        layout: LAYOUT,
        direction: d,
        index: 0,
    })
}

#[test]
fn a_ring_that_does_not_fit_its_region_or_is_misaligned_has_no_place() {
    let mem = memory();
    let size = LAYOUT.region_size();
    assert!(RingPlace::new(&mem, 0, size - 64, 3).is_none());
    assert!(RingPlace::new(&mem, 0, 8, 3).is_none());
    assert!(RingPlace::new(&mem, 1, 0, 3).is_none());
}

/// What a client producer writes, a server consumer reads back: chained past one buffer.
#[test]
fn a_client_producer_and_a_server_consumer_agree_on_a_chained_frame() {
    let mem = memory();
    let ring = place(&mem, Direction::ClientToServer);
    ring.init(&mem).unwrap();
    let mut tx = Producer::new(ring, Role::Client, own(Direction::ClientToServer), 128);
    let mut rx = Consumer::new(ring, Role::Server, None, 128);
    let frame: Vec<u8> = (0..300u16).map(|i| (i % 251) as u8).collect();
    let mut view = ring.view(&mem).unwrap();
    let room = tx.room(&view).unwrap();
    assert_eq!(room, 8);
    let sent = tx.write_frame(
        &mut view,
        &TxFrame::whole(&frame, OffloadInfo::default()),
        room,
    );
    assert_eq!(sent, Ok(Sent::Slots(3)));
    // Nothing is visible before the one publishing store.
    assert_eq!(rx.ready(&view), Ok(0));
    assert_eq!(tx.publish(&view), Ok(true));
    assert_eq!(rx.ready(&view), Ok(3));
    let mut out = vec![0u8; 1024];
    assert_eq!(rx.read_frame(&mut view, 3, &mut out), Ok((3, Ok(300))));
    assert_eq!(&out[..300], &frame[..]);
    // Room comes back only when the consumer releases.
    assert_eq!(tx.room(&view), Ok(5));
    rx.release(&view).unwrap();
    assert_eq!(tx.room(&view), Ok(8));
}

#[test]
fn a_server_consumer_breaks_on_a_head_past_the_ring() {
    let mem = memory();
    let ring = place(&mem, Direction::ClientToServer);
    ring.store(&mem, RING_HEAD_AT, 9).unwrap();
    let rx = Consumer::new(ring, Role::Server, None, 128);
    assert!(matches!(
        rx.ready(&ring.view(&mem).unwrap()),
        Err(RingFault::IndexJump { which: "head", .. })
    ));
}

#[test]
fn a_client_consumer_reads_only_its_own_buffers_whatever_the_descriptor_says() {
    let mem = memory();
    let ring = place(&mem, Direction::ServerToClient);
    let mut rx = Consumer::new(ring, Role::Client, own(Direction::ServerToClient), 128);
    let mut view = ring.view(&mem).unwrap();
    rx.release(&view).unwrap(); // offers all 8 slots
    let buf = LAYOUT.buffer_offset(Direction::ServerToClient, 0, 0);
    mem.slice(0, buf, 4).unwrap().copy_from(&[1u8, 2, 3, 4]);
    // The server points the descriptor elsewhere: the client reads its own buffer.
    let lie = Desc {
        flags: 0,
        region: 0,
        length: 4,
        offset: 0,
    };
    view.write_desc(0, lie).unwrap();
    ring.store(&mem, RING_TAIL_AT, 1).unwrap();
    let mut out = [0u8; 16];
    assert_eq!(rx.read_frame(&mut view, 1, &mut out), Ok((1, Ok(4))));
    assert_eq!(&out[..4], &[1, 2, 3, 4]);
    // A tail past what was offered breaks the ring.
    ring.store(&mem, RING_TAIL_AT, 20).unwrap();
    assert!(rx.ready(&view).is_err());
}

#[test]
fn a_server_producer_writes_into_offered_buffers_and_refuses_bad_offers() {
    let mem = memory();
    let ring = place(&mem, Direction::ServerToClient);
    let mut tx = Producer::new(ring, Role::Server, None, 128);
    let mut view = ring.view(&mem).unwrap();
    assert_eq!(tx.room(&view), Ok(0));
    let at = LAYOUT.buffer_offset(Direction::ServerToClient, 0, 0);
    let offer = Desc {
        flags: DESC_FLAG_NEXT,
        region: 0,
        length: 128,
        offset: u32::try_from(at).unwrap(),
    };
    view.write_desc(0, offer).unwrap();
    ring.store(&mem, RING_HEAD_AT, 1).unwrap();
    let frame = [7u8; 60];
    let f = TxFrame::whole(&frame, OffloadInfo::default());
    assert_eq!(tx.write_frame(&mut view, &f, 1), Ok(Sent::Slots(1)));
    let written = view.desc(0).unwrap();
    assert_eq!((written.length, written.flags), (60, 0));
    // With no free slot nothing is written.
    assert_eq!(tx.write_frame(&mut view, &f, 0), Ok(Sent::Full));
    // An offer pointing outside the region breaks the ring.
    let bad = Desc {
        offset: u32::try_from(LAYOUT.region_size()).unwrap(),
        ..offer
    };
    view.write_desc(1, bad).unwrap();
    ring.store(&mem, RING_HEAD_AT, 2).unwrap();
    assert_eq!(tx.write_frame(&mut view, &f, 1), Err(RingFault::BadOffer));
}

/// The view's two 8-byte accesses lay a descriptor out as `memif_desc_t`, as the peer
/// sees it through its file; slots wrap around the ring.
#[test]
fn descriptors_written_through_a_view_are_read_back_and_visible_through_the_peer_file() {
    use std::os::unix::fs::FileExt;
    let (mem, file) = SharedMemory::create(LAYOUT.region_size()).unwrap();
    let ring = place(&mem, Direction::ClientToServer);
    let view = ring.view(&mem).unwrap();
    let d = Desc {
        flags: 1,
        region: 0,
        length: 60,
        offset: 256,
    };
    view.write_desc(8 + 2, d).unwrap();
    assert_eq!(view.desc(2), Ok(d));
    let mut b = [0u8; 16];
    let at = LAYOUT.ring_offset(Direction::ClientToServer, 0) + RING_HEADER + 2 * 16;
    file.read_exact_at(&mut b, at).unwrap();
    assert_eq!(Desc::from_bytes(b), d);
}

#[test]
fn a_view_refuses_buffers_outside_their_region_and_missing_regions() {
    let mem = memory();
    let ring = place(&mem, Direction::ClientToServer);
    let mut view = ring.view(&mem).unwrap();
    let size = LAYOUT.region_size();
    assert!(view.buffer(0, size - 16, 16).is_some());
    assert!(view.buffer(0, size - 15, 16).is_none());
    assert!(view.buffer(0, u64::MAX, 2).is_none());
    assert!(view.buffer(1, 0, 1).is_none());
    // The region remembered does not let a later, missing one through.
    assert!(view.buffer(0, 0, 1).is_some());
    assert!(view.buffer(1, 0, 1).is_none());
}
