//! The bounds on the work one guest's chains can cost (`ring_access::MAX_CHAIN_DESCRIPTORS`,
//! `rx/budget.rs`, `tx/budget.rs`), through rings the mock driver builds: chains past the
//! cap break their queue after reading no more than the cap, walks stop at the descriptor
//! that decides a chain, and each poll reads no more than its budget — measured with the
//! queues' count of descriptors read.

use virtio_queue::desc::split::Descriptor as SplitDescriptor;
use vm_memory::{ByteValued, Bytes, GuestAddress, GuestMemoryMmap};
use weft_switch::PortRx;

use super::{guest_memory, Driver, MockRig, HDR0, MOCK_INDIRECT};
use crate::config::{VhostPortConfig, MAX_FRAME_LEN};
use crate::counters::{FrameDrop, QueueFault};
use crate::ring_access::MAX_CHAIN_DESCRIPTORS;
use crate::tests::testutil::{all_features, ether_frame, Rig, INDIRECT, NEXT, WRITE};

/// The cap as a count.
const CAP: usize = MAX_CHAIN_DESCRIPTORS as usize;

/// Writes an indirect table of buffers `(addr, len, flags)` at `at`, each but the last
/// flagged NEXT to the one after it; its length in bytes.
fn write_table(mem: &GuestMemoryMmap, at: u64, bufs: &[(u64, u32, u16)]) -> u32 {
    let mut bytes = Vec::with_capacity(16 * bufs.len());
    for (i, &(addr, len, flags)) in bufs.iter().enumerate() {
        let d = if i + 1 < bufs.len() {
            SplitDescriptor::new(addr, len, flags | NEXT, u16::try_from(i + 1).unwrap())
        } else {
            SplitDescriptor::new(addr, len, flags, 0)
        };
        bytes.extend_from_slice(d.as_slice());
    }
    mem.write_slice(&bytes, GuestAddress(at)).unwrap();
    u32::try_from(bytes.len()).unwrap()
}

/// Makes `count` chains available, each the indirect table at `table` (`len` bytes).
fn add_indirect(d: &mut Driver<'_>, table: u64, len: u32, count: usize) -> Vec<u16> {
    let chains: Vec<_> = (0..count).map(|_| vec![(table, len, INDIRECT)]).collect();
    d.add_chains(&chains)
}

/// `bytes` written into the transmit queue's buffer area, one byte per buffer.
fn one_byte_buffers(d: &mut Driver<'_>, bytes: &[u8]) -> Vec<(u64, u32, u16)> {
    let at = d.write(bytes);
    (0..bytes.len() as u64).map(|i| (at + i, 1, 0)).collect()
}

/// A virtio-net header and a frame of `total - 12` bytes: `total` bytes in all.
fn header_and_frame(total: usize, seed: u8) -> (Vec<u8>, Vec<u8>) {
    let frame = ether_frame(1, 2, total - HDR0.len(), seed);
    ([&HDR0[..], &frame].concat(), frame)
}

#[test]
fn an_indirect_chain_of_exactly_the_cap_is_read_whole() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    let (bytes, frame) = header_and_frame(CAP, 3);
    let bufs = one_byte_buffers(&mut rig.txq, &bytes);
    let len = write_table(&mem, MOCK_INDIRECT, &bufs);
    add_indirect(&mut rig.txq, MOCK_INDIRECT, len, 1);
    let got = rig.receive();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, frame);
    assert_eq!(rig.fault_from_guest(), None);
    // The table's 1024 buffers and the descriptor naming it.
    assert_eq!(rig.stats_from_guest().descriptors, CAP as u64 + 1);
}

#[test]
fn an_indirect_chain_one_past_the_cap_faults_its_queue_after_reading_the_cap() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    let (bytes, _) = header_and_frame(CAP + 1, 3);
    let bufs = one_byte_buffers(&mut rig.txq, &bytes);
    let len = write_table(&mem, MOCK_INDIRECT, &bufs);
    add_indirect(&mut rig.txq, MOCK_INDIRECT, len, 1);
    assert!(rig.receive().is_empty());
    assert_eq!(rig.fault_from_guest(), Some(QueueFault::TooManyDescriptors));
    let s = rig.stats_from_guest();
    assert_eq!(s.faulted(QueueFault::TooManyDescriptors), 1);
    assert_eq!(s.descriptors, CAP as u64 + 1);
    // The port's other queue goes on.
    rig.assert_switch_to_guest_works(9, "beside a queue broken by a long chain");
}

