//! Ring layout readers over blocks built the way the kernel builds them.

use proptest::prelude::*;

use super::*;

/// Builds a `TPACKET_V3` block the way `tpacket_rcv` lays it out: block header, then per
/// packet a `tpacket3_hdr`, a `sockaddr_ll`, padding, the 10-byte virtio-net header and the
/// frame, each packet 16-byte aligned.
pub(crate) struct FakeBlock {
    bytes: Vec<u8>,
    num_pkts: u32,
    next: usize,
    last: Option<usize>,
}

/// Per-packet knobs of [`FakeBlock::push`].
#[derive(Clone, Copy, Default)]
pub(crate) struct FakePacket {
    /// Bytes the packet had (default: the frame's length).
    pub(crate) len: Option<usize>,
    pub(crate) status: u32,
    pub(crate) vlan_tci: u16,
    pub(crate) vlan_tpid: u16,
    pub(crate) pkttype: u8,
}

fn align16(v: usize) -> usize {
    (v + 15) & !15
}

impl FakeBlock {
    pub(crate) fn new(block_size: usize) -> Self {
        FakeBlock {
            bytes: vec![0; block_size],
            num_pkts: 0,
            next: BLOCK_HEADER_LEN,
            last: None,
        }
    }

    /// Appends a packet; returns where its Ethernet header starts. Panics when it does not
    /// fit (a test bug).
    pub(crate) fn push(&mut self, vnet_header: &[u8], frame: &[u8], p: FakePacket) -> usize {
        let offset = self.next;
        // tp_hdrlen (48 + 20 = 68) + max(16, 14), aligned, + vnet header - mac length.
        let netoff = align16(68 + 16) + 10;
        let mac = offset + netoff - 14;
        let end = mac + frame.len();
        assert!(
            end <= self.bytes.len(),
            "packet does not fit the fake block"
        );
        let put32 =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        let put16 =
            |b: &mut Vec<u8>, at: usize, v: u16| b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        let snaplen = u32::try_from(frame.len()).unwrap();
        let len = u32::try_from(p.len.unwrap_or(frame.len())).unwrap();
        put32(&mut self.bytes, offset + pkt::SNAPLEN, snaplen);
        put32(&mut self.bytes, offset + pkt::LEN, len);
        put32(&mut self.bytes, offset + pkt::STATUS, p.status);
        put16(
            &mut self.bytes,
            offset + pkt::MAC,
            u16::try_from(mac - offset).unwrap(),
        );
        put16(
            &mut self.bytes,
            offset + pkt::MAC + 2,
            u16::try_from(netoff).unwrap(),
        );
        put32(
            &mut self.bytes,
            offset + pkt::VLAN_TCI,
            u32::from(p.vlan_tci),
        );
        put16(&mut self.bytes, offset + pkt::VLAN_TPID, p.vlan_tpid);
        self.bytes[offset + pkt::PKTTYPE] = p.pkttype;
        self.bytes[mac - vnet_header.len()..mac].copy_from_slice(vnet_header);
        self.bytes[mac..end].copy_from_slice(frame);
        if let Some(last) = self.last {
            put32(
                &mut self.bytes,
                last + pkt::NEXT_OFFSET,
                u32::try_from(offset - last).unwrap(),
            );
        }
        self.last = Some(offset);
        self.num_pkts += 1;
        self.next = align16(end);
        mac
    }

    /// The block, handed to user space (status `TP_STATUS_USER`).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let n = self.num_pkts;
        let first = u32::try_from(BLOCK_HEADER_LEN).unwrap();
        let len = u32::try_from(self.next).unwrap();
        self.bytes[BLOCK_STATUS..BLOCK_STATUS + 4]
            .copy_from_slice(&libc::TP_STATUS_USER.to_ne_bytes());
        self.bytes[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&n.to_ne_bytes());
        self.bytes[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&first.to_ne_bytes());
        self.bytes[BLOCK_LEN..BLOCK_LEN + 4].copy_from_slice(&len.to_ne_bytes());
        self.bytes
    }
}

