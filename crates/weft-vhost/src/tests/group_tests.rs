//! Both halves take the common chains a group at a time (`rx/plain_group.rs`,
//! `tx/plain_group.rs`) and hand every other chain to the general walk. These properties
//! mix every kind of chain in one burst, so that groups end at each kind and at every
//! place, and check that each frame is still judged alone: in order, whole, with its own
//! offload state or drop reason, and every chain back in the used ring.

use proptest::prelude::*;
use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes};
use weft_packet::virtio_net::flags;
use weft_packet::{OffloadInfo, VirtioNetHeaderError};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::counters::FrameDrop;
use crate::tests::testutil::{all_features, ether_frame, net_header, GuestRing, Rig};

/// A chain the guest transmits, by kind.
#[derive(Debug, Clone)]
enum TxChain {
    /// Header and frame in one buffer, the header asking for nothing.
    Plain(usize),
    /// The same bytes over several buffers.
    Split(usize),
    /// One buffer, the header asking for a checksum (negotiated).
    Checksum(usize),
    /// One buffer, the header carrying a flag virtio does not define.
    BadHeader(usize),
    /// One buffer, too short for an Ethernet header.
    Short,
}

fn tx_chain() -> impl Strategy<Value = TxChain> {
    prop_oneof![
        6 => (60usize..1600).prop_map(TxChain::Plain),
        1 => (60usize..1600).prop_map(TxChain::Split),
        1 => (60usize..1600).prop_map(TxChain::Checksum),
        1 => (60usize..1600).prop_map(TxChain::BadHeader),
        1 => Just(TxChain::Short),
    ]
}

/// What the switch should get from `chain` (`Err`: dropped, and why).
fn send(ring: &mut GuestRing, chain: &TxChain, seed: u8) -> Result<(Vec<u8>, bool), FrameDrop> {
    let plain = [0u8; 12];
    match *chain {
        TxChain::Plain(len) => {
            let f = ether_frame(1, 2, len, seed);
            ring.send(&plain, &f, &[]);
            Ok((f, false))
        }
        TxChain::Split(len) => {
            let f = ether_frame(1, 2, len, seed);
            ring.send(&plain, &f, &[12, 30]);
            Ok((f, false))
        }
        TxChain::Checksum(len) => {
            let f = ether_frame(1, 2, len, seed);
            ring.send(&net_header(flags::NEEDS_CSUM, 0, 0, 0, 14, 6), &f, &[]);
            Ok((f, true))
        }
        TxChain::BadHeader(len) => {
            let f = ether_frame(1, 2, len, seed);
            ring.send(&net_header(0x40, 0, 0, 0, 0, 0), &f, &[]);
            Err(FrameDrop::BadHeader(VirtioNetHeaderError::UnknownFlags(
                0x40,
            )))
        }
        TxChain::Short => {
            ring.send(&plain, &[7u8; 10], &[]);
            Err(FrameDrop::FrameTooShort)
        }
    }
}

/// A receive chain the guest posts, by kind.
#[derive(Debug, Clone, Copy)]
enum RxChain {
    /// One write-only buffer of this many bytes.
    Single(u32),
    /// Two write-only buffers of 700 bytes, chained.
    Pair,
}

fn rx_chain() -> impl Strategy<Value = RxChain> {
    prop_oneof![
        6 => prop_oneof![Just(100u32), Just(800), Just(2048)].prop_map(RxChain::Single),
        1 => Just(RxChain::Pair),
    ]
}