#[test]
fn an_indirect_table_of_65535_descriptors_is_read_no_further_than_the_cap() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // Without the cap this would be a valid frame of 65523 bytes: every descriptor read.
    let (bytes, _) = header_and_frame(usize::from(u16::MAX), 5);
    assert!(bytes.len() - HDR0.len() <= MAX_FRAME_LEN);
    let bufs = one_byte_buffers(&mut rig.txq, &bytes);
    let len = write_table(&mem, MOCK_INDIRECT, &bufs);
    assert_eq!(len, 16 * u32::from(u16::MAX));
    add_indirect(&mut rig.txq, MOCK_INDIRECT, len, 1);
    assert!(rig.receive().is_empty());
    assert_eq!(rig.fault_from_guest(), Some(QueueFault::TooManyDescriptors));
    assert_eq!(rig.stats_from_guest().descriptors, CAP as u64 + 1);
}

#[test]
fn a_direct_chain_one_past_the_cap_faults_its_queue() {
    // A ring larger than the cap: a direct chain may be as long as the ring.
    let config = VhostPortConfig {
        max_queue_size: 2048,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 2048);
    let frame = ether_frame(1, 2, 1100, 1);
    // 1023 one-byte buffers and one with the rest: exactly the cap.
    let splits = vec![1usize; CAP];
    rig.txq.send(&HDR0, &frame, &splits[..CAP - 1]);
    let mut batch = weft_switch::RxBatch::new(64);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1, "a chain of exactly the cap is taken");
    rx.finish();
    // One more one-byte buffer: past the cap. (The first chain's debt is paid back
    // before the port reads again.)
    rig.txq.send(&HDR0, &frame, &splits);
    for _ in 0..64 {
        batch.clear();
        rx.receive(&mut batch);
        assert_eq!(batch.len(), 0);
        rx.finish();
    }
    assert_eq!(rig.fault_from_guest(), Some(QueueFault::TooManyDescriptors));
    assert_eq!(rig.stats_from_guest().descriptors, 2 * CAP as u64);
}

#[test]
fn a_zero_length_descriptor_drops_the_frame_without_reading_the_rest_of_its_chain() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    let (bytes, _) = header_and_frame(72, 0);
    let at = rig.txq.write(&bytes);
    // A good buffer, then a thousand empty ones.
    let mut bufs = vec![(at, 72, 0)];
    bufs.extend(vec![(at, 0, 0); 1000]);
    let len = write_table(&mem, MOCK_INDIRECT, &bufs);
    let head = add_indirect(&mut rig.txq, MOCK_INDIRECT, len, 1)[0];
    assert!(rig.receive().is_empty());
    let s = rig.stats_from_guest();
    assert_eq!(s.dropped(FrameDrop::ZeroLengthDescriptor), 1);
    // The descriptor naming the table, the good buffer and the first empty one.
    assert_eq!(s.descriptors, 3);
    assert_eq!(rig.txq.used(), vec![(u32::from(head), 0)], "chain returned");
    rig.assert_guest_to_switch_works(1, "after the dropped chain");
}

/// Posts one receive chain: an indirect table of `empty` zero-length buffers and a 2 KiB
/// one after them.
fn post_empty_then_real(mem: &GuestMemoryMmap, rig: &mut MockRig<'_>, empty: usize) {
    let room = rig.rxq.alloc(2048);
    let mut bufs = vec![(room, 0, WRITE); empty];
    bufs.push((room, 2048, WRITE));
    let len = write_table(mem, MOCK_INDIRECT, &bufs);
    add_indirect(&mut rig.rxq, MOCK_INDIRECT, len, 1);
}

#[test]
fn zero_length_receive_descriptors_up_to_the_cap_are_walked_past() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // 1023 empty buffers and a real one: exactly the cap, the frame goes in.
    post_empty_then_real(&mem, &mut rig, CAP - 1);
    let f = ether_frame(2, 1, 200, 4);
    assert_eq!(rig.transmit(&[&f]), 1);
    let used = rig.rxq.used();
    assert_eq!(used.len(), 1);
    assert_eq!(&rig.rxq.read_chain(used[0].0, used[0].1)[12..], &f[..]);
    assert_eq!(rig.stats_to_guest().descriptors, CAP as u64 + 1);
}

