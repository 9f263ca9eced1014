//! Dispatch modes against a mock driver: the flags the guest sees, the polling hint, and no
//! lost wake-up across mode changes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_switch::{PortRx, RxBatch};

use crate::config::VhostPortConfig;
use crate::modes::DispatchMode;
use crate::rx::VhostPortRx;
use crate::tests::testutil::{all_features, ether_frame, Rig};

const HDR0: [u8; 12] = [0; 12];
const NO_NOTIFY: u16 = 1;

fn rig(dispatch: DispatchMode, event_idx: bool) -> (Rig, VhostPortRx) {
    let config = VhostPortConfig {
        dispatch,
        event_idx,
        ..VhostPortConfig::default()
    };
    let (rig, rx, _tx) = Rig::new(config, all_features(&config), 256);
    (rig, rx)
}

fn receive(rx: &mut VhostPortRx) -> usize {
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    let n = batch.len();
    rx.finish();
    n
}

fn send(rig: &mut Rig, n: usize) {
    for i in 0..n {
        rig.txq.send(
            &HDR0,
            &ether_frame(1, 2, 60, u8::try_from(i % 200).unwrap()),
            &[],
        );
    }
}

/// Bounds the tests can cross whatever the machine's speed: polling as fast as it can,
/// the rate is far above 20 000 frames/s; a frame or none per window is far below 2 000.
/// The adaptive window of the step-by-step test: long enough that a test thread preempted
/// on a loaded machine does not see a window close between two of its steps.
const WINDOW: Duration = Duration::from_millis(40);

fn adaptive_with(window: Duration) -> DispatchMode {
    DispatchMode::Adaptive {
        low_pps: 2_000,
        high_pps: 20_000,
        window,
    }
}

/// A short window, for the threaded test whose guest pauses 4 ms to send the port back.
fn adaptive() -> DispatchMode {
    adaptive_with(Duration::from_millis(2))
}

#[test]
fn switch_driven_keeps_kicks_off_when_idle_and_asks_to_be_polled() {
    let (mut rig, mut rx) = rig(DispatchMode::SwitchDriven, false);
    send(&mut rig, 2);
    assert_eq!(receive(&mut rx), 2);
    assert_eq!(rig.txq.used_flags() & NO_NOTIFY, NO_NOTIFY);
    for _ in 0..3 {
        assert_eq!(receive(&mut rx), 0);
    }
    assert_eq!(rig.txq.used_flags() & NO_NOTIFY, NO_NOTIFY, "still off");
    assert!(rx.needs_polling());
    // A guest that kicks anyway is not read: no system call while polling.
    rig.tx_kick.write(1).unwrap();
    assert_eq!(receive(&mut rx), 0);
    assert_eq!(rig.tx_kick.read().unwrap(), 1);
}

#[test]
fn switch_driven_without_event_idx_writes_no_notify_once_not_at_every_batch() {
    // The flags share their line with the used index the guest polls: every store there
    // takes the line back from the guest's core, so the flag is not stored again while it
    // is known to be set. (The test marks the word to see whether it is rewritten.)
    let (mut rig, mut rx) = rig(DispatchMode::SwitchDriven, false);
    send(&mut rig, 2);
    assert_eq!(receive(&mut rx), 2);
    assert_eq!(rig.txq.used_flags(), NO_NOTIFY);
    rig.txq.set_used_flags(NO_NOTIFY | 0x8000);
    for _ in 0..3 {
        send(&mut rig, 2);
        assert_eq!(receive(&mut rx), 2);
    }
    assert_eq!(rig.txq.used_flags(), NO_NOTIFY | 0x8000, "not rewritten");
}

#[test]
fn a_switch_driven_port_whose_ring_stopped_asks_for_no_polling() {
    let (mut rig, mut rx) = rig(DispatchMode::SwitchDriven, false);
    assert_eq!(receive(&mut rx), 0);
    assert!(rx.needs_polling());
    {
        let vring = rig.dev.tx_vring();
        vring.lock().stop(&vring.counters);
    }
    assert_eq!(receive(&mut rx), 0);
    assert!(
        !rx.needs_polling(),
        "a disconnected guest must not keep a worker spinning"
    );
    send(&mut rig, 1);
    assert_eq!(receive(&mut rx), 0, "stopped");
}

