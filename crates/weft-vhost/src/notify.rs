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
mod tests;

#[cfg(test)]
mod ring_tests;
