use super::*;
use crate::config::VhostPortConfig;
use crate::counters::FrameDrop;
use crate::features::Features;
use crate::tests::testutil::{all_features, ether_frame, tcp4_frame, tcp4_offload, Rig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_net::{VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_TSO4};
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes, GuestMemoryMmap};
use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::GsoKind;
use weft_packet::{OffloadInfo, VirtioNetHeader};
use weft_switch::{PortRx, RxBatch};

fn rig_with(config: VhostPortConfig, features: Features) -> (Rig, VhostPortTx) {
    let (rig, _rx, tx) = Rig::new(config, features, 256);
    (rig, tx)
}

fn rig() -> (Rig, VhostPortTx) {
    let config = VhostPortConfig::default();
    rig_with(config, all_features(&config))
}

fn whole(f: &[u8]) -> TxFrame<'_> {
    TxFrame::whole(f, OffloadInfo::default())
}

fn header_of(bytes: &[u8]) -> VirtioNetHeader<[u8; 12]> {
    VirtioNetHeader::new_unchecked(bytes[..12].try_into().unwrap())
}

#[test]
fn frames_land_in_guest_buffers_behind_a_header() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(8, 2048);
    let a = ether_frame(2, 1, 60, 1);
    let b = ether_frame(2, 1, 1514, 2);
    assert_eq!(tx.transmit(&[whole(&a), whole(&b)]), 2);
    let used = rig.rxq.take_used();
    assert_eq!(used.len(), 2);
    for ((id, len), f) in used.iter().zip([&a, &b]) {
        assert_eq!(*len as usize, 12 + f.len());
        let got = rig.rxq.read_rx(*id, *len);
        let h = header_of(&got);
        assert_eq!(h.num_buffers(), Some(1));
        assert_eq!(h.flags(), 0);
        assert_eq!(&got[12..], &f[..]);
    }
    let s = rig.stats_to_guest();
    assert_eq!((s.frames, s.bytes), (2, 60 + 1514));
    // One interrupt for the burst.
    assert_eq!(rig.rx_call.read().unwrap(), 1);
    assert_eq!(s.notifications, 1);
}

#[test]
fn a_frame_asking_nothing_gets_only_data_valid_in_its_header_whichever_way_it_goes() {
    // Fields that mean nothing without NEEDS_CSUM or GSO (left over from a sender) are not
    // passed on: the guest gets zeros there, in one buffer (the group) and over mergeable
    // buffers (the general walk) alike.
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(1, 2048);
    rig.rxq.post_rx(4, 1000);
    let info = OffloadInfo {
        data_valid: true,
        csum_start: 34,
        csum_offset: 16,
        gso_size: 1400,
        hdr_len: 54,
        ..OffloadInfo::default()
    };
    let small = ether_frame(2, 1, 100, 5);
    let large = ether_frame(2, 1, 2500, 6);
    let frames = [TxFrame::whole(&small, info), TxFrame::whole(&large, info)];
    assert_eq!(tx.transmit(&frames), 2);
    let used = rig.rxq.take_used();
    assert_eq!(used.len(), 4, "one buffer, then three mergeable ones");
    for (i, (id, len)) in [used[0], used[1]].into_iter().enumerate() {
        let got = rig.rxq.read_rx(id, len);
        let mut want = [0u8; 12];
        want[0] = flags::DATA_VALID;
        want[10] = if i == 0 { 1 } else { 3 };
        assert_eq!(&got[..12], &want, "frame {i}'s header");
    }
}

#[test]
fn rewritten_head_and_body_are_joined_in_guest_memory() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(1, 2048);
    let f = ether_frame(2, 1, 100, 3);
    let head = [9u8; 16];
    let frame = TxFrame::with_head(&head, &f[12..], OffloadInfo::default());
    assert_eq!(tx.transmit(&[frame]), 1);
    let (id, len) = rig.rxq.take_used()[0];
    let got = rig.rxq.read_rx(id, len);
    assert_eq!(&got[12..28], &head);
    assert_eq!(&got[28..], &f[12..]);
}