#[test]
fn zero_length_receive_descriptors_count_toward_the_cap() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // One empty buffer more: past the cap, the queue breaks.
    post_empty_then_real(&mem, &mut rig, CAP);
    let f = ether_frame(2, 1, 200, 4);
    assert_eq!(rig.transmit(&[&f]), 0);
    assert_eq!(rig.fault_to_guest(), Some(QueueFault::TooManyDescriptors));
    let s = rig.stats_to_guest();
    assert_eq!(s.faulted(QueueFault::TooManyDescriptors), 1);
    // The table's first 1024 buffers and the descriptor naming it.
    assert_eq!(s.descriptors, CAP as u64 + 1);
}

#[test]
fn a_frame_known_too_long_stops_the_walk_at_that_descriptor() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // The mock's own indirect chain: 200 buffers of 4 KiB. The frame (what follows the
    // 12-byte header) passes 64 KB + 22 bytes at the 17th.
    rig.txq.add_mock_indirect(200);
    assert!(rig.receive().is_empty());
    let s = rig.stats_from_guest();
    assert_eq!(s.dropped(FrameDrop::FrameTooLong), 1);
    assert_eq!(s.descriptors, 1 + 17);
    assert_eq!(rig.fault_from_guest(), None);
}

/// Chains of the receive queue, each an indirect table of `per_chain` one-byte buffers:
/// room for 1 byte of frame per descriptor (the header spread over the first twelve).
fn post_tiny_receive_chains(mem: &GuestMemoryMmap, d: &mut Driver<'_>, chains: usize) {
    let per_chain = 200;
    for k in 0..chains {
        let at = d.alloc(per_chain);
        let bufs: Vec<_> = (0..per_chain as u64).map(|i| (at + i, 1, WRITE)).collect();
        let table = MOCK_INDIRECT + 0x1000 * k as u64;
        let len = write_table(mem, table, &bufs);
        add_indirect(d, table, len, 1);
    }
}

#[test]
fn a_frame_that_would_take_more_than_the_cap_in_receive_descriptors_is_dropped_and_its_chains_go_back(
) {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    post_tiny_receive_chains(&mem, &mut rig.rxq, 10);
    // The largest frame brings 1026 descriptors (`tx/budget.rs`), enough to walk six
    // chains of 201: the first to pass the cap ends the frame.
    let largest = ether_frame(2, 1, MAX_FRAME_LEN, 0);
    assert_eq!(rig.transmit(&[&largest]), 1, "taken (and dropped)");
    assert!(rig.rxq.used().is_empty(), "no chain used");
    let s = rig.stats_to_guest();
    assert_eq!(s.dropped(FrameDrop::TooManyDescriptors), 1);
    assert_eq!(s.frames, 0);
    assert_eq!(s.descriptors, 6 * 201);
    assert_eq!(rig.fault_to_guest(), None);
}

#[test]
fn a_burst_stops_when_its_descriptor_budget_is_spent_and_the_debt_is_carried() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    post_tiny_receive_chains(&mem, &mut rig.rxq, 10);
    let frames: Vec<Vec<u8>> = (0..32).map(|i| ether_frame(2, 1, 1500, i)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    // A 1500-byte frame brings 25 descriptors: spent within its first chain of 201, which
    // goes back with it; the burst stops there, 176 owed.
    assert_eq!(rig.transmit(&refs), 0);
    let s = rig.stats_to_guest();
    assert_eq!((s.budget_cuts, s.descriptors), (1, 201));
    // Each later burst's first frame pays 25 of the debt and is refused, reading nothing,
    // until the ninth burst, whose first frame finds credit again.
    for burst in 2..=8 {
        assert_eq!(rig.transmit(&refs), 0);
        let s = rig.stats_to_guest();
        assert_eq!(
            (s.budget_cuts, s.descriptors),
            (burst, 201),
            "burst {burst}"
        );
    }
    assert_eq!(rig.transmit(&refs), 0);
    let s = rig.stats_to_guest();
    assert_eq!((s.budget_cuts, s.descriptors), (9, 402));
    assert!(rig.rxq.used().is_empty());
    assert_eq!(rig.fault_to_guest(), None);
}

