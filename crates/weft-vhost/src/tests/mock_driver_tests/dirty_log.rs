//! Dirty page logging (a live migration) against mock-driven rings: random traffic both
//! ways while the rings log, guest memory compared before and after — every byte the port
//! changed lies in a page it marked, it marked none of the guest's transmit buffers (it only
//! reads those), and once logging is off it marks nothing.
//!
//! One exception, by design: a frame that turns out not to fit the chains it was being
//! written into (too small without mergeable buffers) gives them back unused, with bytes
//! of it in them. Those are not marked: a buffer the device did not use is not the driver's
//! to read (virtio 1.x §2.7.13), and the next frame written into it on either host
//! overwrites them. Every byte of every chain returned used is marked.

use std::sync::Arc;

use proptest::prelude::*;
use virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MRG_RXBUF;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::{features, guest_memory, MockRig, HDR0, INDIRECT_MEM, LOW_MEM, MOCK_INDIRECT};
use super::{DATA_LEN, RXQ_DATA, TXQ_DATA};
use crate::memory::{marked_pages, DirtyLog, LOG_PAGE};
use crate::tests::testutil::ether_frame;
use crate::vring::{RX_QUEUE, TX_QUEUE};

/// Bytes of log: one bit per page up to the end of the second region.
const LOG_LEN: usize = 32 << 10;

/// Both regions of guest memory, as (address, bytes).
fn snapshot(mem: &GuestMemoryMmap) -> Vec<(u64, Vec<u8>)> {
    [(0, LOW_MEM), (MOCK_INDIRECT, INDIRECT_MEM)]
        .into_iter()
        .map(|(at, len)| {
            let mut bytes = vec![0u8; usize::try_from(len).unwrap()];
            mem.read_slice(&mut bytes, GuestAddress(at)).unwrap();
            (at, bytes)
        })
        .collect()
}

/// Pages whose bytes differ between two snapshots.
fn changed_pages(before: &[(u64, Vec<u8>)], after: &[(u64, Vec<u8>)]) -> Vec<u64> {
    let page_len = usize::try_from(LOG_PAGE).unwrap();
    let mut pages = Vec::new();
    for ((at, a), (_, b)) in before.iter().zip(after) {
        let pairs = a.chunks(page_len).zip(b.chunks(page_len));
        for (i, (x, y)) in pairs.enumerate() {
            if x != y {
                pages.push(at / LOG_PAGE + i as u64);
            }
        }
    }
    pages
}

/// Pages whose bit is set in the log.
fn logged_pages(log: &GuestMemoryMmap) -> Vec<u64> {
    let mut bytes = vec![0u8; LOG_LEN];
    log.read_slice(&mut bytes, GuestAddress(0)).unwrap();
    marked_pages(&bytes)
}

fn clear(log: &GuestMemoryMmap) {
    log.write_slice(&vec![0u8; LOG_LEN], GuestAddress(0))
        .unwrap();
}

/// What one round did: the pages the port changed, and those holding bytes of the chains it
/// returned used.
struct Round {
    changed: Vec<u64>,
    used: Vec<u64>,
}

/// The pages of the first `len` bytes of the receive chain at `head`.
fn chain_pages(rig: &MockRig<'_>, head: u32, len: u32, pages: &mut Vec<u64>) {
    let mut left = u64::from(len);
    let mut d = rig.rxq.desc(u16::try_from(head).unwrap());
    while left > 0 {
        let n = left.min(u64::from(d.len()));
        if n > 0 {
            pages.extend(d.addr().0 / LOG_PAGE..=(d.addr().0 + n - 1) / LOG_PAGE);
        }
        left -= n;
        if !d.has_next() {
            break;
        }
        d = rig.rxq.desc(d.next());
    }
}

/// One round of traffic: the guest posts receive chains of `chains` (buffer lengths) and
/// sends `sent`; the port receives and transmits `to_guest`.
fn round(
    rig: &mut MockRig<'_>,
    mem: &GuestMemoryMmap,
    chains: &[Vec<u32>],
    sent: &[usize],
    to_guest: &[usize],
    seed: u8,
) -> Round {
    for lens in chains {
        rig.rxq.post(lens);
    }
    for (i, len) in sent.iter().enumerate() {
        rig.txq.send(
            &HDR0,
            &ether_frame(1, 2, *len, seed ^ u8::try_from(i).unwrap()),
            &[],
        );
    }
    let frames: Vec<Vec<u8>> = to_guest
        .iter()
        .enumerate()
        .map(|(i, len)| ether_frame(2, 1, *len, seed.wrapping_add(u8::try_from(i).unwrap())))
        .collect();
    let before = snapshot(mem);
    let got = rig.receive();
    assert_eq!(got.len(), sent.len());
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    rig.transmit(&refs);
    let changed = changed_pages(&before, &snapshot(mem));
    let mut used = Vec::new();
    for (head, len) in rig.rxq.used() {
        chain_pages(rig, head, len, &mut used);
    }
    Round { changed, used }
}

fn chains() -> impl Strategy<Value = Vec<Vec<u32>>> {
    prop::collection::vec(prop::collection::vec(64u32..3000, 1..=3), 1..16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn every_page_the_port_writes_while_logging_is_marked_and_none_after(
        mergeable in any::<bool>(),
        first in (chains(), prop::collection::vec(60usize..1600, 0..6),
                  prop::collection::vec(60usize..6000, 0..12)),
        second in (chains(), prop::collection::vec(60usize..1600, 0..6),
                   prop::collection::vec(60usize..6000, 0..12)),
        seed in any::<u8>(),
    ) {
        let mem = guest_memory();
        let log_mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), LOG_LEN)]).unwrap();
        let log = Arc::new(DirtyLog::from_mapped(log_mem.clone(), LOG_LEN));
        let remove: &[u32] = if mergeable { &[] } else { &[VIRTIO_NET_F_MRG_RXBUF] };
        let mut rig = MockRig::logged(&mem, features(&[], remove), Some(log));

        let done = round(&mut rig, &mem, &first.0, &first.1, &first.2, seed);
        let logged = logged_pages(&log_mem);
        for page in &done.used {
            prop_assert!(logged.contains(page), "page {page:#x} of a used chain not logged");
        }
        let rxq_data = RXQ_DATA / LOG_PAGE..(RXQ_DATA + DATA_LEN) / LOG_PAGE;
        for page in &done.changed {
            // Used rings and used chains are marked; only bytes of chains given back
            // unused may not be (see the module documentation).
            prop_assert!(
                logged.contains(page) || rxq_data.contains(page),
                "page {page:#x} written, not logged"
            );
        }
        let txq_data = TXQ_DATA / LOG_PAGE..(TXQ_DATA + DATA_LEN) / LOG_PAGE;
        for page in &logged {
            prop_assert!(!txq_data.contains(page), "page {page:#x} only read, logged");
        }
        let delivered = rig.stats_to_guest().frames;
        prop_assert_eq!(delivered > 0, !done.used.is_empty());

        // The control thread turns logging off (`VHOST_F_LOG_ALL` cleared).
        for index in [RX_QUEUE, TX_QUEUE] {
            rig.dev.vrings[index].lock().dirty = None;
        }
        clear(&log_mem);
        round(&mut rig, &mem, &second.0, &second.1, &second.2, seed ^ 0x55);
        prop_assert!(logged_pages(&log_mem).is_empty());
    }
}
