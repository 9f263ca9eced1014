//! Several queue pairs (`VIRTIO_NET_F_MQ`) against the test driver: every transmit queue
//! is received from, fairly; flows keep their receive queue; disabled and broken queues
//! stop only themselves.

use std::collections::{HashMap, HashSet};

use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::counters::QueueFault;
use crate::rx::VhostPortRx;
use crate::tests::testutil::{all_features, ether_frame, readable, Rig};
use crate::tx::VhostPortTx;

const HDR0: [u8; 12] = [0; 12];

fn rig(pairs: u16) -> (Rig, VhostPortRx, VhostPortTx) {
    let config = VhostPortConfig {
        queue_pairs: pairs,
        ..VhostPortConfig::default()
    };
    Rig::new(config, all_features(&config), 256)
}

/// Frames of one receive, each with the byte that says which queue sent it.
fn receive(rx: &mut VhostPortRx, cap: usize) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::new(cap);
    rx.receive(&mut batch);
    let out = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).to_vec())
        .collect();
    rx.finish();
    out
}

/// A UDP/IPv4 frame of flow `flow` (its source port), `seq` in the payload.
fn udp_frame(flow: u16, seq: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 8];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&(5000 + flow).to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[42] = seq;
    f
}

#[test]
fn frames_from_every_transmit_queue_are_received_and_returned_to_their_queue() {
    let (mut rig, mut rx, _tx) = rig(4);
    for k in 0..4u8 {
        for i in 0..3 {
            rig.txq_of(usize::from(k))
                .send(&HDR0, &ether_frame(1, 10 + k, 100, i), &[]);
        }
    }
    let got = receive(&mut rx, 64);
    assert_eq!(got.len(), 12);
    for k in 0..4u8 {
        assert_eq!(got.iter().filter(|f| f[11] == 10 + k).count(), 3);
        // Per queue, in order.
        let seeds: Vec<u8> = got
            .iter()
            .filter(|f| f[11] == 10 + k)
            .map(|f| f[14])
            .collect();
        assert_eq!(seeds, vec![0, 1, 2]);
        assert_eq!(rig.txq_of(usize::from(k)).take_used().len(), 3);
        assert_eq!(rig.pair_stats(usize::from(k)).1.frames, 3);
    }
}

#[test]
fn a_busy_queue_does_not_starve_the_others_within_a_batch() {
    let (mut rig, mut rx, _tx) = rig(2);
    for i in 0..100u8 {
        rig.txq_of(0).send(&HDR0, &ether_frame(1, 10, 64, i), &[]);
    }
    for i in 0..4u8 {
        rig.txq_of(1).send(&HDR0, &ether_frame(1, 11, 64, i), &[]);
    }
    // Whichever queue goes first, the other one gets its share of a 16-frame batch.
    let got = receive(&mut rx, 16);
    assert_eq!(got.len(), 16);
    assert_eq!(got.iter().filter(|f| f[11] == 11).count(), 4);
    // Next batches: queue 1 is empty, so queue 0 gets all the room.
    let got = receive(&mut rx, 16);
    assert_eq!(got.len(), 16);
    assert!(got.iter().all(|f| f[11] == 10));
    // Two busy queues split a batch evenly.
    for i in 0..20u8 {
        rig.txq_of(1).send(&HDR0, &ether_frame(1, 11, 64, i), &[]);
    }
    let got = receive(&mut rx, 16);
    assert_eq!(got.iter().filter(|f| f[11] == 10).count(), 8);
    assert_eq!(got.iter().filter(|f| f[11] == 11).count(), 8);
}

#[test]
fn a_broken_transmit_queue_stops_only_itself() {
    let (mut rig, mut rx, _tx) = rig(2);
    rig.txq_of(0).set_avail_idx(1000);
    rig.txq_of(1).send(&HDR0, &ether_frame(1, 11, 64, 1), &[]);
    let got = receive(&mut rx, 64);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][11], 11);
    assert_eq!(
        rig.dev.tx_vring_of(0).unwrap().lock().fault,
        Some(QueueFault::AvailIndexOutOfRange)
    );
    assert_eq!(rig.dev.tx_vring_of(1).unwrap().lock().fault, None);
    for i in 0..5u8 {
        rig.txq_of(1).send(&HDR0, &ether_frame(1, 11, 64, i), &[]);
    }
    assert_eq!(receive(&mut rx, 64).len(), 5);
    assert_eq!(rig.txq_of(1).take_used().len(), 6);
}