#[test]
fn a_frame_larger_than_one_buffer_spans_mergeable_buffers() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(8, 1000);
    let f = ether_frame(2, 1, 2500, 4);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    let used = rig.rxq.take_used();
    assert_eq!(used.len(), 3);
    assert_eq!(
        used.iter().map(|u| u.1).collect::<Vec<_>>(),
        vec![1000, 1000, 512]
    );
    let mut got = Vec::new();
    for (id, len) in &used {
        got.extend(rig.rxq.read_rx(*id, *len));
    }
    assert_eq!(header_of(&got).num_buffers(), Some(3));
    assert_eq!(&got[12..], &f[..]);
}

#[test]
fn without_mergeable_buffers_a_frame_must_fit_one_chain() {
    let config = VhostPortConfig {
        mergeable_rx_buffers: false,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut tx) = rig_with(config, all_features(&config));
    rig.rxq.post_rx(2, 1000);
    let big = ether_frame(2, 1, 1500, 5);
    let small = ether_frame(2, 1, 500, 6);
    // The big frame is dropped; its buffer goes to the next frame.
    assert_eq!(tx.transmit(&[whole(&big), whole(&small)]), 2);
    let used = rig.rxq.take_used();
    assert_eq!(used.len(), 1);
    let got = rig.rxq.read_rx(used[0].0, used[0].1);
    assert_eq!(&got[12..], &small[..]);
    assert_eq!(
        rig.stats_to_guest().dropped(FrameDrop::GuestBufferTooSmall),
        1
    );
}

#[test]
fn legacy_guests_get_a_ten_byte_header() {
    let config = VhostPortConfig {
        mergeable_rx_buffers: false,
        ..VhostPortConfig::default()
    };
    let features = Features(all_features(&config).0 & !(1 << VIRTIO_F_VERSION_1));
    let (mut rig, mut tx) = rig_with(config, features);
    rig.rxq.post_rx(1, 2048);
    let f = ether_frame(2, 1, 200, 7);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    let (id, len) = rig.rxq.take_used()[0];
    assert_eq!(len as usize, 10 + f.len());
    assert_eq!(&rig.rxq.read_rx(id, len)[10..], &f[..]);
}

#[test]
fn without_buffers_the_burst_stops_and_reports_what_was_taken() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(2, 2048);
    let f = ether_frame(2, 1, 100, 8);
    assert_eq!(
        tx.transmit(&[whole(&f), whole(&f), whole(&f), whole(&f)]),
        2
    );
    assert_eq!(rig.stats_to_guest().no_buffers, 1);
    assert_eq!(tx.transmit(&[whole(&f)]), 0);
    rig.rxq.post_rx(1, 2048);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
}

#[test]
fn a_frame_that_runs_out_of_buffers_midway_gives_them_back() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(2, 1000);
    let big = ether_frame(2, 1, 2500, 9);
    assert_eq!(tx.transmit(&[whole(&big)]), 0);
    assert!(rig.rxq.take_used().is_empty());
    // The two buffers are still there for a frame that fits.
    let f = ether_frame(2, 1, 1500, 9);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    assert_eq!(rig.rxq.take_used().len(), 2);
}

