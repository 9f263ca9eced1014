//! Many bursts looped from a guest's transmit ring back into its receive ring, as the
//! switch would move them between two guests: every frame arrives whole and in order, and
//! every buffer goes back to the guest. It is also the workload to count the data path's
//! instructions per frame with (`valgrind --tool=callgrind` on this test; see
//! docs/performance-history.md), free of the noise of a second process.

use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::tests::testutil::{all_features, ether_frame, Rig};

const BURST: usize = 64;
const BURSTS: usize = 400;
const HDR0: [u8; 12] = [0; 12];

#[test]
fn bursts_looped_from_transmit_to_receive_ring_arrive_whole_in_order_and_buffers_return() {
    let config = VhostPortConfig::default();
    let (mut rig, mut rx, mut tx) = Rig::new(config, all_features(&config), 256);
    let frames: Vec<Vec<u8>> = (0..BURST)
        .map(|i| ether_frame(1, 2, 60, u8::try_from(i).unwrap()))
        .collect();
    let mut batch = RxBatch::new(BURST);
    for round in 0..BURSTS {
        for f in &frames {
            rig.txq.send(&HDR0, f, &[]);
        }
        let posted = rig.rxq.post_rx(BURST, 2048);
        batch.clear();
        rx.receive(&mut batch);
        assert_eq!(batch.len(), BURST, "round {round}");
        {
            let out: Vec<TxFrame<'_>> = batch
                .descs()
                .iter()
                .map(|d| TxFrame::of(rx.frame(d.handle), d.offload))
                .collect();
            assert_eq!(tx.transmit(&out), BURST, "round {round}");
        }
        rx.finish();
        assert_eq!(rig.txq.take_used().len(), BURST);
        let used = rig.rxq.take_used();
        assert_eq!(used.len(), BURST);
        for ((id, len), (head, f)) in used.iter().zip(posted.iter().zip(&frames)) {
            assert_eq!(*id, u32::from(*head));
            let got = rig.rxq.read_rx(*id, *len);
            assert_eq!(&got[12..], f.as_slice(), "round {round}");
        }
    }
    let s = rig.stats_to_guest();
    assert_eq!(s.frames, (BURST * BURSTS) as u64);
    assert_eq!(s.total_drops(), 0);
}

/// Bursts from one guest's port through a real [`weft_switch::Switch`] into another
/// guest's port, to a destination the switch knows (`known`) or one it floods: the whole
/// data path of the vhost benchmark in one process (the workload callgrind counts the
/// worker's instructions per frame on, with `--toggle-collect` on `Switch::process`).
fn switched_bursts_arrive_whole_and_in_order(known: bool) {
    use weft_switch::{PortOptions, Switch, SwitchConfig, Timestamp};
    let config = VhostPortConfig::default();
    let (mut from, from_rx, from_tx) = Rig::new(config, all_features(&config), 256);
    let (mut to, to_rx, to_tx) = Rig::new(config, all_features(&config), 256);
    let mut switch = Switch::new("loop", SwitchConfig::default()).unwrap();
    let a = switch
        .add_port(
            "a",
            Some(Box::new(from_rx)),
            Box::new(from_tx),
            PortOptions::default(),
        )
        .unwrap();
    let b = switch
        .add_port(
            "b",
            Some(Box::new(to_rx)),
            Box::new(to_tx),
            PortOptions::default(),
        )
        .unwrap();
    let dst = 1;
    if known {
        let mac = weft_packet::MacAddr([2, 0, 0, 0, 0, dst]);
        switch.add_static_mac(0, mac, b).unwrap();
    }
    let frames: Vec<Vec<u8>> = (0..BURST)
        .map(|i| ether_frame(dst, 2, 60, u8::try_from(i).unwrap()))
        .collect();
    for round in 0..BURSTS {
        for f in &frames {
            from.txq.send(&HDR0, f, &[]);
        }
        let posted = to.rxq.post_rx(BURST, 2048);
        let now = Timestamp(u64::try_from(round).unwrap() * 1000);
        assert_eq!(switch.poll(a, now), BURST, "round {round}");
        assert_eq!(from.txq.take_used().len(), BURST);
        let used = to.rxq.take_used();
        assert_eq!(used.len(), BURST, "round {round}");
        for ((id, len), (head, f)) in used.iter().zip(posted.iter().zip(&frames)) {
            assert_eq!(*id, u32::from(*head));
            let got = to.rxq.read_rx(*id, *len);
            assert_eq!(&got[12..], f.as_slice(), "round {round}");
        }
    }
    let counters = switch.port_counters(b).unwrap().snapshot();
    assert_eq!(counters.tx_packets, (BURST * BURSTS) as u64);
    assert_eq!(to.stats_to_guest().total_drops(), 0);
}

#[test]
fn bursts_switched_to_a_known_station_arrive_whole_and_in_order() {
    switched_bursts_arrive_whole_and_in_order(true);
}

#[test]
fn bursts_flooded_to_the_only_other_port_arrive_whole_and_in_order() {
    switched_bursts_arrive_whole_and_in_order(false);
}
