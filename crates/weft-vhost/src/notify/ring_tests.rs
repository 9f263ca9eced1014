//! Notification policies against a mock driver: how many interrupts each policy sends for
//! given traffic, with the guest's suppression honoured.

use std::time::Duration;

use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::VhostPortConfig;
use crate::modes::{DispatchMode, NotifyPolicy};
use crate::rx::VhostPortRx;
use crate::tests::testutil::{all_features, ether_frame, Rig};
use crate::tx::VhostPortTx;

fn rig(notify: NotifyPolicy, event_idx: bool) -> (Rig, VhostPortRx, VhostPortTx) {
    let config = VhostPortConfig {
        notify,
        event_idx,
        dispatch: DispatchMode::GuestDriven,
        ..VhostPortConfig::default()
    };
    let (mut rig, rx, tx) = Rig::new(config, all_features(&config), 256);
    rig.rxq.post_rx(200, 2048);
    (rig, rx, tx)
}

/// Sends a burst of `n` 60-byte frames to the guest; all must be taken.
fn burst(tx: &mut VhostPortTx, n: usize) {
    let f = ether_frame(2, 1, 60, 7);
    let frames: Vec<_> = (0..n)
        .map(|_| TxFrame::whole(&f, OffloadInfo::default()))
        .collect();
    assert_eq!(tx.transmit(&frames), n);
}

/// The worker's look at the port (its receive half).
fn look(rx: &mut VhostPortRx) {
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    rx.finish();
}

/// Interrupts the guest got since the last call.
fn interrupts(call: &vmm_sys_util::eventfd::EventFd) -> u64 {
    call.read().unwrap_or(0)
}

fn coalesced(frames: u32, max_delay: Duration) -> NotifyPolicy {
    NotifyPolicy::Coalesced { frames, max_delay }
}

#[test]
fn immediate_interrupts_after_every_burst() {
    let (rig, _rx, mut tx) = rig(NotifyPolicy::Immediate, false);
    for n in [1, 3, 10] {
        burst(&mut tx, n);
    }
    assert_eq!(interrupts(&rig.rx_call), 3);
    let s = rig.stats_to_guest();
    assert_eq!(
        (
            s.notifications,
            s.notifications_suppressed,
            s.notifications_held
        ),
        (3, 0, 0)
    );
}

#[test]
fn coalesced_interrupts_once_per_n_frames() {
    let (rig, _rx, mut tx) = rig(coalesced(8, Duration::from_secs(10)), false);
    // Held: 3, 6, then 9 ≥ 8 asks; 3, 6 held again.
    for _ in 0..5 {
        burst(&mut tx, 3);
    }
    assert_eq!(interrupts(&rig.rx_call), 1);
    let s = rig.stats_to_guest();
    assert_eq!((s.notifications, s.notifications_held), (1, 4));
}

#[test]
fn a_held_notification_is_sent_after_the_delay_even_if_traffic_stops() {
    let (rig, mut rx, mut tx) = rig(coalesced(64, Duration::from_millis(1)), false);
    burst(&mut tx, 2);
    assert_eq!(interrupts(&rig.rx_call), 0);
    assert!(rx.needs_polling(), "the worker must come back to send it");
    std::thread::sleep(Duration::from_millis(3));
    look(&mut rx);
    assert_eq!(interrupts(&rig.rx_call), 1);
    assert!(!rx.needs_polling());
    look(&mut rx);
    assert_eq!(interrupts(&rig.rx_call), 0, "sent once");
}

#[test]
fn a_coalesced_notification_still_honours_event_idx() {
    let (rig, mut rx, mut tx) = rig(coalesced(4, Duration::from_millis(1)), true);
    // The guest wants an interrupt only once entry 10 is used.
    rig.rxq.set_used_event(10);
    burst(&mut tx, 4);
    assert_eq!(interrupts(&rig.rx_call), 0, "asked, but the guest said no");
    burst(&mut tx, 3);
    std::thread::sleep(Duration::from_millis(3));
    look(&mut rx);
    assert_eq!(interrupts(&rig.rx_call), 0);
    burst(&mut tx, 4);
    assert_eq!(interrupts(&rig.rx_call), 1, "entry 10 is in [7, 11)");
    let s = rig.stats_to_guest();
    assert_eq!(
        (
            s.notifications,
            s.notifications_suppressed,
            s.notifications_held
        ),
        (1, 2, 1)
    );
}