#[test]
fn guest_driven_turns_kicks_back_on_when_idle_and_lets_the_worker_sleep() {
    let (mut rig, mut rx) = rig(DispatchMode::GuestDriven, false);
    assert!(!rx.needs_polling());
    send(&mut rig, 2);
    assert_eq!(receive(&mut rx), 2);
    assert_eq!(
        rig.txq.used_flags() & NO_NOTIFY,
        NO_NOTIFY,
        "off while busy"
    );
    assert_eq!(receive(&mut rx), 0);
    assert_eq!(rig.txq.used_flags() & NO_NOTIFY, 0);
    assert!(!rx.needs_polling());
}

#[test]
fn switch_driven_with_event_idx_keeps_avail_event_behind_the_guest() {
    let (mut rig, mut rx) = rig(DispatchMode::SwitchDriven, true);
    send(&mut rig, 3);
    assert_eq!(receive(&mut rx), 3);
    assert_eq!(rig.txq.avail_event(), 2);
    let old = rig.txq.avail_idx();
    send(&mut rig, 1);
    assert!(!rig.txq.must_kick(old, true), "the guest does not kick");
    assert_eq!(receive(&mut rx), 1);
    assert_eq!(rig.txq.avail_event(), 3, "moved along with the ring");
}

#[test]
fn adaptive_goes_switch_driven_above_the_upper_bound_and_back_below_the_lower() {
    let (mut rig, mut rx) = rig(adaptive_with(WINDOW), false);
    assert!(!rx.needs_polling(), "starts guest-driven");
    let start = Instant::now();
    while start.elapsed() < WINDOW + WINDOW / 4 {
        send(&mut rig, 4);
        assert_eq!(receive(&mut rx), 4);
    }
    assert!(rx.needs_polling(), "switch-driven after a busy window");
    assert_eq!(rig.stats_from_guest().dispatch_changes, 1);
    // Idle polls keep kicks off while switch-driven.
    assert_eq!(receive(&mut rx), 0);
    assert_eq!(rig.txq.used_flags() & NO_NOTIFY, NO_NOTIFY);
    // A frame queued without a kick (kicks are off) is found by polling.
    let old = rig.txq.avail_idx();
    send(&mut rig, 1);
    assert!(!rig.txq.must_kick(old, false));
    assert_eq!(receive(&mut rx), 1);
    // Traffic stops: the window still open holds the busy tail; the next one is silent
    // and the port goes guest-driven, kicks on again.
    for _ in 0..2 {
        std::thread::sleep(WINDOW + WINDOW / 4);
        assert_eq!(receive(&mut rx), 0);
    }
    assert!(!rx.needs_polling());
    assert_eq!(rig.stats_from_guest().dispatch_changes, 2);
    assert_eq!(rig.txq.used_flags() & NO_NOTIFY, 0);
    let old = rig.txq.avail_idx();
    send(&mut rig, 1);
    assert!(rig.txq.must_kick(old, false), "the guest kicks again");
}

#[test]
fn kicks_read_from_the_descriptor_are_counted() {
    let (mut rig, mut rx) = rig(DispatchMode::GuestDriven, false);
    send(&mut rig, 1);
    rig.tx_kick.write(3).unwrap();
    assert_eq!(receive(&mut rx), 1);
    assert_eq!(receive(&mut rx), 0);
    let s = rig.stats_from_guest();
    assert_eq!((s.kicks, s.kicks_drained), (3, 1));
}

#[test]
fn receive_batches_are_counted_by_size() {
    let (mut rig, mut rx) = rig(DispatchMode::GuestDriven, false);
    send(&mut rig, 1);
    assert_eq!(receive(&mut rx), 1);
    send(&mut rig, 5);
    assert_eq!(receive(&mut rx), 5);
    assert_eq!(receive(&mut rx), 0);
    let s = rig.stats_from_guest();
    assert_eq!(s.batches(), 2);
    assert_eq!((s.batch_sizes[0], s.batch_sizes[2]), (1, 1));
}

/// Waits for `fd` to become readable, up to `timeout`; true when it did.
fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap();
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// A guest thread sends bursts separated by short and long pauses, kicking only when the
/// device's flags or `avail_event` say so; the worker sleeps on the readiness descriptor
/// whenever the port does not ask to be polled. A lost wake-up would leave the worker
/// asleep with frames in the ring: the test fails if any sleep outlasts a second.
fn no_lost_wake_up(event_idx: bool) {
    // Every attempt must lose no wake-up; a machine too loaded for the rates to cross the
    // bounds twice, or for the worker ever to take chains while the guest is still
    // sending (so that every frame was kicked), gets another attempt before the test
    // calls those missing.
    let mut last = (0, 0, 0);
    for _ in 0..3 {
        let outcome = no_lost_wake_up_attempt(event_idx);
        if outcome.changes >= 2 && outcome.kicks < outcome.sent {
            return;
        }
        last = (outcome.changes, outcome.kicks, outcome.sent);
    }
    panic!(
        "in none of 3 attempts did the port go switch-driven and back with kicks suppressed \
         while busy (last: {} changes, {} kicks for {} frames)",
        last.0, last.1, last.2
    );
}