/// The bytes the device wrote into the chain with head `id`, `len` of them, following NEXT.
fn read_chain(ring: &GuestRing, id: u32, len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut index = u64::from(id);
    loop {
        let d: Descriptor = ring
            .mem
            .read_obj(ring.desc.unchecked_add(index * 16))
            .unwrap();
        let want = (len as usize - out.len()).min(d.len() as usize);
        let mut part = vec![0u8; want];
        ring.mem.read_slice(&mut part, d.addr()).unwrap();
        out.extend(part);
        if out.len() == len as usize || !d.has_next() {
            return out;
        }
        index = u64::from(d.next());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_burst_of_mixed_transmit_chains_reaches_the_switch_frame_by_frame(
        chains in prop::collection::vec(tx_chain(), 1..90),
        batch_size in 1usize..70,
    ) {
        let config = VhostPortConfig::default();
        let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 256);
        let mut expected = Vec::new();
        let mut drops = Vec::new();
        for (i, chain) in chains.iter().enumerate() {
            let seed = u8::try_from(i % 251).unwrap();
            let before = rig.txq.avail_idx();
            match send(&mut rig.txq, chain, seed) {
                Ok(frame) => expected.push(frame),
                Err(reason) => drops.push(reason),
            }
            prop_assert_eq!(rig.txq.avail_idx(), before.wrapping_add(1));
        }
        let mut got = Vec::new();
        for _ in 0..=chains.len() {
            let mut batch = RxBatch::new(batch_size);
            rx.receive(&mut batch);
            for d in batch.descs() {
                got.push((rx.frame(d.handle).to_vec(), d.offload));
            }
            rx.finish();
        }
        prop_assert_eq!(got.len(), expected.len());
        for ((frame, offload), (want, csum)) in got.iter().zip(&expected) {
            prop_assert_eq!(frame, want);
            prop_assert_eq!(offload.needs_csum, *csum);
            if !csum {
                prop_assert_eq!(*offload, OffloadInfo::default());
            }
        }
        // Every chain back, in the order sent.
        let used = rig.txq.take_used();
        prop_assert_eq!(used.len(), chains.len());
        let stats = rig.stats_from_guest();
        prop_assert_eq!(stats.frames, expected.len() as u64);
        prop_assert_eq!(stats.total_drops(), drops.len() as u64);
        for reason in &drops {
            let count = drops.iter().filter(|r| *r == reason).count() as u64;
            prop_assert_eq!(rig.dev.tx_vring_of(0).unwrap().counters.snapshot().dropped(*reason), count);
        }
        prop_assert_eq!(rig.fault_from_guest(), None);
    }

    #[test]
    fn frames_put_into_mixed_receive_chains_arrive_whole_and_in_order(
        lens in prop::collection::vec(60usize..3000, 1..80),
        posted in prop::collection::vec(rx_chain(), 0..90),
    ) {
        let config = VhostPortConfig::default();
        let (mut rig, _rx, mut tx) = Rig::new(config, all_features(&config), 256);
        for chain in &posted {
            match *chain {
                RxChain::Single(len) => {
                    rig.rxq.post_rx(1, len);
                }
                RxChain::Pair => {
                    let a = rig.rxq.alloc(700);
                    let b = rig.rxq.alloc(700);
                    rig.rxq.add_chain(&[(a, 700, true), (b, 700, true)]);
                }
            }
        }
        let frames: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, len)| ether_frame(2, 1, *len, u8::try_from(i % 251).unwrap()))
            .collect();
        let tx_frames: Vec<TxFrame<'_>> = frames
            .iter()
            .map(|f| TxFrame::whole(f, OffloadInfo::default()))
            .collect();
        let accepted = tx.transmit(&tx_frames);
        // Frames come back in order, each over `num_buffers` chains.
        let used = rig.rxq.take_used();
        let mut at = 0;
        let mut delivered = 0;
        while at < used.len() {
            let (id, len) = used[at];
            let first = read_chain(&rig.rxq, id, len);
            let buffers = usize::from(u16::from_le_bytes([first[10], first[11]]));
            prop_assert!(buffers >= 1 && at + buffers <= used.len());
            let mut bytes = first[12..].to_vec();
            for (id, len) in &used[at + 1..at + buffers] {
                bytes.extend(read_chain(&rig.rxq, *id, *len));
            }
            prop_assert_eq!(&bytes, &frames[delivered]);
            prop_assert_eq!(first[0], 0, "flags");
            delivered += 1;
            at += buffers;
        }
        // Every frame accepted went in (none of these can be dropped), and the burst
        // stopped only when the guest's buffers ran out.
        prop_assert_eq!(delivered, accepted);
        let stats = rig.stats_to_guest();
        prop_assert_eq!(stats.frames, accepted as u64);
        prop_assert_eq!(stats.total_drops(), 0);
        prop_assert_eq!(rig.fault_to_guest(), None);
        if accepted < frames.len() {
            prop_assert_eq!(stats.no_buffers, 1);
        }
    }
}
