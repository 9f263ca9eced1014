use proptest::prelude::*;

use super::{guest_rings, GuestRun};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fuzz_entry_never_panics_loses_no_chain_and_names_only_real_descriptors(
        data in proptest::collection::vec(any::<u8>(), 0..4096),
    ) {
        guest_rings(&data);
    }

    /// Random bytes seldom make a chain the port takes; a well-behaved guest with a few
    /// bytes changed goes deep (a port that kept back one chain fails here at once).
    #[test]
    fn a_well_behaved_guest_with_a_few_bytes_changed_loses_no_chain(
        rounds in 1u8..=4,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        tail in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut data = well_behaved(rounds);
        for (at, value) in edits {
            let i = at.index(data.len());
            data[i] = value;
        }
        data.extend(tail);
        guest_rings(&data);
    }
}

/// Bytes that decode into a well-behaved guest: all features, rings of 8, every descriptor
/// a one-buffer chain on its own slot (`kind` 0: a slot address, NEXT and WRITE from
/// `flags`), all eight made available on both queues, frames with a zero header.
fn well_behaved(rounds: u8) -> Vec<u8> {
    let mut d = vec![0u8];
    d.extend_from_slice(&u64::MAX.to_le_bytes());
    d.extend_from_slice(&[3, 3]);
    for (queue_flags, first_slot) in [(0u8, 0u16), (2 << 3, 64)] {
        for i in 0..8u16 {
            // kind (address on a slot, flags), slot, length kind 6 (1526 B), next.
            d.push(queue_flags);
            d.extend_from_slice(&(first_slot + i).to_le_bytes());
            d.push(6);
            d.push(0);
        }
    }
    // The indirect zone, unused: eight descriptors of six bytes each.
    d.extend(std::iter::repeat_n(0u8, 8 * 6));
    d.push(rounds - 1);
    for _ in 0..2 {
        d.push(8);
        d.extend(0..8u8);
        d.push(0);
        d.extend_from_slice(&0u16.to_le_bytes());
    }
    // Buffers: a zero header and a frame, for every slot the chains use.
    for _ in 0..72 {
        d.push(1);
        d.extend(std::iter::repeat_n(0x5a, 16));
    }
    d
}

#[test]
fn a_well_behaved_guest_gets_every_frame_through() {
    let run = guest_rings(&well_behaved(1));
    assert_eq!(
        run,
        GuestRun {
            received: 8,
            delivered: 8
        }
    );
}

#[test]
fn the_empty_input_is_a_guest_that_sends_nothing() {
    assert_eq!(guest_rings(&[]), GuestRun::default());
}
