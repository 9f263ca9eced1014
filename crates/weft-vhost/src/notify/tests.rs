//! The notifier's decisions over chosen times.

use super::*;

const US: Duration = Duration::from_micros(1);

fn coalesced(frames: u32, us: u64) -> Notifier {
    Notifier::new(NotifyPolicy::Coalesced {
        frames,
        max_delay: Duration::from_micros(us),
    })
}

/// Applies a decision as the ring would.
fn apply(n: &mut Notifier, f: impl FnOnce(&mut Notifier) -> Decision) -> Decision {
    let d = f(n);
    if d == Decision::Ask {
        n.asked();
    }
    d
}

#[test]
fn immediate_asks_after_every_burst_and_holds_nothing() {
    let mut n = Notifier::new(NotifyPolicy::Immediate);
    let t = Instant::now();
    assert!(!n.early());
    assert_eq!(n.burst_done(t, 3, 180), Decision::Ask);
    assert_eq!(n.burst_done(t, 0, 0), Decision::Nothing);
    assert_eq!(n.tick(t + 10 * US), Decision::Nothing);
    assert!(!n.pending());
}

#[test]
fn coalesced_asks_every_n_frames() {
    let mut n = coalesced(8, 1_000_000);
    let t = Instant::now();
    let mut asks = 0;
    // 20 bursts of 3 frames: 60 frames, an ask whenever 8 or more are held.
    for _ in 0..20 {
        if apply(&mut n, |n| n.burst_done(t, 3, 0)) == Decision::Ask {
            asks += 1;
        }
    }
    // Held counts 3, 6, 9 → ask; so one ask per 3 bursts: 6 asks, 2 bursts held.
    assert_eq!(asks, 6);
    assert!(n.pending());
}

#[test]
fn coalesced_sends_a_held_notification_once_the_delay_passes_without_traffic() {
    let mut n = coalesced(64, 50);
    let t = Instant::now();
    assert_eq!(n.burst_done(t, 1, 60), Decision::Hold);
    assert_eq!(n.tick(t + 49 * US), Decision::Nothing);
    assert!(n.pending());
    assert_eq!(apply(&mut n, |n| n.tick(t + 50 * US)), Decision::Ask);
    assert!(!n.pending());
    assert_eq!(n.tick(t + 500 * US), Decision::Nothing);
}

#[test]
fn coalesced_delay_counts_from_the_oldest_held_frame() {
    let mut n = coalesced(64, 50);
    let t = Instant::now();
    assert_eq!(n.burst_done(t, 1, 60), Decision::Hold);
    assert_eq!(n.burst_done(t + 30 * US, 1, 60), Decision::Hold);
    assert_eq!(n.burst_done(t + 50 * US, 1, 60), Decision::Ask);
}

#[test]
fn optimistic_asks_early_and_decides_the_eoc_by_density() {
    let t = Instant::now();
    // Just right: 10 KB over 20 µs = 500 MB/s.
    let mut n = Notifier::new(NotifyPolicy::Optimistic);
    assert!(n.early());
    n.early_done(t, true);
    assert_eq!(n.burst_done(t + US, 7, 10_000), Decision::Nothing);
    assert!(n.pending(), "an EoC is due");
    assert_eq!(apply(&mut n, |n| n.tick(t + 20 * US)), Decision::Ask);
    assert!(!n.pending());
    // Too hot: 1 MB over 20 µs.
    n.early_done(t, true);
    n.burst_done(t + US, 60, 1_000_000);
    assert_eq!(n.tick(t + 20 * US), Decision::Hold);
    // Too cold: 60 bytes over 20 µs = 3 MB/s.
    n.early_done(t, true);
    n.burst_done(t + US, 1, 60);
    assert_eq!(n.tick(t + 20 * US), Decision::Hold);
}

#[test]
fn optimistic_eoc_after_a_failed_evi_always_asks() {
    let t = Instant::now();
    let mut n = Notifier::new(NotifyPolicy::Optimistic);
    n.early_done(t, false);
    // Even a "too hot" density.
    n.burst_done(t + US, 60, 1_000_000);
    assert_eq!(n.tick(t + 2 * US), Decision::Ask);
}