#[test]
fn tso_frames_reach_the_guest_unsegmented_with_their_header() {
    let (mut rig, mut tx) = rig();
    assert!(tx.caps().tso4 && tx.caps().tso6 && tx.caps().partial_csum);
    rig.rxq.post_rx(64, 4096);
    let f = ether_frame(2, 1, 54 + 30_000, 10);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        gso: GsoKind::TcpV4,
        gso_size: 1448,
        hdr_len: 54,
        ..OffloadInfo::default()
    };
    assert_eq!(tx.transmit(&[TxFrame::whole(&f, info)]), 1);
    let used = rig.rxq.take_used();
    let mut got = Vec::new();
    for (id, len) in &used {
        got.extend(rig.rxq.read_rx(*id, *len));
    }
    let h = header_of(&got);
    assert_eq!(h.flags(), flags::NEEDS_CSUM);
    assert_eq!(h.gso_type(), gso_type::TCPV4);
    assert_eq!(
        (h.gso_size(), h.hdr_len(), h.csum_start(), h.csum_offset()),
        (1448, 54, 34, 16)
    );
    assert_eq!(usize::from(h.num_buffers().unwrap()), used.len());
    assert_eq!(&got[12..], &f[..]);
}

/// The TCP payload of `frame`, after checking its IPv4 and TCP checksums.
fn checked_tcp_payload(frame: &[u8]) -> Vec<u8> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
        panic!("not IPv4")
    };
    let h = ip.header().to_header();
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    let Some(etherparse::TransportSlice::Tcp(tcp)) = p.transport else {
        panic!("not TCP")
    };
    let expected = tcp
        .calc_checksum_ipv4(ip.header().source(), ip.header().destination())
        .unwrap();
    assert_eq!(tcp.checksum(), expected, "TCP checksum");
    tcp.payload().to_vec()
}

#[test]
fn offloads_the_guest_did_not_negotiate_are_done_in_software() {
    let config = VhostPortConfig::default();
    let features = Features(
        all_features(&config).0 & !(1 << VIRTIO_NET_F_GUEST_TSO4) & !(1 << VIRTIO_NET_F_GUEST_CSUM),
    );
    let (mut rig, mut tx) = rig_with(config, features);
    assert!(!tx.caps().tso4 && !tx.caps().partial_csum);
    rig.rxq.post_rx(16, 2048);
    let (csum, csum_info) = (tcp4_frame(300), tcp4_offload(None));
    let (tso, tso_info) = (tcp4_frame(3000), tcp4_offload(Some(1000)));
    let valid = OffloadInfo {
        data_valid: true,
        ..OffloadInfo::default()
    };
    let plain = ether_frame(2, 1, 100, 1);
    let burst = [
        TxFrame::whole(&csum, csum_info),
        TxFrame::whole(&tso, tso_info),
        TxFrame::whole(&plain, valid),
    ];
    assert_eq!(tx.transmit(&burst), 3);
    let frames: Vec<Vec<u8>> = rig
        .rxq
        .take_used()
        .iter()
        .map(|(id, len)| rig.rxq.read_rx(*id, *len))
        .collect();
    assert_eq!(
        frames.len(),
        1 + 3 + 1,
        "the super-frame became three segments"
    );
    for f in &frames {
        // No offload is left for a guest that did not negotiate any; DATA_VALID is
        // meaningless to it and cleared.
        let h = header_of(f);
        assert_eq!((h.flags(), h.gso_type()), (0, 0));
    }
    assert_eq!(checked_tcp_payload(&frames[0][12..]), &csum[54..]);
    let mut joined = Vec::new();
    for f in &frames[1..4] {
        joined.extend(checked_tcp_payload(&f[12..]));
    }
    assert_eq!(joined, &tso[54..]);
    assert_eq!(&frames[4][12..], &plain[..]);
    let s = rig.stats_to_guest();
    assert_eq!(s.software_offloads, 2);
    assert_eq!(s.frames, 5);
    assert_eq!(s.total_drops(), 0);
}

#[test]
fn an_offload_software_cannot_do_is_dropped_and_counted() {
    let config = VhostPortConfig::default();
    let features = Features(all_features(&config).0 & !(1 << VIRTIO_NET_F_GUEST_CSUM));
    let (mut rig, mut tx) = rig_with(config, features);
    rig.rxq.post_rx(4, 2048);
    let f = ether_frame(2, 1, 200, 11);
    // A checksum field past the end of the frame.
    let bad = OffloadInfo {
        needs_csum: true,
        csum_start: 190,
        csum_offset: 16,
        ..OffloadInfo::default()
    };
    assert_eq!(tx.transmit(&[TxFrame::whole(&f, bad)]), 1);
    assert!(rig.rxq.take_used().is_empty());
    assert_eq!(rig.stats_to_guest().dropped(FrameDrop::OffloadFailed), 1);
}

