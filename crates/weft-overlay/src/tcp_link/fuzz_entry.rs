//! Bodies of the `tcp_link_decode` and `tcp_link_handshake` fuzz targets
//! (`fuzz/fuzz_targets/`), also run by proptests on stable.

use super::auth::{self, Hello, LinkKey, Role, HELLO_LEN, PROOF_LEN};
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

/// Takes `data` as what a client sends a listening end that has a key: a hello, then a
/// proof. Must never panic; returns whether the proof verified (it must not, without the key:
/// the fuzzer does not know it).
pub fn handshake(data: &[u8]) -> bool {
    let mut hello = [0u8; HELLO_LEN];
    let Some(bytes) = data.get(..HELLO_LEN) else {
        return false;
    };
    hello.copy_from_slice(bytes);
    let Ok(peer) = Hello::parse(&hello) else {
        return false;
    };
    let ours = Hello {
        role: Role::Listener,
        link_id: peer.link_id,
        nonce: [0x3c; auth::NONCE_LEN],
    };
    if ours.check_peer(&peer).is_err() {
        return false;
    }
    let mut proof = [0u8; PROOF_LEN];
    let Some(bytes) = data.get(HELLO_LEN..HELLO_LEN + PROOF_LEN) else {
        return false;
    };
    proof.copy_from_slice(bytes);
    let Ok(key) = LinkKey::new(b"a key the fuzzer is never told, 32+ bytes".to_vec()) else {
        return false;
    };
    auth::verify(&key, &ours, &peer, &proof).is_ok()
}
