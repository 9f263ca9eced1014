use super::*;
use etherparse::PacketBuilder;
use proptest::prelude::*;

/// A valid TCP or UDP frame over IPv4 or IPv6 with `len` bytes of payload, built by etherparse.
fn valid_frame(v6: bool, tcp: bool, len: usize) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let payload = vec![0x5a; len];
    let mut out = Vec::new();
    match (v6, tcp) {
        (false, true) => eth
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1, 2, 3, 4)
            .ack(5)
            .write(&mut out, &payload),
        (false, false) => eth
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 4789)
            .write(&mut out, &payload),
        (true, true) => eth
            .ipv6([1; 16], [2; 16], 64)
            .tcp(1, 2, 3, 4)
            .fin()
            .write(&mut out, &payload),
        (true, false) => eth
            .ipv6([1; 16], [2; 16], 64)
            .udp(1, 2)
            .write(&mut out, &payload),
    }
    .unwrap();
    out
}

#[test]
fn segment_target_segments_a_valid_superframe() {
    // needs_csum, GSO TCPv4, csum 34+16, gso_size 1000, max frame 1514, 9216-byte output.
    let mut data = vec![
        0b0101, 0, 34, 0, 16, 0x03, 0xe8, 0, 54, 0x05, 0xea, 0x24, 0x00,
    ];
    data.extend_from_slice(&valid_frame(false, true, 5000));
    assert_eq!(segment_segments(&data), Some(5));
}

#[test]
fn virtio_target_accepts_a_valid_header_and_frame() {
    let frame = valid_frame(true, false, 3000);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 54,
        csum_offset: 6,
        gso: GsoKind::UdpL4,
        gso_size: 1400,
        hdr_len: 62,
        ..OffloadInfo::default()
    };
    let mut data = VirtioNetHeader::from_offload_info(&info)
        .into_inner()
        .to_vec();
    data.extend_from_slice(&frame);
    assert_eq!(virtio_net_header_segments(&data), Some(3));
}

proptest! {
    #[test]
    fn parse_frame_survives_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        parse_frame(&data);
    }

    #[test]
    fn virtio_net_header_survives_arbitrary_bytes(
        data in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        virtio_net_header(&data);
    }

    #[test]
    fn segment_survives_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        segment(&data);
    }

    #[test]
    fn targets_survive_corrupted_valid_frames(
        v6 in any::<bool>(),
        tcp in any::<bool>(),
        len in 0usize..3000,
        head in proptest::array::uniform13(any::<u8>()),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
    ) {
        let mut frame = valid_frame(v6, tcp, len);
        for (at, value) in flips {
            let at = at % frame.len().min(90);
            frame[at] = value;
        }
        parse_frame(&frame);
        let mut data = head.to_vec();
        data.extend_from_slice(&frame);
        segment(&data);
        virtio_net_header(&data[1..]);
    }
}
