use super::*;
use crate::config::VhostPortConfig;
use crate::features::Features;
use crate::tests::testutil::{all_features, ether_frame, readable, Rig};
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_HOST_USO,
};
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::GsoKind;

const HDR0: [u8; 12] = [0; 12];

fn rig() -> (Rig, VhostPortRx, crate::tx::VhostPortTx) {
    let config = VhostPortConfig::default();
    Rig::new(config, all_features(&config), 256)
}

fn receive_all(rx: &mut VhostPortRx, cap: usize) -> Vec<(Vec<u8>, weft_packet::OffloadInfo)> {
    let mut batch = RxBatch::new(cap);
    rx.receive(&mut batch);
    let out = batch
        .descs()
        .iter()
        .map(|d| (rx.frame(d.handle).to_vec(), d.offload))
        .collect();
    rx.finish();
    out
}

#[test]
fn frames_the_guest_sends_come_out_in_order_and_go_back_to_the_used_ring() {
    let (mut rig, mut rx, _tx) = rig();
    let frames: Vec<_> = (0..5u8)
        .map(|i| ether_frame(1, 2, 60 + usize::from(i) * 100, i))
        .collect();
    let heads: Vec<_> = frames.iter().map(|f| rig.txq.send(&HDR0, f, &[])).collect();
    let got = receive_all(&mut rx, 64);
    assert_eq!(got.len(), 5);
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(&g.0, f);
        assert_eq!(g.1, weft_packet::OffloadInfo::default());
    }
    let used: Vec<u32> = rig.txq.take_used().iter().map(|u| u.0).collect();
    assert_eq!(
        used,
        heads.iter().map(|h| u32::from(*h)).collect::<Vec<_>>()
    );
    let s = rig.stats_from_guest();
    assert_eq!(s.frames, 5);
    assert_eq!(s.bytes, frames.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(s.total_drops(), 0);
    // One interrupt for the whole batch.
    assert_eq!(rig.tx_call.read().unwrap(), 1);
}

#[test]
fn contiguous_frames_are_lent_and_scattered_ones_copied() {
    let (mut rig, mut rx, _tx) = rig();
    let a = ether_frame(1, 2, 1000, 1);
    let b = ether_frame(1, 2, 3000, 2);
    rig.txq.send(&HDR0, &a, &[]);
    // Header in its own buffer, the frame in three pieces.
    rig.txq.send(&HDR0, &b, &[12, 500, 1000]);
    let got = receive_all(&mut rx, 64);
    assert_eq!(got[0].0, a);
    assert_eq!(got[1].0, b);
    let s = rig.stats_from_guest();
    assert_eq!((s.lent, s.bounced), (1, 1));
}

#[test]
fn header_in_its_own_buffer_and_frame_in_another_is_still_lent() {
    let (mut rig, mut rx, _tx) = rig();
    let a = ether_frame(1, 2, 1500, 3);
    rig.txq.send(&HDR0, &a, &[12]);
    assert_eq!(receive_all(&mut rx, 64)[0].0, a);
    assert_eq!(rig.stats_from_guest().lent, 1);
}

#[test]
fn header_split_across_buffers_is_reassembled() {
    let (mut rig, mut rx, _tx) = rig();
    let a = ether_frame(1, 2, 100, 3);
    let mut hdr = [0u8; 12];
    hdr[0] = flags::DATA_VALID;
    rig.txq.send(&hdr, &a, &[5, 4, 3]);
    let got = receive_all(&mut rx, 64);
    assert_eq!(got[0].0, a);
    assert!(got[0].1.data_valid);
}

#[test]
fn with_lending_off_every_frame_is_copied() {
    let config = VhostPortConfig {
        lend_guest_memory: false,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 256);
    let a = ether_frame(1, 2, 800, 4);
    rig.txq.send(&HDR0, &a, &[]);
    assert_eq!(receive_all(&mut rx, 64)[0].0, a);
    let s = rig.stats_from_guest();
    assert_eq!((s.lent, s.bounced), (0, 1));
}

#[test]
fn legacy_ten_byte_header_is_understood() {
    let config = VhostPortConfig {
        mergeable_rx_buffers: false,
        ..VhostPortConfig::default()
    };
    let features = Features(all_features(&config).0 & !(1 << VIRTIO_F_VERSION_1));
    assert_eq!(features.header_len(), 10);
    let (mut rig, mut rx, _tx) = Rig::new(config, features, 256);
    let a = ether_frame(1, 2, 64, 5);
    rig.txq.send(&[0u8; 10], &a, &[10]);
    assert_eq!(receive_all(&mut rx, 64)[0].0, a);
}

/// A TCP/IPv4 super-frame header: 54 bytes of headers, MSS 1448.
fn tso4_header() -> [u8; 12] {
    let mut h = weft_packet::VirtioNetHeader::new_unchecked([0u8; 12]);
    h.set_flags(flags::NEEDS_CSUM);
    h.set_gso_type(gso_type::TCPV4);
    h.set_hdr_len(54);
    h.set_gso_size(1448);
    h.set_csum_start(34);
    h.set_csum_offset(16);
    h.into_inner()
}