#[test]
fn event_idx_suppresses_interrupts_the_guest_does_not_want() {
    let (mut rig, mut tx) = rig();
    assert!(rig.dev.features().has(VIRTIO_RING_F_EVENT_IDX));
    rig.rxq.post_rx(8, 2048);
    let f = ether_frame(2, 1, 60, 12);
    // The guest wants an interrupt once used index passes 4.
    rig.rxq.set_used_event(4);
    assert_eq!(tx.transmit(&[whole(&f), whole(&f)]), 2);
    assert!(rig.rx_call.read().is_err());
    assert_eq!(tx.transmit(&[whole(&f), whole(&f), whole(&f)]), 3);
    assert_eq!(rig.rx_call.read().unwrap(), 1);
    let s = rig.stats_to_guest();
    assert_eq!((s.notifications, s.notifications_suppressed), (1, 1));
}

#[test]
fn no_interrupt_flag_is_honoured_without_event_idx() {
    let config = VhostPortConfig {
        event_idx: false,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut tx) = rig_with(config, all_features(&config));
    rig.rxq.post_rx(4, 2048);
    let f = ether_frame(2, 1, 60, 13);
    rig.rxq.set_avail_flags(1);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    assert!(rig.rx_call.read().is_err());
    rig.rxq.set_avail_flags(0);
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    assert_eq!(rig.rx_call.read().unwrap(), 1);
}

#[test]
fn runt_frames_are_dropped_not_sent() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(2, 2048);
    assert_eq!(tx.transmit(&[whole(&[1, 2, 3])]), 1);
    assert!(rig.rxq.take_used().is_empty());
    assert_eq!(rig.stats_to_guest().dropped(FrameDrop::FrameTooShort), 1);
}

#[test]
fn a_stopped_or_disabled_ring_takes_nothing() {
    let (mut rig, mut tx) = rig();
    rig.rxq.post_rx(2, 2048);
    let f = ether_frame(2, 1, 60, 14);
    rig.dev.rx_vring().lock().enabled = false;
    assert_eq!(tx.transmit(&[whole(&f)]), 0);
    rig.dev.rx_vring().lock().enabled = true;
    assert_eq!(tx.transmit(&[whole(&f)]), 1);
    let vring = rig.dev.rx_vring();
    vring.lock().stop(&vring.counters);
    assert_eq!(tx.transmit(&[whole(&f)]), 0);
}

