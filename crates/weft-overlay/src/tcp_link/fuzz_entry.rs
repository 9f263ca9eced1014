//! Body of the `tcp_link_decode` fuzz target (`fuzz/fuzz_targets/tcp_link_decode.rs`), also
//! run by a proptest on stable.

use super::framing::{DecodeRules, Decoded, Reassembler, MAX_WIRE_FRAME_LEN, MIN_FRAME_LEN};

/// Feeds `data` (after a first byte that picks the chunk size and the rules) to a
/// reassembler as a stream arriving in chunks, decoding after each. Must never panic; every
/// frame must lie inside the buffer and within the length bounds. Returns the frames
/// accepted before the stream was cut (if it was).
pub fn decode(data: &[u8]) -> usize {
    let (mode, stream) = data.split_first().map_or((0, data), |(m, d)| (*m, d));
    let rules = DecodeRules {
        link_id: u32::from(mode >> 4),
        max_frame_len: 1522,
        offloads: mode & 1 != 0,
    };
    let chunk = usize::from(mode >> 1 & 7) * 97 + 1;
    let mut reasm = Reassembler::new(0);
    let mut frames = 0;
    let mut rest = stream;
    loop {
        let spare = reasm.spare();
        let n = rest.len().min(chunk).min(spare.len());
        spare[..n].copy_from_slice(&rest[..n]);
        reasm.filled(n);
        rest = &rest[n..];
        loop {
            match reasm.next_frame(&rules) {
                Ok(Decoded::Frame(range, offload)) => {
                    let frame = &reasm.bytes()[range];
                    assert!((MIN_FRAME_LEN..=MAX_WIRE_FRAME_LEN).contains(&frame.len()));
                    assert!(offload.is_gso() || frame.len() <= rules.max_frame_len);
                    frames += 1;
                }
                Ok(Decoded::Dropped(_)) => {}
                Ok(Decoded::NeedMore) => break,
                Err(_) => return frames,
            }
        }
        reasm.compact();
        if n == 0 {
            return frames;
        }
    }
}
