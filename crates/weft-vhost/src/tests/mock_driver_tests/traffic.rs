//! Plain traffic both ways through mock-built rings, and mergeable receive buffers.

use virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MRG_RXBUF;
use virtio_queue::desc::split::Descriptor as SplitDescriptor;
use virtio_queue::desc::RawDescriptor;
use virtio_queue::mock::DescriptorTable;
use vm_memory::{Bytes, GuestAddress};
use weft_packet::OffloadInfo;

use super::{
    features, guest_memory, header_of, with_event_idx, MockRig, HDR0, MOCK_BUFFER, MOCK_BUFFER_LEN,
    MOCK_INDIRECT,
};
use crate::counters::FrameDrop;
use crate::tests::testutil::{ether_frame, INDIRECT, NEXT, WRITE};

#[test]
fn frames_a_mock_driver_sends_reach_the_switch_whole_and_return_in_order() {
    for event_idx in [false, true] {
        let mem = guest_memory();
        let mut rig = MockRig::new(&mem, with_event_idx(event_idx));
        let a = ether_frame(1, 2, 60, 1);
        let b = ether_frame(1, 2, 1514, 2);
        let c = ether_frame(1, 2, 3000, 3);
        let ha = rig.txq.send(&HDR0, &a, &[]);
        let hb = rig.txq.send(&HDR0, &b, &[]);
        // The header in its own descriptor, the frame over two more.
        let hc = rig.txq.send(&HDR0, &c, &[12, 1000]);
        assert_eq!(rig.txq.desc(hc).len(), 12);
        // The mock's own indirect chain: two descriptors, each the same 4 KiB buffer.
        let page = [&HDR0[..], &ether_frame(1, 2, MOCK_BUFFER_LEN - 12, 4)].concat();
        mem.write_slice(&page, GuestAddress(MOCK_BUFFER)).unwrap();
        let hd = rig.txq.add_mock_indirect(2);
        let d = [&page[12..], &page[..]].concat();
        assert_eq!((ha, hb, hc, hd), (1, 2, 3, 0), "event_idx {event_idx}");

        let got = rig.receive();
        let frames: Vec<&Vec<u8>> = got.iter().map(|g| &g.0).collect();
        assert_eq!(frames, [&a, &b, &c, &d], "event_idx {event_idx}");
        assert!(got.iter().all(|g| g.1 == OffloadInfo::default()));
        // Every head back, in the order made available, none written to.
        let used = rig.txq.used();
        let heads = [ha, hb, hc, hd].map(|h| (u32::from(h), 0));
        assert_eq!(used, heads, "event_idx {event_idx}");
        let s = rig.stats_from_guest();
        assert_eq!(s.frames, 4);
        assert_eq!(
            s.bytes,
            [&a, &b, &c, &d].iter().map(|f| f.len() as u64).sum::<u64>()
        );
        assert_eq!((s.total_drops(), s.total_faults()), (0, 0));
    }
}

#[test]
fn frames_the_switch_sends_land_in_mock_posted_buffers_behind_a_one_buffer_header() {
    for event_idx in [false, true] {
        let mem = guest_memory();
        let mut rig = MockRig::new(&mem, with_event_idx(event_idx));
        let posted = rig.rxq.post_each(2, 2048);
        // One chain of two buffers, the first bigger than the header.
        let two = rig.rxq.post(&[64, 2000]);
        // An indirect chain of two write-only buffers, its table written with the mock's
        // table accessor (the mock's own indirect chains are read-only).
        let table = rig.rxq.alloc(32);
        let bufs = [rig.rxq.alloc(100), rig.rxq.alloc(1900)];
        let t = DescriptorTable::new(&mem, GuestAddress(table), 2);
        let entries = [(bufs[0], 100, WRITE | NEXT, 1), (bufs[1], 1900, WRITE, 0)];
        for (i, (addr, len, flags, next)) in (0..).zip(entries) {
            let d = SplitDescriptor::new(addr, len, flags, next);
            t.store(i, RawDescriptor::from(d)).unwrap();
        }
        let indirect = rig.rxq.next_desc();
        rig.rxq
            .add_raw(&[SplitDescriptor::new(table, 32, INDIRECT, 0)]);
        assert_ne!(table, MOCK_INDIRECT);

        let frames = [
            ether_frame(2, 1, 60, 1),
            ether_frame(2, 1, 1514, 2),
            ether_frame(2, 1, 1000, 3),
            ether_frame(2, 1, 500, 4),
        ];
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert_eq!(rig.transmit(&refs), 4, "event_idx {event_idx}");
        let used = rig.rxq.used();
        let heads = [posted[0], posted[1], two, indirect];
        let expected: Vec<(u32, u32)> = heads
            .iter()
            .zip(&frames)
            .map(|(h, f)| (u32::from(*h), 12 + u32::try_from(f.len()).unwrap()))
            .collect();
        assert_eq!(used, expected, "event_idx {event_idx}");
        for ((id, len), f) in used.iter().zip(&frames) {
            let got = rig.rxq.read_chain(*id, *len);
            let h = header_of(&got);
            assert_eq!(h.num_buffers(), Some(1));
            assert_eq!((h.flags(), h.gso_type(), h.gso_size()), (0, 0, 0));
            assert_eq!(&got[12..], &f[..], "event_idx {event_idx}");
        }
        let s = rig.stats_to_guest();
        assert_eq!((s.frames, s.total_drops(), s.total_faults()), (4, 0, 0));
        // The guest asked for interrupts (no NO_INTERRUPT flag; used_event 0 is passed).
        assert_eq!(rig.rx_call.read().unwrap(), 1, "event_idx {event_idx}");
    }
}

