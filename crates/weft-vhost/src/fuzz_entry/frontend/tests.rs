use proptest::prelude::*;
use vm_memory::{FileOffset, MmapRegion};

use super::hostile::{Frontend, TAG};
use super::*;

/// A well-behaved frontend: negotiation, one 256 KiB region, every ring of 256 set up,
/// called, kicked and enabled, then GET_QUEUE_NUM; the guest posts a buffer on each.
fn well_behaved(pairs: u8, need_reply: bool) -> Vec<u8> {
    let s = if need_reply { 11 } else { 0 };
    // Records (request as its index in FAVOURED, shape, body): SET_OWNER, GET_FEATURES,
    // GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES and SET_FEATURES (all), SET_MEM_TABLE.
    let mut d = vec![
        2 | (pairs - 1),
        13,
        s,
        14,
        s,
        17,
        s,
        11,
        s,
        0xff,
        9,
        s,
        0,
        0,
    ];
    d.extend([0, s, 0, 0, 0]);
    for q in 0..2 * pairs {
        // SET_VRING_NUM, _ADDR, _BASE, _CALL, _KICK, _ENABLE.
        d.extend([
            2, s, q, 8, 3, s, q, 0, 5, s, q, 0, 8, s, q, 6, s, q, 12, s, q, 1,
        ]);
    }
    d.extend([16, s]);
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fuzz_entry_never_panics_and_leaks_no_descriptor(
        data in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        frontend_messages(&data);
    }

    /// Random bytes seldom get a ring running; a well-behaved session with a few bytes
    /// changed does, then stops wherever the change makes it.
    #[test]
    fn a_well_behaved_session_with_a_few_bytes_changed_leaks_nothing(
        pairs in 1u8..=2,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut data = well_behaved(pairs, pairs == 2);
        for (at, value) in edits {
            let i = at.index(data.len());
            data[i] = value;
        }
        frontend_messages(&data);
    }
}

#[test]
fn a_well_behaved_session_passes_a_frame_each_way() {
    // GET_QUEUE_NUM without MQ ends the session, after all else; two replies.
    let out = run(&well_behaved(1, false));
    let all = (out.sent, out.handled, out.replies, out.serving);
    assert_eq!(all, (19, 18, 2, 2));
    assert_eq!((out.received, out.delivered), (1, 1));
    // Two pairs: every request from SET_PROTOCOL_FEATURES on acknowledged.
    let out = run(&well_behaved(2, true));
    let all = (out.sent, out.handled, out.replies, out.serving);
    assert_eq!(all, (31, 31, 30, 4));
    assert_eq!((out.received, out.delivered), (2, 1));
}

#[test]
fn garbage_ends_the_session_and_leaks_nothing() {
    let counting: Vec<u8> = (0..=255).cycle().take(4096).collect();
    for data in [vec![0xff; 300], vec![0; 1000], counting, vec![]] {
        run(&data);
    }
}

/// The oracle itself: a copy of a descriptor sent, or a mapping of a memfd sent, is
/// seen, whatever the eventfd holds; the frontend's own copies are not.
#[test]
fn leftovers_sees_every_descriptor_and_mapping_kept() {
    let (a, _b) = UnixStream::pair().unwrap();
    let mut fe = Frontend::new(a, VhostPortConfig::default());
    fe.memfd(0x1000, &mut Input(&[])).unwrap();
    fe.eventfd().unwrap();
    assert_eq!(fe.leftovers(), (0, 0));
    let file = fe.files[0].try_clone().unwrap();
    let event = fe.events[0].try_clone().unwrap();
    assert_eq!(event.read().unwrap(), TAG);
    assert_eq!(fe.leftovers(), (2, 0));
    drop(event);
    let region = MmapRegion::<()>::from_file(FileOffset::new(file, 0), 0x1000).unwrap();
    assert_eq!(fe.leftovers(), (1, 1));
    drop(region);
    assert_eq!(fe.leftovers(), (0, 0));
}
