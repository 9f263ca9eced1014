//! Random descriptor tables and available rings, through both halves: nothing panics or
//! hangs, every chain the port returns is accounted for (a frame or a counted drop), used
//! entries name real descriptors, and a faulted queue stays quiet until restarted.

use proptest::prelude::*;
use vm_memory::{Bytes, GuestAddress};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::{VhostPortConfig, MAX_FRAME_LEN};
use crate::tests::testutil::{all_features, ether_frame, GuestRing, Rig, GUEST_MEM, NEXT, WRITE};

/// Where the test guest keeps well-formed frames: 128-byte slots, each a zero virtio-net
/// header followed by a frame.
const SLOTS: u64 = 0x60_0000;
const SLOT: u64 = 128;

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        12 => (0..512u64).prop_map(|k| SLOTS + k * SLOT),
        2 => 0..0x7f_0000u64,
        1 => (0..256u64).prop_map(|k| GUEST_MEM - k),
        1 => (0..0x1000u64).prop_map(|k| GUEST_MEM + k),
        1 => (0..64u64).prop_map(|k| u64::MAX - k),
        1 => Just(0u64),
    ]
}

fn len() -> impl Strategy<Value = u32> {
    prop_oneof![
        9 => Just(72u32),
        6 => Just(128u32),
        1 => Just(0u32),
        1 => Just(12u32),
        2 => 1..4096u32,
        1 => 60_000..80_000u32,
        1 => Just(u32::MAX),
        1 => (1..64u32).prop_map(|n| n * 16),
    ]
}

/// One descriptor: address, length, flags, and either the next slot (`None`, the usual
/// chain) or an arbitrary `next`; `odd` flips its direction on the receive ring.
#[derive(Debug, Clone, Copy)]
struct RandomDesc {
    addr: u64,
    len: u32,
    flags: u16,
    next: Option<u16>,
    odd: bool,
}

prop_compose! {
    fn desc()(
        addr in addr(),
        len in len(),
        flags in prop_oneof![6 => Just(0u16), 3 => Just(NEXT), 1 => 0u16..8],
        next in proptest::option::weighted(0.15, 0u16..80),
        odd in proptest::bool::weighted(0.05),
    ) -> RandomDesc {
        RandomDesc { addr, len, flags, next, odd }
    }
}

/// A head index: usually inside the ring, now and then anything.
fn head() -> impl Strategy<Value = (u16, bool)> {
    (0u16..80, proptest::bool::weighted(0.05))
}

fn fill_slots(ring: &GuestRing) {
    for k in 0..512u64 {
        let mut bytes = vec![0u8; 12];
        let seed = u8::try_from(k % 256).unwrap();
        bytes.extend(ether_frame(1, 2, usize::try_from(SLOT).unwrap() - 12, seed));
        ring.mem
            .write_slice(&bytes, GuestAddress(SLOTS + k * SLOT))
            .unwrap();
    }
}

fn write_table(ring: &GuestRing, descs: &[RandomDesc], receive: bool) {
    for (i, d) in descs.iter().enumerate().take(usize::from(ring.size)) {
        let i = u16::try_from(i).unwrap();
        let next = d.next.unwrap_or((i + 1) % ring.size);
        let mut flags = d.flags & !WRITE;
        let mut addr = d.addr;
        if receive {
            // Writable unless odd; buffers kept off the rings themselves (a guest that
            // overwrites its own used ring only hurts itself, but would confuse this
            // test's driver).
            if !d.odd {
                flags |= WRITE;
            }
            if addr < 0x10_0000 {
                addr += 0x10_0000;
            }
        } else if d.odd {
            flags |= WRITE;
        }
        ring.set_desc(i, addr, d.len, flags, next);
    }
}

fn publish(ring: &mut GuestRing, heads: &[(u16, bool)], count: usize) {
    for (h, wild) in heads.iter().take(count) {
        ring.publish(if *wild { *h } else { *h % ring.size });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn random_rings_never_panic_and_every_returned_chain_is_accounted_for(
        size_log in 1u32..=6,
        descs in proptest::collection::vec(desc(), 64),
        heads in proptest::collection::vec(head(), 0..48),
        jump in proptest::option::weighted(0.1, any::<u16>()),
        lend in any::<bool>(),
        frames in proptest::collection::vec(14usize..3000, 0..24),
    ) {
        let size = 1u16 << size_log;
        let config = VhostPortConfig { lend_guest_memory: lend, ..VhostPortConfig::default() };
        let (mut rig, mut rx, mut tx) = Rig::new(config, all_features(&config), size);
        fill_slots(&rig.txq);

        // The port's receive half over the random transmit ring.
        write_table(&rig.txq, &descs, false);
        let published = heads.len().min(usize::from(size));
        publish(&mut rig.txq, &heads, published);
        if let Some(j) = jump {
            rig.txq.set_avail_idx(j);
        }
        let mut handed_out = 0u64;
        for _ in 0..4 {
            let mut batch = RxBatch::new(16);
            rx.receive(&mut batch);
            for d in batch.descs() {
                let f = rx.frame(d.handle);
                prop_assert!(f.len() >= 14 && f.len() <= MAX_FRAME_LEN);
            }
            handed_out += batch.len() as u64;
            rx.finish();
        }
        let used = rig.txq.take_used();
        let stats = rig.stats_from_guest();
        prop_assert!(used.iter().all(|(id, _)| *id < u32::from(size)));
        prop_assert!(used.len() <= published.max(usize::from(size)));
        prop_assert_eq!(stats.frames, handed_out);
        prop_assert_eq!(used.len() as u64, stats.frames + stats.total_drops());
        if rig.fault_from_guest().is_some() {
            prop_assert_eq!(stats.total_faults(), 1);
            let mut batch = RxBatch::new(16);
            rx.receive(&mut batch);
            prop_assert_eq!(batch.len(), 0);
            rx.finish();
        }

        // The port's transmit half over the same random table as a receive ring.
        write_table(&rig.rxq, &descs, true);
        publish(&mut rig.rxq, &heads, published);
        if let Some(j) = jump {
            rig.rxq.set_avail_idx(j);
        }
        let bufs: Vec<Vec<u8>> = frames.iter().map(|n| ether_frame(2, 1, *n, 7)).collect();
        let burst: Vec<TxFrame<'_>> =
            bufs.iter().map(|b| TxFrame::whole(b, OffloadInfo::default())).collect();
        let accepted = tx.transmit(&burst);
        prop_assert!(accepted <= burst.len());
        let used = rig.rxq.take_used();
        prop_assert!(used.iter().all(|(id, _)| *id < u32::from(size)));
        let stats = rig.stats_to_guest();
        prop_assert!(stats.frames <= accepted as u64);
        prop_assert!(stats.frames <= used.len() as u64);
    }
}