#[test]
fn the_readiness_descriptor_wakes_for_kicks_on_any_transmit_queue() {
    let (rig, rx, _tx) = rig(3);
    let fd = rx.readiness_fd().unwrap();
    let ready = || readable(fd);
    assert!(!ready());
    rig.more[1].tx_kick.write(1).unwrap();
    assert!(ready());
    rig.more[1].tx_kick.read().unwrap();
    assert!(!ready());
    rig.more[0].tx_kick.write(1).unwrap();
    assert!(ready());
}

/// Transmits `frames` flows × `rounds` frames (round after round) into 2 pairs; returns
/// for each flow the queues its frames went to, in order of sequence numbers seen.
fn spread(
    rig: &mut Rig,
    tx: &mut VhostPortTx,
    flows: u16,
    rounds: u8,
) -> HashMap<u16, Vec<(usize, u8)>> {
    let pairs = rig.more.len() + 1;
    for k in 0..pairs {
        rig.rxq_of(k).post_rx(200, 2048);
    }
    let frames: Vec<Vec<u8>> = (0..rounds)
        .flat_map(|seq| (0..flows).map(move |flow| udp_frame(flow, seq)))
        .collect();
    let tx_frames: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    assert_eq!(tx.transmit(&tx_frames), frames.len());
    let mut seen: HashMap<u16, Vec<(usize, u8)>> = HashMap::new();
    for k in 0..pairs {
        for (id, len) in rig.rxq_of(k).take_used() {
            let bytes = rig.rxq_of(k).read_rx(id, len);
            let frame = &bytes[12..];
            let flow = u16::from_be_bytes([frame[34], frame[35]]) - 5000;
            seen.entry(flow).or_default().push((k, frame[42]));
        }
    }
    seen
}

#[test]
fn a_flow_keeps_its_receive_queue_and_its_order() {
    let (mut rig, _rx, mut tx) = rig(2);
    let seen = spread(&mut rig, &mut tx, 16, 4);
    assert_eq!(seen.len(), 16);
    let mut queues_used = HashSet::new();
    for (flow, frames) in &seen {
        let queues: HashSet<usize> = frames.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            queues.len(),
            1,
            "flow {flow} went to several queues: {frames:?}"
        );
        let seqs: Vec<u8> = frames.iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3], "flow {flow} out of order");
        queues_used.extend(queues);
    }
    assert_eq!(queues_used.len(), 2, "16 flows should use both queues");
    let (a, b) = (rig.pair_stats(0).0.frames, rig.pair_stats(1).0.frames);
    assert_eq!(a + b, 64);
}

#[test]
fn a_disabled_receive_queue_is_not_used() {
    let (mut rig, _rx, mut tx) = rig(2);
    rig.dev.rx_vring_of(1).unwrap().lock().enabled = false;
    let seen = spread(&mut rig, &mut tx, 16, 2);
    assert!(seen.values().flatten().all(|(k, _)| *k == 0));
    assert_eq!(rig.pair_stats(0).0.frames, 32);
    assert_eq!(rig.pair_stats(1).0.frames, 0);
}

#[test]
fn a_broken_receive_queue_leaves_the_others_working() {
    let (mut rig, _rx, mut tx) = rig(2);
    rig.dev.rx_vring_of(0).unwrap().lock().fault = Some(QueueFault::RingInaccessible);
    let seen = spread(&mut rig, &mut tx, 8, 2);
    assert!(seen.values().flatten().all(|(k, _)| *k == 1));
    assert_eq!(rig.pair_stats(1).0.frames, 16);
}

#[test]
fn a_receive_queue_the_guest_never_filled_is_not_used_until_it_is() {
    let (mut rig, _rx, mut tx) = rig(2);
    rig.rxq_of(0).post_rx(100, 2048);
    let frames: Vec<Vec<u8>> = (0..16u16).map(|flow| udp_frame(flow, 0)).collect();
    let tx_frames: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    // A guest using one pair of two: every flow goes to pair 0, none is refused.
    assert_eq!(tx.transmit(&tx_frames), 16);
    assert_eq!(rig.rxq_of(0).take_used().len(), 16);
    assert_eq!(rig.pair_stats(1).0.no_buffers, 0);
    // Once the guest fills pair 1, some flows move there.
    rig.rxq_of(1).post_rx(100, 2048);
    assert_eq!(tx.transmit(&tx_frames), 16);
    let (on0, on1) = (
        rig.rxq_of(0).take_used().len(),
        rig.rxq_of(1).take_used().len(),
    );
    assert_eq!(on0 + on1, 16);
    assert!(on1 > 0 && on0 > 0, "{on0} {on1}");
}