#[test]
fn a_large_frame_into_2_kb_mergeable_buffers_is_never_refused_for_the_budget() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    rig.rxq.post_each(40, 2048);
    let f = ether_frame(2, 1, 60_000, 3);
    assert_eq!(rig.transmit(&[&f]), 1);
    let used = rig.rxq.used();
    // 12 + 60000 bytes in 2 KiB buffers: 30 of them.
    assert_eq!(used.len(), 30);
    assert_eq!(&rig.rxq.read_used(&used)[12..], &f[..]);
    let s = rig.stats_to_guest();
    assert_eq!((s.frames, s.budget_cuts, s.descriptors), (1, 0, 30));
}

#[test]
fn a_receive_reads_no_more_than_its_budget_and_the_rest_waits_for_later_polls() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // Twenty valid frames, each a chain of the cap's length (one table shared by all).
    let (bytes, frame) = header_and_frame(CAP, 7);
    let bufs = one_byte_buffers(&mut rig.txq, &bytes);
    let len = write_table(&mem, MOCK_INDIRECT, &bufs);
    add_indirect(&mut rig.txq, MOCK_INDIRECT, len, 20);
    // A batch of 64 frames: a quantum of 32 descriptors beyond their chains' first per
    // receive (`rx/budget.rs`).
    let quantum = 32u64;
    let (mut polls, mut got, mut before) = (0u64, 0usize, 0u64);
    while got < 20 {
        polls += 1;
        assert!(polls < 1000, "the chains never all came");
        let frames = rig.receive();
        for (f, _) in &frames {
            assert_eq!(f, &frame);
        }
        got += frames.len();
        let read = rig.stats_from_guest().descriptors;
        assert!(
            read - before <= quantum + CAP as u64 + 1,
            "{} descriptors in one receive",
            read - before
        );
        before = read;
        if got < 20 {
            assert!(rig.rx.needs_polling(), "chains left, no kick will come");
        }
    }
    let s = rig.stats_from_guest();
    assert_eq!(s.descriptors, 20 * (CAP as u64 + 1));
    // Beyond each chain's first, no more than a quantum a poll on average: what the polls
    // brought, and the debt the last chain left.
    assert!(
        s.descriptors - 20 <= polls * quantum + CAP as u64,
        "{polls} polls"
    );
    assert!(s.budget_cuts > 0);
    assert_eq!(rig.txq.used().len(), 20);
}

#[test]
fn a_full_batch_of_one_descriptor_chains_is_never_cut_by_the_budget() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // Two full batches: as many chains as the mock makes available.
    for round in 0..2 {
        for i in 0..64 {
            rig.txq.send(&HDR0, &ether_frame(1, 2, 60, i), &[]);
        }
        assert_eq!(rig.receive().len(), 64, "round {round}");
        assert!(!rig.rx.needs_polling());
    }
    let s = rig.stats_from_guest();
    assert_eq!(s.budget_cuts, 0);
    assert_eq!(s.descriptors, 2 * 64);
}

#[test]
fn a_full_batch_of_two_descriptor_chains_takes_two_polls_and_loses_nothing() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, super::features(&[], &[]));
    // The header in a buffer of its own: two descriptors a frame.
    let frames: Vec<Vec<u8>> = (0..64).map(|i| ether_frame(1, 2, 60, i)).collect();
    for f in &frames {
        rig.txq.send(&HDR0, f, &[12]);
    }
    let first = rig.receive();
    assert_eq!(first.len(), 32);
    assert!(rig.rx.needs_polling(), "the rest waits for the next poll");
    let second = rig.receive();
    assert_eq!(second.len(), 32);
    let got: Vec<Vec<u8>> = first.into_iter().chain(second).map(|(f, _)| f).collect();
    assert_eq!(got, frames);
    assert_eq!(rig.txq.used().len(), 64);
    assert!(!rig.rx.needs_polling());
    let s = rig.stats_from_guest();
    assert_eq!((s.budget_cuts, s.descriptors), (1, 128));
}