#[test]
fn tso_super_frame_passes_with_its_offload_state() {
    let (mut rig, mut rx, _tx) = rig();
    let f = ether_frame(1, 2, 54 + 60_000, 6);
    rig.txq.send(&tso4_header(), &f, &[12, 54, 4096, 4096]);
    let got = receive_all(&mut rx, 64);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, f);
    let info = got[0].1;
    assert_eq!(info.gso, GsoKind::TcpV4);
    assert_eq!(
        (
            info.gso_size,
            info.hdr_len,
            info.csum_start,
            info.csum_offset
        ),
        (1448, 54, 34, 16)
    );
    assert!(info.needs_csum);
}

#[test]
fn offloads_the_guest_did_not_negotiate_are_dropped() {
    let config = VhostPortConfig::default();
    // HOST_TSO6 stays: a guest that may ask for no offload at all has its headers ignored
    // (the next test).
    let features = Features(
        all_features(&config).0 & !(1 << VIRTIO_NET_F_HOST_TSO4) & !(1 << VIRTIO_NET_F_CSUM),
    );
    let (mut rig, mut rx, _tx) = Rig::new(config, features, 256);
    rig.txq
        .send(&tso4_header(), &ether_frame(1, 2, 54 + 3000, 6), &[]);
    let mut csum = [0u8; 12];
    csum[0] = flags::NEEDS_CSUM;
    csum[6] = 34;
    csum[8] = 16;
    rig.txq.send(&csum, &ether_frame(1, 2, 100, 6), &[]);
    rig.txq.send(&HDR0, &ether_frame(1, 2, 100, 7), &[]);
    let got = receive_all(&mut rx, 64);
    assert_eq!(got.len(), 1);
    let s = rig.stats_from_guest();
    assert_eq!(
        s.dropped(crate::counters::FrameDrop::OffloadNotNegotiated),
        2
    );
    // Dropped frames' chains still go back to the guest.
    assert_eq!(rig.txq.take_used().len(), 3);
    assert_eq!(rig.fault_from_guest(), None);
}

#[test]
fn a_guest_that_may_ask_for_no_offload_has_its_headers_ignored_on_every_path() {
    let config = VhostPortConfig::default();
    let asking = (1 << VIRTIO_NET_F_CSUM)
        | (1 << VIRTIO_NET_F_HOST_TSO4)
        | (1 << VIRTIO_NET_F_HOST_TSO6)
        | (1 << VIRTIO_NET_F_HOST_USO);
    let features = Features(all_features(&config).0 & !asking);
    assert!(!features.guest_may_ask_offloads());
    let (mut rig, mut rx, _tx) = Rig::new(config, features, 256);
    let mut csum = [0u8; 12];
    csum[0] = flags::NEEDS_CSUM | flags::DATA_VALID;
    csum[6] = 34;
    csum[8] = 16;
    let mut garbage = [0xa5u8; 12];
    garbage[1] = 0x42; // no such gso_type
    let headers = [tso4_header(), csum, garbage, HDR0];
    let mut sent = Vec::new();
    // One buffer each (the group path), then the header in a buffer of its own (the
    // general walk).
    for split in [&[][..], &[12][..]] {
        for (i, h) in headers.iter().enumerate() {
            let f = ether_frame(1, 2, 100 + i, u8::try_from(sent.len()).unwrap());
            rig.txq.send(h, &f, split);
            sent.push(f);
        }
    }
    let got = receive_all(&mut rx, 64);
    assert_eq!(got.len(), sent.len());
    for (g, f) in got.iter().zip(&sent) {
        assert_eq!(&g.0, f);
        assert_eq!(g.1, weft_packet::OffloadInfo::default());
    }
    assert_eq!(rig.stats_from_guest().total_drops(), 0);
    assert_eq!(rig.txq.take_used().len(), sent.len());
    assert_eq!(rig.fault_from_guest(), None);
}

#[test]
fn batch_capacity_bounds_each_receive() {
    let (mut rig, mut rx, _tx) = rig();
    for i in 0..5 {
        rig.txq.send(&HDR0, &ether_frame(1, 2, 60, i), &[]);
    }
    assert_eq!(receive_all(&mut rx, 2).len(), 2);
    assert_eq!(receive_all(&mut rx, 2).len(), 2);
    assert_eq!(receive_all(&mut rx, 2).len(), 1);
    assert_eq!(receive_all(&mut rx, 2).len(), 0);
    assert_eq!(rig.txq.take_used().len(), 5);
}

