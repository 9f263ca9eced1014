//! The receive path over blocks laid out as the kernel lays them out.

use std::fs::File;

use weft_packet::GsoKind;

use super::*;
use crate::ring::tests::{FakeBlock, FakePacket};
use crate::vnet::tx_header;

const BLOCK: usize = 8192;

fn frame(len: usize, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn header(o: &OffloadInfo) -> [u8; PACKET_HDR_LEN] {
    let mut h = [0u8; PACKET_HDR_LEN];
    h.copy_from_slice(&tx_header(o)[..PACKET_HDR_LEN]);
    h
}

fn one_packet(frame: &[u8], o: &OffloadInfo, p: FakePacket) -> (Vec<u8>, PacketHeader) {
    let mut fb = FakeBlock::new(BLOCK);
    fb.push(&header(o), frame, p);
    let block = fb.finish();
    let first = BlockHeader::read(&block).unwrap().first_offset;
    let pkt = PacketHeader::read(&block, first).unwrap();
    (block, pkt)
}

fn partial_csum() -> OffloadInfo {
    OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        ..OffloadInfo::default()
    }
}

#[test]
fn a_frame_is_accepted_in_place_with_its_offloads() {
    let f = frame(100, 1);
    let (mut block, pkt) = one_packet(&f, &partial_csum(), FakePacket::default());
    let (start, len, o) = accept(&mut block, &pkt, 1500, true).unwrap();
    assert_eq!(&block[start..start + len], &f[..]);
    assert_eq!(o, partial_csum());
}

#[test]
fn a_capture_shorter_than_the_packet_is_truncated() {
    let (mut block, pkt) = one_packet(
        &frame(100, 1),
        &OffloadInfo::default(),
        FakePacket {
            len: Some(70_000),
            ..FakePacket::default()
        },
    );
    assert_eq!(
        accept(&mut block, &pkt, 1500, true),
        Err(Some(PortDrop::Truncated))
    );
}

#[test]
fn own_outgoing_frames_are_skipped_only_when_the_kernel_cannot_filter_them() {
    let outgoing = FakePacket {
        pkttype: libc::PACKET_OUTGOING,
        ..FakePacket::default()
    };
    let (mut block, pkt) = one_packet(&frame(100, 1), &OffloadInfo::default(), outgoing);
    assert_eq!(accept(&mut block, &pkt, 1500, true), Err(None));
    assert!(accept(&mut block, &pkt, 1500, false).is_ok());
}

#[test]
fn bad_headers_and_oversize_frames_are_dropped_by_reason() {
    let mut bad = partial_csum();
    bad.csum_offset = 200;
    let (mut block, pkt) = one_packet(&frame(100, 1), &bad, FakePacket::default());
    assert_eq!(
        accept(&mut block, &pkt, 1500, true),
        Err(Some(PortDrop::BadVnetHeader))
    );
    let (mut block, pkt) = one_packet(
        &frame(1600, 1),
        &OffloadInfo::default(),
        FakePacket::default(),
    );
    assert_eq!(
        accept(&mut block, &pkt, 1500, true),
        Err(Some(PortDrop::Oversize))
    );
}

#[test]
fn a_tag_the_kernel_stripped_is_put_back_and_offsets_follow() {
    let f = frame(100, 1);
    let gso = OffloadInfo {
        gso: GsoKind::TcpV4,
        gso_size: 20,
        hdr_len: 54,
        ..partial_csum()
    };
    let tagged = FakePacket {
        status: TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID,
        vlan_tci: 0x2005,
        vlan_tpid: 0x88a8,
        ..FakePacket::default()
    };
    let (mut block, pkt) = one_packet(&f, &gso, tagged);
    let (start, len, o) = accept(&mut block, &pkt, 1500, true).unwrap();
    let got = &block[start..start + len];
    assert_eq!(len, f.len() + 4);
    assert_eq!(&got[..12], &f[..12]);
    assert_eq!(&got[12..16], &[0x88, 0xa8, 0x20, 0x05]);
    assert_eq!(&got[16..], &f[12..]);
    assert_eq!((o.csum_start, o.hdr_len), (38, 58));
    // Without a TPID from the kernel, the tag is 802.1Q.
    let (mut block, pkt) = one_packet(
        &f,
        &OffloadInfo::default(),
        FakePacket {
            status: TP_STATUS_VLAN_VALID,
            vlan_tci: 7,
            ..FakePacket::default()
        },
    );
    let (start, _, _) = accept(&mut block, &pkt, 1500, true).unwrap();
    assert_eq!(&block[start + 12..start + 16], &[0x81, 0x00, 0x00, 0x07]);
}

