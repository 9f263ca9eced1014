use proptest::prelude::*;
use weft_packet::{GsoKind, OffloadInfo};

use crate::tcp_link::framing::{
    write_header, DecodeRules, Decoded, Reassembler, HEADER_LEN, MAX_WIRE_FRAME_LEN,
};
use crate::tcp_link::TcpLinkDrop;

const RULES: DecodeRules = DecodeRules {
    link_id: 7,
    max_frame_len: 1522,
    offloads: true,
};

fn encode(out: &mut Vec<u8>, link_id: u32, frame: &[u8], offload: &OffloadInfo) {
    let mut h = [0u8; HEADER_LEN];
    write_header(
        &mut h,
        link_id,
        u32::try_from(frame.len()).unwrap(),
        offload,
    );
    out.extend_from_slice(&h);
    out.extend_from_slice(frame);
}

/// Frames decoded (with their offload state), frames dropped, and why the stream was cut.
type Fed = (
    Vec<(Vec<u8>, OffloadInfo)>,
    Vec<TcpLinkDrop>,
    Option<TcpLinkDrop>,
);

/// Feeds `stream` in chunks ending at `cuts`, decoding as a port would.
fn feed(stream: &[u8], cuts: &[usize]) -> Fed {
    let mut reasm = Reassembler::new(0);
    let (mut frames, mut drops) = (Vec::new(), Vec::new());
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    ends.push(stream.len());
    ends.sort_unstable();
    for end in ends {
        while at < end {
            let spare = reasm.spare();
            let n = (end - at).min(spare.len());
            spare[..n].copy_from_slice(&stream[at..at + n]);
            reasm.filled(n);
            at += n;
            loop {
                match reasm.next_frame(&RULES) {
                    Ok(Decoded::Frame(r, o)) => frames.push((reasm.bytes()[r].to_vec(), o)),
                    Ok(Decoded::Dropped(d)) => drops.push(d),
                    Ok(Decoded::NeedMore) => break,
                    Err(e) => return (frames, drops, Some(e)),
                }
            }
            reasm.compact();
        }
    }
    (frames, drops, None)
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add(u8::try_from(i % 251).unwrap()))
        .collect()
}

/// A valid TCP/IPv4 super-frame's offload state.
fn tso() -> OffloadInfo {
    OffloadInfo {
        needs_csum: true,
        data_valid: false,
        csum_start: 34,
        csum_offset: 16,
        gso: GsoKind::TcpV4,
        gso_size: 1448,
        hdr_len: 54,
    }
}

proptest! {
    #[test]
    fn any_split_of_the_stream_reassembles_the_same_frames(
        lens in proptest::collection::vec(14usize..1522, 1..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..30),
    ) {
        let mut stream = Vec::new();
        let frames: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| frame(l, u8::try_from(i % 256).unwrap()))
            .collect();
        for f in &frames {
            encode(&mut stream, RULES.link_id, f, &OffloadInfo::default());
        }
        let (got, drops, cut) = feed(&stream, &cuts);
        prop_assert_eq!(cut, None);
        prop_assert!(drops.is_empty());
        let got: Vec<Vec<u8>> = got.into_iter().map(|(f, _)| f).collect();
        prop_assert_eq!(got, frames);
    }

    #[test]
    fn super_frames_cross_with_their_offload_state(
        lens in proptest::collection::vec(2000usize..MAX_WIRE_FRAME_LEN, 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        let mut stream = Vec::new();
        for (i, &l) in lens.iter().enumerate() {
            encode(&mut stream, RULES.link_id, &frame(l, u8::try_from(i).unwrap()), &tso());
        }
        let (got, drops, cut) = feed(&stream, &cuts);
        prop_assert_eq!(cut, None);
        prop_assert!(drops.is_empty());
        prop_assert_eq!(got.len(), lens.len());
        for ((f, o), &l) in got.iter().zip(&lens) {
            prop_assert_eq!(f.len(), l);
            prop_assert_eq!(*o, tso());
        }
    }

    #[test]
    fn fuzz_entry_never_panics(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let _ = crate::tcp_link::fuzz_entry::decode(&data);
    }

    #[test]
    fn corrupting_a_header_cuts_the_stream_or_drops_only_that_frame(
        byte in 0usize..12,
        value in any::<u8>(),
    ) {
        let mut stream = Vec::new();
        encode(&mut stream, RULES.link_id, &frame(100, 1), &OffloadInfo::default());
        let original = stream[byte];
        stream[byte] = value;
        encode(&mut stream, RULES.link_id, &frame(60, 2), &OffloadInfo::default());
        let (got, _, cut) = feed(&stream, &[]);
        if value == original {
            prop_assert_eq!(got.len(), 2);
        } else {
            // A changed magic, version, link id or length never yields a wrong frame: the
            // stream is cut, or (a smaller length) the frame boundary lands inside the first
            // frame's bytes, whose garbage header then cuts the stream.
            prop_assert!(cut.is_some() || got.len() < 2);
            prop_assert!(got.iter().all(|(f, _)| f.len() == 100 || f.len() == 60 || byte >= 8));
        }
    }
}