#[test]
fn a_frame_larger_than_one_mock_buffer_spans_several_with_num_buffers_set() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, features(&[], &[]));
    let posted = rig.rxq.post_each(5, 1024);
    let f = ether_frame(2, 1, 3000, 5);
    assert_eq!(rig.transmit(&[&f]), 1);
    let used = rig.rxq.used();
    let expected: Vec<(u32, u32)> = posted[..3]
        .iter()
        .map(|h| u32::from(*h))
        .zip([1024, 1024, 12 + 3000 - 2048])
        .collect();
    assert_eq!(used, expected);
    let got = rig.rxq.read_used(&used);
    assert_eq!(header_of(&got).num_buffers(), Some(3));
    assert_eq!(&got[12..], &f[..]);
    // The next frame takes the next buffer, alone.
    let small = ether_frame(2, 1, 60, 6);
    assert_eq!(rig.transmit(&[&small]), 1);
    let used = rig.rxq.used();
    assert_eq!(used, vec![(u32::from(posted[3]), 72)]);
    let got = rig.rxq.read_chain(used[0].0, used[0].1);
    assert_eq!(header_of(&got).num_buffers(), Some(1));
    assert_eq!(&got[12..], &small[..]);
    assert_eq!(rig.stats_to_guest().frames, 2);
}

#[test]
fn without_mergeable_buffers_a_frame_too_big_for_a_mock_chain_is_dropped_and_the_chain_reused() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, features(&[], &[VIRTIO_NET_F_MRG_RXBUF]));
    let posted = rig.rxq.post_each(2, 1024);
    let big = ether_frame(2, 1, 3000, 7);
    let small = ether_frame(2, 1, 500, 8);
    // Both taken: the big one dropped, its chain given back for the small one.
    assert_eq!(rig.transmit(&[&big, &small]), 2);
    let used = rig.rxq.used();
    assert_eq!(used, vec![(u32::from(posted[0]), 512)]);
    let got = rig.rxq.read_chain(used[0].0, used[0].1);
    assert_eq!(header_of(&got).num_buffers(), Some(1));
    assert_eq!(&got[12..], &small[..]);
    let s = rig.stats_to_guest();
    assert_eq!(s.dropped(FrameDrop::GuestBufferTooSmall), 1);
    assert_eq!((s.frames, s.total_drops(), s.total_faults()), (1, 1, 0));
    assert_eq!(rig.fault_to_guest(), None);
    // A chain of three buffers is one receive buffer: the big frame fits it whole (after a
    // small frame has taken the 1024-byte chain still first in the ring).
    let three = rig.rxq.post(&[1024, 1024, 1024]);
    assert_eq!(rig.transmit(&[&small, &big]), 2);
    let used = rig.rxq.used();
    assert_eq!(
        used,
        vec![(u32::from(posted[1]), 512), (u32::from(three), 3012)]
    );
    let got = rig.rxq.read_chain(used[1].0, used[1].1);
    assert_eq!(header_of(&got).num_buffers(), Some(1));
    assert_eq!(&got[12..], &big[..]);
    assert_eq!(
        rig.stats_to_guest().dropped(FrameDrop::GuestBufferTooSmall),
        1
    );
}