#[test]
fn optimistic_burst_of_one_frame_needs_no_eoc() {
    let t = Instant::now();
    let mut n = Notifier::new(NotifyPolicy::Optimistic);
    n.early_done(t, true);
    assert_eq!(n.burst_done(t, 0, 0), Decision::Nothing);
    assert!(!n.pending());
    assert_eq!(n.tick(t + 1000 * US), Decision::Nothing);
}

#[test]
fn a_skipped_eoc_is_backed_up_unless_a_later_evi_covers_it() {
    let t = Instant::now();
    let mut n = Notifier::new(NotifyPolicy::Optimistic);
    n.early_done(t, true);
    n.burst_done(t + US, 1, 60);
    assert_eq!(n.tick(t + 20 * US), Decision::Hold, "too cold");
    assert_eq!(
        n.tick(t + 20 * US + OPTIMISTIC_BACKSTOP / 2),
        Decision::Nothing
    );
    assert_eq!(
        apply(&mut n, |n| n.tick(t + 20 * US + OPTIMISTIC_BACKSTOP)),
        Decision::Ask
    );
    // A later EVI clears the backstop.
    n.early_done(t, true);
    n.burst_done(t + US, 1, 60);
    assert_eq!(n.tick(t + 20 * US), Decision::Hold);
    n.early_done(t + 30 * US, true);
    assert!(!n.pending());
}

/// One step of traffic: a burst (with or without an early ask the guest accepts) or a
/// look, after `gap_us` microseconds.
#[derive(Debug, Clone)]
enum Step {
    Burst {
        frames: u64,
        bytes: u64,
        evi_sent: bool,
    },
    Look,
}

fn step() -> impl proptest::strategy::Strategy<Value = (u64, Step)> {
    use proptest::prelude::*;
    (
        0u64..200,
        prop_oneof![
            (0u64..64, 0u64..100_000, any::<bool>()).prop_map(|(frames, bytes, evi_sent)| {
                Step::Burst {
                    frames,
                    bytes,
                    evi_sent,
                }
            }),
            Just(Step::Look),
        ],
    )
}

fn policy() -> impl proptest::strategy::Strategy<Value = NotifyPolicy> {
    use proptest::prelude::*;
    prop_oneof![
        Just(NotifyPolicy::Immediate),
        Just(NotifyPolicy::Optimistic),
        (1u32..100, 1u64..500).prop_map(|(frames, us)| NotifyPolicy::Coalesced {
            frames,
            max_delay: Duration::from_micros(us),
        }),
    ]
}

proptest::proptest! {
    /// Whatever the traffic, once it stops the worker's looks send every held-back
    /// notification within the policy's bound, and then nothing is pending.
    #[test]
    fn no_notification_stays_held_once_traffic_stops(
        policy in policy(),
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let mut n = Notifier::new(policy);
        let mut t = Instant::now();
        for (gap, s) in steps {
            t += Duration::from_micros(gap);
            match s {
                Step::Burst { frames, bytes, evi_sent } => {
                    if n.early() && frames > 0 {
                        n.early_done(t, evi_sent);
                        apply(&mut n, |n| n.burst_done(t, frames - 1, bytes));
                    } else {
                        apply(&mut n, |n| n.burst_done(t, frames, bytes));
                    }
                }
                Step::Look => {
                    apply(&mut n, |n| n.tick(t));
                }
            }
        }
        // Traffic stopped: looks every 10 µs for 1 ms.
        for _ in 0..100 {
            t += 10 * US;
            apply(&mut n, |n| n.tick(t));
        }
        proptest::prop_assert!(!n.pending());
    }
}

#[test]
fn density_bounds() {
    assert_eq!(density(0), Density::TooCold);
    assert_eq!(density(OPTIMISTIC_COLD_BPS), Density::JustRight);
    assert_eq!(density(OPTIMISTIC_HOT_BPS), Density::JustRight);
    assert_eq!(density(OPTIMISTIC_HOT_BPS + 1), Density::TooHot);
}
