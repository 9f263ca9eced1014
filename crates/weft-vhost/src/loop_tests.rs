//! Many bursts looped from a guest's transmit ring back into its receive ring, as the
//! switch would move them between two guests: every frame arrives whole and in order, and
//! every buffer goes back to the guest. It is also the workload to count the data path's
//! instructions per frame with (`valgrind --tool=callgrind` on this test; see
//! docs/PERFORMANCE-vhost.md), free of the noise of a second process.

use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::testutil::{all_features, ether_frame, Rig};

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
                .map(|d| TxFrame::whole(rx.frame(d.handle), d.offload))
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