#[test]
fn a_guest_polling_the_used_ring_never_sees_a_mergeable_frame_before_all_its_buffers() {
    let (mut rig, mut tx) = rig();
    let (mem, size, desc, used) = (
        rig.rxq.mem.clone(),
        rig.rxq.size,
        rig.rxq.desc,
        rig.rxq.used,
    );
    let used_idx = move |mem: &GuestMemoryMmap| {
        u16::from_le(
            mem.load::<u16>(used.unchecked_add(2), Ordering::Acquire)
                .unwrap(),
        )
    };
    let f = ether_frame(2, 1, 2500, 4);
    // Small buffers: each frame spans 40 of them, so a port publishing buffer by buffer
    // shows a frame's head long before its last buffer.
    for round in 0..100 {
        rig.rxq.post_rx(200, 64);
        let done = Arc::new(AtomicBool::new(false));
        let (stop, mem) = (done.clone(), mem.clone());
        let mut seen = used_idx(&mem);
        // The guest side: whenever the used index moves, every frame it covers must be
        // whole (the head's num_buffers entries all below the index).
        let guest = std::thread::spawn(move || {
            let mut frames = 0u32;
            loop {
                let finished = stop.load(Ordering::Acquire);
                let idx = used_idx(&mem);
                while seen != idx {
                    let slot = used.unchecked_add(4 + 8 * u64::from(seen % size));
                    let id: u32 = u32::from_le(mem.read_obj(slot).unwrap());
                    let d: Descriptor = mem
                        .read_obj(desc.unchecked_add(u64::from(id) * 16))
                        .unwrap();
                    let mut header = [0u8; 12];
                    mem.read_slice(&mut header, d.addr()).unwrap();
                    let buffers = header_of(&header).num_buffers().unwrap();
                    assert!(
                        idx.wrapping_sub(seen) >= buffers,
                        "round {round} frame {frames}: {buffers} buffers, {} visible",
                        idx.wrapping_sub(seen)
                    );
                    seen = seen.wrapping_add(buffers);
                    frames += 1;
                }
                if finished {
                    return frames;
                }
            }
        });
        for _ in 0..5 {
            assert_eq!(tx.transmit(&[whole(&f)]), 1);
        }
        done.store(true, Ordering::Release);
        assert_eq!(guest.join().unwrap(), 5);
        rig.rxq.take_used();
    }
}

#[test]
fn a_receive_buffer_over_the_frame_it_would_take_is_refused_and_counted() {
    let config = VhostPortConfig::default();
    let (mut rig, mut rx, mut tx) = Rig::new(config, all_features(&config), 256);
    let f = ether_frame(2, 1, 1514, 13);
    let head = rig.txq.send(&[0; 12], &f, &[]);
    let d: Descriptor = rig
        .txq
        .mem
        .read_obj(rig.txq.desc.unchecked_add(u64::from(head) * 16))
        .unwrap();
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    let lent = TxFrame::of(rx.frame(batch.descs()[0].handle), batch.descs()[0].offload);
    // One buffer right over the lent frame (the one-buffer path), then a small buffer
    // followed by one over the frame's end (the mergeable walk, refused midway).
    rig.rxq.add_chain(&[(d.addr().0, 2048, true)]);
    assert_eq!(tx.transmit(std::slice::from_ref(&lent)), 1);
    let small = rig.rxq.alloc(256);
    rig.rxq.add_chain(&[(small, 100, true)]);
    rig.rxq.add_chain(&[(d.addr().0 + 1000, 1024, true)]);
    assert_eq!(tx.transmit(std::slice::from_ref(&lent)), 1);
    assert!(
        rig.rxq.take_used().is_empty(),
        "nothing written over the frame"
    );
    let s = rig.stats_to_guest();
    assert_eq!(s.dropped(FrameDrop::BufferOverlapsFrame), 2);
    assert_eq!(s.frames, 0);
    rx.finish();
    assert_eq!(rig.txq.take_used().len(), 1, "the frame's chain goes back");
}

#[test]
fn the_guest_is_never_asked_to_kick_its_receive_queue() {
    // The port never waits for receive buffers: a kick per refill would be a VM exit for
    // nothing.
    for event_idx in [false, true] {
        let config = VhostPortConfig::default();
        let mut features = all_features(&config);
        if !event_idx {
            features = Features(features.0 & !(1 << VIRTIO_RING_F_EVENT_IDX));
        }
        let (mut rig, mut tx) = rig_with(config, features);
        for round in 0..3u8 {
            let old = rig.rxq.avail_idx();
            rig.rxq.post_rx(4, 2048);
            assert!(
                !rig.rxq.must_kick(old, event_idx),
                "event_idx {event_idx}, round {round}"
            );
            let f = ether_frame(2, 1, 60, round);
            assert_eq!(tx.transmit(&[whole(&f), whole(&f)]), 2);
            assert_eq!(rig.rxq.take_used().len(), 2);
        }
    }
}