fn rx_over(ring: RxRing) -> AfPacketRx {
    let fd = OwnedFd::from(File::open("/dev/null").unwrap());
    AfPacketRx::new(
        Arc::new(fd),
        ring,
        1500,
        true,
        Arc::new(PortStats::default()),
    )
}

fn block_of(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut fb = FakeBlock::new(BLOCK);
    for f in frames {
        fb.push(&[0; PACKET_HDR_LEN], f, FakePacket::default());
    }
    fb.finish()
}

fn receive_all(rx: &mut AfPacketRx, room: usize) -> Vec<u8> {
    let mut batch = RxBatch::new(room);
    rx.receive(&mut batch);
    let firsts = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).head[20])
        .collect();
    rx.finish();
    firsts
}

#[test]
fn receive_walks_blocks_in_order_and_resumes_inside_a_block() {
    let mut ring = RxRing::anonymous(BLOCK, 3);
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| frame(80, i)).collect();
    assert!(ring.kernel_fill(0, &block_of(&frames[..3])));
    assert!(ring.kernel_fill(1, &block_of(&frames[3..])));
    let mut rx = rx_over(ring);
    // Two frames: block 0 stays with user space, half read.
    assert_eq!(receive_all(&mut rx, 2), vec![0, 1]);
    assert!(rx.ring.is_user(0));
    // The rest of block 0, then block 1; both go back to the kernel on finish.
    assert_eq!(receive_all(&mut rx, 8), vec![2, 3, 4]);
    assert!(!rx.ring.is_user(0) && !rx.ring.is_user(1));
    assert_eq!(receive_all(&mut rx, 8), Vec::<u8>::new());
    // The kernel refills block 2, then wraps around to block 0.
    assert!(rx.ring.kernel_fill(2, &block_of(&frames[..1])));
    assert!(rx.ring.kernel_fill(0, &block_of(&frames[1..2])));
    assert_eq!(receive_all(&mut rx, 8), vec![0, 1]);
    assert_eq!(rx.stats.snapshot().rx_frames, 7);
}

#[test]
fn frames_stay_readable_until_finish_even_across_receives() {
    let mut ring = RxRing::anonymous(BLOCK, 2);
    assert!(ring.kernel_fill(0, &block_of(&[frame(80, 1)])));
    assert!(ring.kernel_fill(1, &block_of(&[frame(80, 2)])));
    let mut rx = rx_over(ring);
    let mut a = RxBatch::new(8);
    rx.receive(&mut a);
    let mut b = RxBatch::new(8);
    rx.receive(&mut b);
    assert_eq!(a.len() + b.len(), 2);
    // Every block is held: a third receive must not read block 0 again.
    let mut c = RxBatch::new(8);
    rx.receive(&mut c);
    assert!(c.is_empty());
    assert_eq!(rx.frame(a.descs()[0].handle).head[20], 1);
    rx.finish();
    assert!(rx.frame(a.descs()[0].handle).is_empty());
}

#[test]
fn dropped_frames_are_counted_and_do_not_stall_the_ring() {
    let mut ring = RxRing::anonymous(BLOCK, 2);
    let mut fb = FakeBlock::new(BLOCK);
    fb.push(&[0; PACKET_HDR_LEN], &frame(1600, 9), FakePacket::default());
    fb.push(
        &[0; PACKET_HDR_LEN],
        &frame(60, 9),
        FakePacket {
            len: Some(9000),
            ..FakePacket::default()
        },
    );
    fb.push(&[0; PACKET_HDR_LEN], &frame(60, 3), FakePacket::default());
    assert!(ring.kernel_fill(0, &fb.finish()));
    let mut rx = rx_over(ring);
    assert_eq!(receive_all(&mut rx, 8), vec![3]);
    let s = rx.stats.snapshot();
    assert_eq!(s.drops(PortDrop::Oversize), 1);
    assert_eq!(s.drops(PortDrop::Truncated), 1);
    assert!(!rx.ring.is_user(0));
}

#[test]
fn ring_drops_are_read_when_the_ring_runs_dry_or_turns_never_per_idle_poll() {
    let mut cadence = RingDropsCadence::default();
    assert!(
        !cadence.due(true, 4),
        "no block came back: the kernel cannot have dropped since the last read"
    );
    cadence.released(1);
    assert!(
        !cadence.due(false, 4),
        "blocks still ready: wait for the ring to run dry"
    );
    assert!(cadence.due(true, 4));
    for _ in 0..3 {
        assert!(!cadence.due(true, 4), "an idle port makes no system call");
    }
    cadence.released(3);
    assert!(!cadence.due(false, 4));
    cadence.released(1);
    assert!(
        cadence.due(false, 4),
        "a whole turn of a ring that never runs dry"
    );
}