const ROUNDS: usize = 40;
const BURST: usize = 48;
/// How long a busy round goes on sending for a frame that needs no kick.
const BUSY_LIMIT: Duration = Duration::from_millis(200);

/// What one attempt of [`no_lost_wake_up`] saw.
struct WakeUpOutcome {
    changes: u64,
    kicks: usize,
    sent: usize,
}

/// One run of [`no_lost_wake_up`]. Every third round is busy: the guest sends on past its
/// burst until the device holds a kick off (the worker takes chains while more come), for
/// up to [`BUSY_LIMIT`] — so that, however the scheduler places the two threads, the race
/// of a guest seeing kicks off while the worker decides to sleep is run.
fn no_lost_wake_up_attempt(event_idx: bool) -> WakeUpOutcome {
    let (rig, mut rx) = rig(adaptive(), event_idx);
    let Rig {
        dev,
        mut txq,
        tx_kick,
        ..
    } = rig;
    let done = Arc::new(AtomicBool::new(false));
    let sent_total = Arc::new(AtomicUsize::new(0));
    let (guest_done, guest_sent) = (Arc::clone(&done), Arc::clone(&sent_total));
    let guest = std::thread::spawn(move || {
        let (mut sent, mut completed, mut kicks) = (0usize, 0usize, 0usize);
        for round in 0..ROUNDS {
            let began = Instant::now();
            let mut held_off = false;
            let mut i = 0;
            while i < BURST || (round % 3 == 1 && !held_off && began.elapsed() < BUSY_LIMIT) {
                while sent - completed >= 200 {
                    completed += txq.take_used().len();
                    std::thread::yield_now();
                }
                let old = txq.avail_idx();
                let seed = u8::try_from(i % 200).unwrap();
                txq.send(&HDR0, &ether_frame(1, 2, 60, seed), &[]);
                sent += 1;
                i += 1;
                if txq.must_kick(old, event_idx) {
                    tx_kick.write(1).unwrap();
                    kicks += 1;
                } else {
                    held_off = true;
                }
            }
            let pause = if round % 3 == 2 { 4_000 } else { 20 };
            std::thread::sleep(Duration::from_micros(pause));
            completed += txq.take_used().len();
        }
        // Every frame must come back before the guest says it is done: the kick that
        // wakes the worker to see that cannot stand in for one a lost wake-up missed.
        let began = Instant::now();
        while completed < sent && began.elapsed() < Duration::from_secs(5) {
            completed += txq.take_used().len();
            std::thread::yield_now();
        }
        guest_sent.store(sent, Ordering::Release);
        guest_done.store(true, Ordering::Release);
        tx_kick.write(1).unwrap();
        kicks
    });
    let mut received = 0;
    let mut sleeps = 0;
    let fd = rx.readiness_fd().unwrap();
    loop {
        let n = receive(&mut rx);
        received += n;
        if n > 0 || rx.needs_polling() {
            continue;
        }
        if done.load(Ordering::Acquire) && received == sent_total.load(Ordering::Acquire) {
            break;
        }
        sleeps += 1;
        assert!(
            wait_readable(fd, Duration::from_secs(1)),
            "worker asleep with {received} frames received and more in the ring: a lost \
             wake-up"
        );
    }
    let kicks = guest.join().unwrap();
    assert!(sleeps > 0, "the worker slept during pauses");
    assert!(kicks > 0, "the guest kicked the sleeping worker");
    WakeUpOutcome {
        changes: dev.tx_vring().counters.snapshot().dispatch_changes,
        kicks,
        sent: sent_total.load(Ordering::Acquire),
    }
}

#[test]
fn no_lost_wake_up_across_mode_changes_with_flags() {
    no_lost_wake_up(false);
}

#[test]
fn no_lost_wake_up_across_mode_changes_with_event_idx() {
    no_lost_wake_up(true);
}
