//! A port's queue pairs split among the lanes of a switch (`take_lane_halves`): each lane
//! receives from and transmits into its own pairs only, wakes only for their kicks, and a
//! lane whose pairs the guest does not use shares another lane's receive queue safely.

use std::sync::{Arc, Barrier};

use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::rx::VhostPortRx;
use crate::tests::testutil::{all_features, ether_frame, readable, Rig};

const HDR0: [u8; 12] = [0; 12];

fn rig(pairs: u16) -> Rig {
    let config = VhostPortConfig {
        queue_pairs: pairs,
        ..VhostPortConfig::default()
    };
    Rig::new(config, all_features(&config), 256).0
}

/// The source byte (`ether_frame`'s `src`) of each frame one receive gives.
fn sources(rx: &mut VhostPortRx) -> Vec<u8> {
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    let out = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).head[11])
        .collect();
    rx.finish();
    out
}

#[test]
fn each_lane_receives_only_from_its_own_pairs() {
    let mut rig = rig(4);
    let mut lanes = rig.lane_halves(2);
    for k in 0..4u8 {
        rig.txq_of(usize::from(k))
            .send(&HDR0, &ether_frame(1, 10 + k, 64, 0), &[]);
    }
    let mut got0 = sources(&mut lanes[0].0);
    let mut got1 = sources(&mut lanes[1].0);
    got0.sort_unstable();
    got1.sort_unstable();
    assert_eq!(got0, vec![10, 12], "pairs 0 and 2");
    assert_eq!(got1, vec![11, 13], "pairs 1 and 3");
}

#[test]
fn each_lane_wakes_only_for_kicks_on_its_own_pairs() {
    let rig = rig(3);
    let lanes = rig.lane_halves(2);
    let (fd0, fd1) = (
        lanes[0].0.readiness_fd().unwrap(),
        lanes[1].0.readiness_fd().unwrap(),
    );
    rig.more[0].tx_kick.write(1).unwrap(); // pair 1
    assert!(!readable(fd0));
    assert!(readable(fd1));
    rig.more[0].tx_kick.read().unwrap();
    rig.more[1].tx_kick.write(1).unwrap(); // pair 2
    assert!(readable(fd0));
    assert!(!readable(fd1));
}

#[test]
fn each_lane_transmits_into_its_own_pairs() {
    let mut rig = rig(4);
    let mut lanes = rig.lane_halves(2);
    for k in 0..4 {
        rig.rxq_of(k).post_rx(64, 2048);
    }
    let frames: Vec<Vec<u8>> = (0..32u8).map(|i| ether_frame(2, i, 80, i)).collect();
    let burst: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    assert_eq!(lanes[1].1.transmit(&burst), 32);
    assert_eq!(rig.rxq_of(0).take_used().len(), 0);
    assert_eq!(rig.rxq_of(2).take_used().len(), 0);
    let on_own = rig.rxq_of(1).take_used().len() + rig.rxq_of(3).take_used().len();
    assert_eq!(on_own, 32);
}

#[test]
fn a_lane_without_a_pair_in_use_shares_another_lanes_receive_queue() {
    // Two pairs, but the guest gives buffers on pair 0 only (it uses one queue pair).
    let mut rig = rig(2);
    rig.rxq_of(0).post_rx(200, 2048);
    let lanes = rig.lane_halves(2);
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = lanes
        .into_iter()
        .enumerate()
        .map(|(lane, (_rx, mut tx))| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let lane = u8::try_from(lane).unwrap();
                barrier.wait();
                let mut sent = 0;
                for round in 0..6u8 {
                    let frames: Vec<Vec<u8>> = (0..16u8)
                        .map(|i| ether_frame(2, lane, 100, round * 16 + i))
                        .collect();
                    let burst: Vec<TxFrame<'_>> = frames
                        .iter()
                        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
                        .collect();
                    sent += tx.transmit(&burst);
                }
                sent
            })
        })
        .collect();
    let sent: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(sent, vec![96, 96], "no burst lost to the other lane's lock");
    // Every frame is in pair 0's receive queue, whole, each lane's in its own order.
    let used = rig.rxq_of(0).take_used();
    assert_eq!(used.len(), 192);
    let mut next = [0u8; 2];
    for (id, len) in used {
        let bytes = rig.rxq_of(0).read_rx(id, len);
        let frame = &bytes[12..];
        let lane = usize::from(frame[11]);
        assert_eq!(frame, &ether_frame(2, frame[11], 100, next[lane])[..]);
        next[lane] += 1;
    }
    assert_eq!(next, [96, 96]);
    assert_eq!(rig.pair_stats(0).0.frames, 192);
}

#[test]
fn a_port_with_fewer_pairs_than_lanes_is_served_by_the_first_lane_and_filled_by_all() {
    let mut rig = rig(1);
    rig.rxq_of(0).post_rx(64, 2048);
    let mut lanes = rig.lane_halves(2);
    rig.txq_of(0).send(&HDR0, &ether_frame(1, 10, 64, 0), &[]);
    assert_eq!(
        sources(&mut lanes[1].0),
        Vec::<u8>::new(),
        "lane 1 has no queue"
    );
    assert_eq!(sources(&mut lanes[0].0), vec![10]);
    let frame = ether_frame(2, 1, 80, 0);
    let burst = [TxFrame::whole(&frame, OffloadInfo::default())];
    assert_eq!(lanes[1].1.transmit(&burst), 1, "into pair 0, shared");
    assert_eq!(lanes[0].1.transmit(&burst), 1);
    assert_eq!(rig.rxq_of(0).take_used().len(), 2);
    assert!(!lanes[1].0.needs_polling());
}

#[test]
fn a_broken_queue_on_one_lane_leaves_the_other_lane_serving() {
    let mut rig = rig(2);
    let mut lanes = rig.lane_halves(2);
    rig.txq_of(1).set_avail_idx(1000); // pair 1: an index beyond the ring
    rig.txq_of(0).send(&HDR0, &ether_frame(1, 10, 64, 0), &[]);
    assert_eq!(sources(&mut lanes[1].0), Vec::<u8>::new());
    assert_eq!(
        rig.dev.tx_vring_of(1).unwrap().lock().fault,
        Some(crate::counters::QueueFault::AvailIndexOutOfRange)
    );
    assert_eq!(sources(&mut lanes[0].0), vec![10]);
    assert_eq!(rig.dev.tx_vring_of(0).unwrap().lock().fault, None);
    // The broken pair's lane still transmits: into its own receive queue while the guest
    // fills it, and the other lane's pair 0 is untouched by the fault.
    rig.rxq_of(1).post_rx(8, 2048);
    let frame = ether_frame(2, 1, 80, 0);
    let burst = [TxFrame::whole(&frame, OffloadInfo::default())];
    assert_eq!(lanes[1].1.transmit(&burst), 1);
    assert_eq!(rig.rxq_of(1).take_used().len(), 1);
}