#[test]
fn optimistic_interrupts_early_and_not_a_masked_guest() {
    let (rig, mut rx, mut tx) = rig(NotifyPolicy::Optimistic, true);
    // The guest waits for the first entry, then masks (used_event stays behind).
    rig.rxq.set_used_event(0);
    burst(&mut tx, 8);
    assert_eq!(interrupts(&rig.rx_call), 1, "the early interrupt");
    // Whatever the density says at the end of coalescing, the masked guest wants nothing.
    look(&mut rx);
    std::thread::sleep(Duration::from_millis(1));
    look(&mut rx);
    assert_eq!(interrupts(&rig.rx_call), 0);
    assert!(!rx.needs_polling());
    assert_eq!(rig.stats_to_guest().notifications, 1);
}

#[test]
fn optimistic_end_of_coalescing_after_a_failed_early_interrupt_always_asks() {
    let (rig, mut rx, mut tx) = rig(NotifyPolicy::Optimistic, true);
    rig.rxq.set_used_event(0);
    burst(&mut tx, 1);
    assert_eq!(interrupts(&rig.rx_call), 1);
    // Masked: the next burst's early interrupt fails.
    burst(&mut tx, 8);
    assert_eq!(interrupts(&rig.rx_call), 0);
    assert!(rx.needs_polling(), "an end of coalescing is due");
    // The guest unmasks having seen 5 entries; the EoC asks, and [2, 9) holds 5.
    rig.rxq.set_used_event(5);
    look(&mut rx);
    assert_eq!(interrupts(&rig.rx_call), 1);
    let s = rig.stats_to_guest();
    assert_eq!((s.notifications, s.notifications_suppressed), (2, 1));
}

#[test]
fn optimistic_never_strands_frames_a_waiting_guest_has_not_seen() {
    let (rig, mut rx, mut tx) = rig(NotifyPolicy::Optimistic, false);
    // Without EVENT_IDX and no NO_INTERRUPT flag, the guest always wants interrupts:
    // the early one goes out, and whatever the density, the rest is told within the
    // backstop.
    burst(&mut tx, 8);
    assert_eq!(interrupts(&rig.rx_call), 1);
    look(&mut rx);
    std::thread::sleep(Duration::from_millis(1));
    look(&mut rx);
    assert_eq!(
        interrupts(&rig.rx_call),
        1,
        "the end of coalescing, now or backstopped"
    );
    assert!(!rx.needs_polling());
}

#[test]
fn transmit_completions_follow_the_policy_too() {
    let config = VhostPortConfig {
        notify: coalesced(4, Duration::from_secs(10)),
        event_idx: false,
        dispatch: DispatchMode::GuestDriven,
        ..VhostPortConfig::default()
    };
    let (mut rig, mut rx, _tx) = Rig::new(config, all_features(&config), 256);
    for i in 0..8 {
        rig.txq.send(&[0; 12], &ether_frame(1, 2, 60, i), &[]);
        let mut batch = RxBatch::new(8);
        rx.receive(&mut batch);
        assert_eq!(batch.len(), 1);
        rx.finish();
    }
    assert_eq!(interrupts(&rig.tx_call), 2);
}

#[test]
fn transmit_bursts_are_counted_by_size() {
    let (rig, _rx, mut tx) = rig(NotifyPolicy::Immediate, false);
    for n in [1, 5, 64] {
        burst(&mut tx, n);
    }
    let s = rig.stats_to_guest();
    assert_eq!(s.batches(), 3);
    assert_eq!(
        (s.batch_sizes[0], s.batch_sizes[2], s.batch_sizes[6]),
        (1, 1, 1)
    );
}