#[test]
fn a_full_bounce_buffer_leaves_chains_for_the_next_batch() {
    let config = VhostPortConfig {
        lend_guest_memory: false,
        bounce_limit: 0,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 256);
    // The limit is raised to two maximal frames: three 60000-byte frames need two batches.
    for i in 0..3 {
        rig.txq
            .send(&tso4_header(), &ether_frame(1, 2, 60_000, i), &[]);
    }
    assert_eq!(receive_all(&mut rx, 64).len(), 2);
    assert_eq!(receive_all(&mut rx, 64).len(), 1);
    assert_eq!(rig.stats_from_guest().total_drops(), 0);
}

#[test]
fn unknown_handles_give_empty_frames() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq.send(&HDR0, &ether_frame(1, 2, 60, 0), &[]);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
    assert!(rx.frame(FrameHandle(1)).is_empty());
    assert!(rx.frame(FrameHandle(u32::MAX)).is_empty());
    rx.finish();
    assert!(rx.frame(FrameHandle(0)).is_empty());
}

#[test]
fn kicks_are_off_while_busy_and_back_on_when_idle() {
    let config = VhostPortConfig {
        event_idx: false,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 256);
    rig.txq.send(&HDR0, &ether_frame(1, 2, 60, 0), &[]);
    assert_eq!(receive_all(&mut rx, 8).len(), 1);
    assert_eq!(rig.txq.used_flags() & 1, 1, "NO_NOTIFY while busy");
    // A stale kick, then an idle poll: drained, notifications back on.
    rig.tx_kick.write(1).unwrap();
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    assert_eq!(rig.txq.used_flags() & 1, 0);
    assert!(rig.tx_kick.read().is_err(), "kick counter drained");
    assert_eq!(rig.stats_from_guest().kicks_drained, 1);
    // A stale kick while kicks are on is drained too: left there, it would wake an idle
    // worker's epoll at once, for ever.
    rig.tx_kick.write(1).unwrap();
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    assert!(rig.tx_kick.read().is_err(), "kick counter drained");
    assert_eq!(rig.stats_from_guest().kicks_drained, 2);
}

#[test]
fn with_event_idx_the_guest_is_asked_to_kick_at_the_next_index() {
    let (mut rig, mut rx, _tx) = rig();
    assert!(Features(rig.dev.features().0).has(VIRTIO_RING_F_EVENT_IDX));
    for i in 0..3 {
        rig.txq.send(&HDR0, &ether_frame(1, 2, 60, i), &[]);
    }
    assert_eq!(receive_all(&mut rx, 8).len(), 3);
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    assert_eq!(rig.txq.avail_event(), 3);
}

#[test]
fn a_guest_kick_makes_the_readiness_descriptor_readable() {
    let (rig, rx, _tx) = rig();
    let fd = rx.readiness_fd().unwrap();
    let poll = |fd| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut p, 1, 0) }
    };
    assert_eq!(poll(fd), 0);
    rig.tx_kick.write(1).unwrap();
    assert_eq!(poll(fd), 1);
}

#[test]
fn chains_in_flight_when_the_ring_stops_are_given_back_not_completed() {
    let (mut rig, mut rx, _tx) = rig();
    for i in 0..3 {
        rig.txq.send(&HDR0, &ether_frame(1, 2, 60, i), &[]);
    }
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 3);
    let vring = rig.dev.tx_vring();
    let base = vring.lock().stop(&vring.counters);
    assert_eq!(base, 0, "the next start reads the three chains again");
    rx.finish();
    assert!(rig.txq.take_used().is_empty());
    assert_eq!(rig.stats_from_guest().discarded_in_flight, 3);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 0, "a stopped ring is not served");
}

#[test]
fn finishing_while_the_control_thread_holds_the_ring_completes_later() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq.send(&HDR0, &ether_frame(1, 2, 60, 0), &[]);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    {
        let _held = rig.dev.tx_vring().lock();
        rx.finish();
    }
    assert!(rig.txq.take_used().is_empty());
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(rig.txq.take_used().len(), 1);
}

#[test]
fn a_disabled_ring_does_not_keep_the_worker_awake() {
    let (rig, mut rx, _tx) = rig();
    rig.dev.tx_vring().lock().enabled = false;
    rig.tx_kick.write(1).unwrap();
    let fd = rx.readiness_fd().unwrap();
    assert!(readable(fd));
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    assert!(!readable(fd));
}

#[test]
fn a_broken_ring_stops_being_watched() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq.publish(1000);
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    assert!(rig.fault_from_guest().is_some());
    assert_eq!(receive_all(&mut rx, 8).len(), 0);
    let fd = rx.readiness_fd().unwrap();
    rig.tx_kick.write(1).unwrap();
    assert!(!readable(fd), "kicks of a broken ring wake no one");
}

#[test]
fn dropping_the_receive_half_returns_its_chains_to_the_guest() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq.send(&HDR0, &ether_frame(1, 2, 60, 0), &[]);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
    {
        // finish() while the control thread holds the ring leaves the chain pending.
        let _held = rig.dev.tx_vring().lock();
        rx.finish();
    }
    assert!(rig.txq.take_used().is_empty());
    drop(rx);
    assert_eq!(rig.txq.take_used().len(), 1);
}
