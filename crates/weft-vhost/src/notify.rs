//! When to interrupt the guest after putting buffers in a used ring: the notification
//! policies of [`NotifyPolicy`], as pure logic over time the caller passes.
//!
//! The notifier only decides when the port *asks*; asking means checking the guest's own
//! suppression (`EVENT_IDX`'s `used_event` over every entry added since the last ask, or the
//! `NO_INTERRUPT` flag) and interrupting only if the guest wants it (`vring.rs`). Entries
//! whose ask is held back stay in the range the next ask checks, so holding back never
//! loses a wake-up the guest asked for; it only delays it, by a bounded time.
//!
//! Optimistic interrupts (VNET/P+ §IV.A) map onto a switch port like this:
//! - Early virtual interrupt (EVI): as soon as the first frame of a burst is in the used
//!   ring, ask — the guest starts its handler while the rest of the burst is copied. An EVI
//!   the guest's suppression refuses has *failed* (the guest is masked: busy with the ring).
//! - End of coalescing (EoC): the worker's next look at the port after the burst — the
//!   switch has emptied what it had for this guest. If frames followed the EVI: after a
//!   failed EVI, always ask; after a delivered one, by receive density RD (bytes put in the
//!   ring per second since that EVI): "too cold" (RD < α, the guest already fetched the
//!   sparse data the EVI told it of) and "too hot" (RD > β, a stream whose next EVIs
//!   drive the guest) send nothing, "just right" asks.
//! - The paper relies on the host NIC's next interrupt to cover an EoC it skipped. A
//!   switch port has no such NIC, so a skipped EoC leaves a backstop: if no later EVI asked
//!   within [`OPTIMISTIC_BACKSTOP`], the port asks then (and the guest's suppression still
//!   decides, so a guest that fetched everything is not interrupted).

use std::time::{Duration, Instant};

use crate::dispatch::per_second;
use crate::modes::NotifyPolicy;

/// α: below this receive density (bytes/s since the last EVI) an EoC is "too cold"
/// (100 Mbit/s).
pub(crate) const OPTIMISTIC_COLD_BPS: u64 = 12_500_000;
/// β: above this receive density an EoC is "too hot" (10 Gbit/s, the paper's wire).
pub(crate) const OPTIMISTIC_HOT_BPS: u64 = 1_250_000_000;
/// How long a skipped EoC may leave a guest's wanted interrupt unsent.
pub(crate) const OPTIMISTIC_BACKSTOP: Duration = Duration::from_micros(100);

/// What the caller does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Ask the guest (interrupt it unless its suppression says no).
    Ask,
    /// Hold the notification back (counted as suppressed by policy).
    Hold,
    /// Nothing to notify.
    Nothing,
}

/// How an EoC is classified by receive density.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Density {
    /// RD < α.
    TooCold,
    /// α ≤ RD ≤ β.
    JustRight,
    /// RD > β.
    TooHot,
}

/// Classifies a receive density in bytes per second.
pub(crate) fn density(bytes_per_second: u64) -> Density {
    if bytes_per_second < OPTIMISTIC_COLD_BPS {
        Density::TooCold
    } else if bytes_per_second > OPTIMISTIC_HOT_BPS {
        Density::TooHot
    } else {
        Density::JustRight
    }
}

/// The notification state of one queue.
#[derive(Debug)]
pub(crate) struct Notifier {
    policy: NotifyPolicy,
    /// Coalesced: frames added since the last ask, and when the first of them was.
    held_frames: u64,
    held_since: Option<Instant>,
    /// Optimistic: when the last EVI reached the guest, bytes added since.
    evi_at: Option<Instant>,
    bytes_since_evi: u64,
    /// The last EVI was refused by the guest's suppression.
    evi_failed: bool,
    /// Frames followed the last EVI attempt: an EoC decision is due.
    eoc_due: bool,
    /// A skipped EoC's deadline.
    backstop: Option<Instant>,
}

impl Notifier {
    pub(crate) fn new(policy: NotifyPolicy) -> Self {
        Notifier {
            policy,
            held_frames: 0,
            held_since: None,
            evi_at: None,
            bytes_since_evi: 0,
            evi_failed: false,
            eoc_due: false,
            backstop: None,
        }
    }

    /// Whether the first frames of a burst, just visible, call for an early ask (EVI).
    pub(crate) fn early(&self) -> bool {
        self.policy == NotifyPolicy::Optimistic
    }

    /// The early ask at `now` was made; `sent` tells whether the guest was interrupted.
    pub(crate) fn early_done(&mut self, now: Instant, sent: bool) {
        self.evi_failed = !sent;
        if sent {
            self.evi_at = Some(now);
            self.bytes_since_evi = 0;
        }
        // This ask covered every entry added so far.
        self.eoc_due = false;
        self.backstop = None;
    }

    /// A burst ended at `now` having added `frames` frames of `bytes` bytes to the used
    /// ring (those after the early ask, with the optimistic policy).
    pub(crate) fn burst_done(&mut self, now: Instant, frames: u64, bytes: u64) -> Decision {
        if frames == 0 {
            return Decision::Nothing;
        }
        match self.policy {
            NotifyPolicy::Immediate => Decision::Ask,
            NotifyPolicy::Coalesced {
                frames: every,
                max_delay,
            } => {
                self.held_frames = self.held_frames.saturating_add(frames);
                let since = *self.held_since.get_or_insert(now);
                if self.held_frames >= u64::from(every)
                    || now.saturating_duration_since(since) >= max_delay
                {
                    Decision::Ask
                } else {
                    Decision::Hold
                }
            }
            NotifyPolicy::Optimistic => {
                self.bytes_since_evi = self.bytes_since_evi.saturating_add(bytes);
                self.eoc_due = true;
                // The EoC comes at the worker's next look (`tick`).
                Decision::Nothing
            }
        }
    }

    /// The worker looks at the port at `now` (between bursts): a held notification whose
    /// time has come, or an EoC decision.
    pub(crate) fn tick(&mut self, now: Instant) -> Decision {
        match self.policy {
            NotifyPolicy::Immediate => Decision::Nothing,
            NotifyPolicy::Coalesced { max_delay, .. } => match self.held_since {
                Some(since) if now.saturating_duration_since(since) >= max_delay => Decision::Ask,
                _ => Decision::Nothing,
            },
            NotifyPolicy::Optimistic => {
                if self.eoc_due {
                    self.eoc_due = false;
                    if self.evi_failed {
                        return Decision::Ask;
                    }
                    let since = self
                        .evi_at
                        .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                    return match density(per_second(self.bytes_since_evi, since)) {
                        Density::JustRight => Decision::Ask,
                        Density::TooCold | Density::TooHot => {
                            self.backstop = Some(now + OPTIMISTIC_BACKSTOP);
                            Decision::Hold
                        }
                    };
                }
                match self.backstop {
                    Some(deadline) if now >= deadline => Decision::Ask,
                    _ => Decision::Nothing,
                }
            }
        }
    }

    /// The guest was asked (whatever it answered): every entry so far is covered.
    pub(crate) fn asked(&mut self) {
        self.held_frames = 0;
        self.held_since = None;
        self.eoc_due = false;
        self.backstop = None;
    }

    /// True while a notification is held back or an EoC is due: the worker must keep
    /// looking at the port (`tick`) even if no traffic comes.
    pub(crate) fn pending(&self) -> bool {
        self.held_since.is_some() || self.eoc_due || self.backstop.is_some()
    }
}

#[cfg(test)]
mod tests {
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
}

#[cfg(test)]
mod ring_tests;