fn first_cut(stream: &[u8]) -> Option<TcpLinkDrop> {
    feed(stream, &[]).2
}

#[test]
fn a_bad_magic_version_or_link_id_cuts_the_stream() {
    let mut good = Vec::new();
    encode(
        &mut good,
        RULES.link_id,
        &frame(64, 0),
        &OffloadInfo::default(),
    );
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(first_cut(&bad), Some(TcpLinkDrop::BadMagic));
    let mut bad = good.clone();
    bad[3] = 2;
    assert_eq!(first_cut(&bad), Some(TcpLinkDrop::BadVersion));
    let mut other = Vec::new();
    encode(&mut other, 8, &frame(64, 0), &OffloadInfo::default());
    assert_eq!(first_cut(&other), Some(TcpLinkDrop::WrongLinkId));
}

#[test]
fn lengths_outside_an_ethernet_header_to_a_super_frame_cut_the_stream_at_once() {
    for len in [0u32, 13, 65_558, u32::MAX] {
        let mut h = [0u8; HEADER_LEN];
        write_header(&mut h, RULES.link_id, len, &OffloadInfo::default());
        // Only the header arrives: the length alone must be refused, without waiting for
        // (or making room for) the bytes it claims.
        assert_eq!(first_cut(&h), Some(TcpLinkDrop::BadLength), "length {len}");
    }
}

#[test]
fn an_oversized_or_badly_offloaded_frame_is_dropped_alone() {
    let mut stream = Vec::new();
    encode(
        &mut stream,
        RULES.link_id,
        &frame(1600, 0),
        &OffloadInfo::default(),
    );
    let bad_offload = OffloadInfo {
        needs_csum: true,
        csum_start: 2, // inside the Ethernet header
        ..OffloadInfo::default()
    };
    encode(&mut stream, RULES.link_id, &frame(100, 0), &bad_offload);
    encode(
        &mut stream,
        RULES.link_id,
        &frame(100, 9),
        &OffloadInfo::default(),
    );
    let (got, drops, cut) = feed(&stream, &[]);
    assert_eq!(cut, None);
    assert_eq!(drops, [TcpLinkDrop::FrameTooBig, TcpLinkDrop::BadOffload]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, frame(100, 9));
}

#[test]
fn a_port_without_offloads_drops_super_frames() {
    let rules = DecodeRules {
        offloads: false,
        ..RULES
    };
    let mut stream = Vec::new();
    encode(&mut stream, RULES.link_id, &frame(5000, 0), &tso());
    let mut reasm = Reassembler::new(0);
    reasm.spare()[..stream.len()].copy_from_slice(&stream);
    reasm.filled(stream.len());
    assert_eq!(
        reasm.next_frame(&rules),
        Ok(Decoded::Dropped(TcpLinkDrop::BadOffload))
    );
}

#[test]
fn the_fuzz_entry_decodes_a_valid_stream() {
    let mut data = vec![0u8]; // link id 0, no offloads, chunks of 1 byte
    for i in 0..5 {
        encode(&mut data, 0, &frame(60 + i, 3), &OffloadInfo::default());
    }
    assert_eq!(crate::tcp_link::fuzz_entry::decode(&data), 5);
}