#[test]
fn block_and_packet_headers_read_back_what_the_kernel_wrote() {
    let mut fb = FakeBlock::new(4096);
    let frame = [7u8; 60];
    let mac = fb.push(
        &[0; 10],
        &frame,
        FakePacket {
            status: TP_STATUS_VLAN_VALID,
            vlan_tci: 42,
            pkttype: 4,
            ..FakePacket::default()
        },
    );
    let mac2 = fb.push(&[0; 10], &frame[..20], FakePacket::default());
    let block = fb.finish();
    let h = BlockHeader::read(&block).unwrap();
    assert_eq!(h.num_pkts, 2);
    assert_eq!(h.first_offset, BLOCK_HEADER_LEN);
    let p = PacketHeader::read(&block, h.first_offset).unwrap();
    assert_eq!((p.mac, p.snaplen, p.len), (mac, 60, 60));
    assert_eq!(
        (p.status, p.vlan_tci, p.pkttype),
        (TP_STATUS_VLAN_VALID, 42, 4)
    );
    let p2 = PacketHeader::read(&block, p.offset + p.next_offset).unwrap();
    assert_eq!((p2.mac, p2.snaplen, p2.next_offset), (mac2, 20, 0));
}

#[test]
fn a_block_header_claiming_more_than_the_block_is_refused() {
    let mut block = FakeBlock::new(4096).finish();
    block[BLOCK_LEN..BLOCK_LEN + 4].copy_from_slice(&8192u32.to_ne_bytes());
    assert_eq!(BlockHeader::read(&block), None);
    assert_eq!(BlockHeader::read(&block[..10]), None);
}

#[test]
fn a_packet_whose_bytes_leave_the_block_is_refused() {
    let mut fb = FakeBlock::new(4096);
    fb.push(&[0; 10], &[1; 100], FakePacket::default());
    let mut block = fb.finish();
    let at = BLOCK_HEADER_LEN + pkt::SNAPLEN;
    block[at..at + 4].copy_from_slice(&5000u32.to_ne_bytes());
    assert_eq!(PacketHeader::read(&block, BLOCK_HEADER_LEN), None);
    assert_eq!(PacketHeader::read(&block, 4090), None);
    assert_eq!(PacketHeader::read(&block, usize::MAX - 3), None);
}

#[test]
fn a_packet_whose_frame_overlaps_its_header_is_refused() {
    let mut fb = FakeBlock::new(4096);
    fb.push(&[0; 10], &[1; 100], FakePacket::default());
    let mut block = fb.finish();
    let at = BLOCK_HEADER_LEN + pkt::MAC;
    block[at..at + 2].copy_from_slice(&8u16.to_ne_bytes());
    assert_eq!(PacketHeader::read(&block, BLOCK_HEADER_LEN), None);
}

#[test]
fn the_anonymous_ring_hands_out_only_user_owned_blocks() {
    let mut ring = RxRing::anonymous(4096, 2);
    assert!(!ring.is_user(0));
    assert!(ring.block_mut(0).is_none());
    assert!(ring.bytes(0, 10).is_none());
    let mut fb = FakeBlock::new(4096);
    fb.push(&[0; 10], &[1; 100], FakePacket::default());
    assert!(ring.kernel_fill(0, &fb.finish()));
    assert!(ring.is_user(0));
    assert!(ring.block_mut(0).is_some());
    assert!(ring.bytes(4000, 96).is_some());
    assert!(ring.bytes(4000, 97).is_none(), "a range across two blocks");
    assert!(
        !ring.kernel_fill(0, &[0; 16]),
        "user-owned blocks are not refilled"
    );
    ring.release(0);
    assert!(!ring.is_user(0));
    assert!(!ring.is_user(9));
}

proptest! {
    #[test]
    fn layout_readers_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        offset in any::<usize>(),
        small in 0usize..512,
    ) {
        let _ = BlockHeader::read(&bytes);
        let _ = PacketHeader::read(&bytes, offset);
        let _ = PacketHeader::read(&bytes, small);
    }
}
