//! The dispatch mode of a port's receive half as time goes: VNET/P's adaptive operation,
//! guest-driven at low frame rates and switch-driven at high ones, with hysteresis.
//!
//! The rate is measured over windows of ω: frames counted from the window's first poll
//! until a poll at least ω later closes it. A window above αu moves a guest-driven port to
//! switch-driven; a window below αl moves it back; anything between keeps the mode, so a
//! rate wandering between the bounds does not flap. Pure logic: the caller passes the
//! time, so tests choose it. Public: memif's receive half drives its peer's interrupts
//! the same way.

use std::time::{Duration, Instant};

use crate::modes::DispatchMode;

/// Who drives the port right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driven {
    /// The guest's kicks wake the worker.
    Guest,
    /// The worker polls; the guest does not kick.
    Switch,
}

/// The dispatch state of one receive half.
#[derive(Debug)]
pub struct Dispatch {
    mode: DispatchMode,
    driven: Driven,
    window_start: Option<Instant>,
    window_frames: u64,
}

impl Dispatch {
    /// A receive half starting in `mode` (adaptive starts guest-driven).
    pub fn new(mode: DispatchMode) -> Self {
        Dispatch {
            mode,
            driven: match mode {
                DispatchMode::SwitchDriven => Driven::Switch,
                DispatchMode::GuestDriven | DispatchMode::Adaptive { .. } => Driven::Guest,
            },
            window_start: None,
            window_frames: 0,
        }
    }

    /// The ring stopped: adaptive dispatch starts over, guest-driven with a new window.
    pub fn restart(&mut self) {
        *self = Dispatch::new(self.mode);
    }

    /// Who drives the port now.
    pub fn driven(&self) -> Driven {
        self.driven
    }

    /// A poll at `now` took `frames` frames: returns who drives the port from now on, and
    /// whether that just changed.
    pub fn observe(&mut self, now: Instant, frames: usize) -> (Driven, bool) {
        let DispatchMode::Adaptive {
            low_pps,
            high_pps,
            window,
        } = self.mode
        else {
            return (self.driven, false);
        };
        let start = *self.window_start.get_or_insert(now);
        self.window_frames = self.window_frames.saturating_add(frames as u64);
        let elapsed = now.saturating_duration_since(start);
        if elapsed < window {
            return (self.driven, false);
        }
        let rate = per_second(self.window_frames, elapsed);
        self.window_start = Some(now);
        self.window_frames = 0;
        let next = match self.driven {
            Driven::Guest if rate > high_pps => Driven::Switch,
            Driven::Switch if rate < low_pps => Driven::Guest,
            same => same,
        };
        let changed = next != self.driven;
        self.driven = next;
        (next, changed)
    }
}

/// `count` per `elapsed`, in events per second (saturating).
pub(crate) fn per_second(count: u64, elapsed: Duration) -> u64 {
    let nanos = elapsed.as_nanos().max(1);
    u64::try_from(u128::from(count) * 1_000_000_000 / nanos).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn adaptive() -> Dispatch {
        Dispatch::new(DispatchMode::Adaptive {
            low_pps: 1_000,
            high_pps: 10_000,
            window: 5 * MS,
        })
    }

    /// Feeds `per_ms` frames every millisecond for `ms` milliseconds from `t`; returns
    /// the time after and every change seen.
    fn feed(d: &mut Dispatch, t: &mut Instant, ms: u32, per_ms: usize) -> Vec<Driven> {
        let mut changes = Vec::new();
        for _ in 0..ms {
            *t += MS;
            let (driven, changed) = d.observe(*t, per_ms);
            if changed {
                changes.push(driven);
            }
        }
        changes
    }

    #[test]
    fn a_window_above_the_upper_bound_goes_switch_driven_and_one_below_the_lower_comes_back() {
        let mut d = adaptive();
        let mut t = Instant::now();
        assert_eq!(d.driven(), Driven::Guest);
        // 20 frames/ms = 20 000/s > αu: switch-driven once a window has passed.
        assert_eq!(feed(&mut d, &mut t, 4, 20), vec![]);
        assert_eq!(feed(&mut d, &mut t, 2, 20), vec![Driven::Switch]);
        // Silence: back to guest-driven within a window or two.
        assert_eq!(feed(&mut d, &mut t, 11, 0), vec![Driven::Guest]);
    }

    #[test]
    fn a_rate_between_the_bounds_keeps_the_current_mode() {
        let mut d = adaptive();
        let mut t = Instant::now();
        // 5 frames/ms = 5 000/s: between αl and αu.
        assert_eq!(feed(&mut d, &mut t, 50, 5), vec![], "guest-driven stays");
        feed(&mut d, &mut t, 12, 50);
        assert_eq!(d.driven(), Driven::Switch);
        assert_eq!(feed(&mut d, &mut t, 50, 5), vec![], "switch-driven stays");
        assert_eq!(d.driven(), Driven::Switch);
    }

    #[test]
    fn a_short_burst_inside_one_window_does_not_switch() {
        let mut d = adaptive();
        let t0 = Instant::now();
        // 40 frames in the first ms, then nothing: 40 over 5 ms = 8 000/s < αu.
        assert_eq!(d.observe(t0, 40), (Driven::Guest, false));
        let mut t = t0;
        assert_eq!(feed(&mut d, &mut t, 10, 0), vec![]);
    }

    #[test]
    fn fixed_modes_never_change() {
        let mut t = Instant::now();
        let mut g = Dispatch::new(DispatchMode::GuestDriven);
        assert_eq!(feed(&mut g, &mut t, 100, 1000), vec![]);
        assert_eq!(g.driven(), Driven::Guest);
        let mut s = Dispatch::new(DispatchMode::SwitchDriven);
        assert_eq!(feed(&mut s, &mut t, 100, 0), vec![]);
        assert_eq!(s.driven(), Driven::Switch);
    }

    proptest::proptest! {
        /// Whatever the polls, the mode changes only when a window closes with a rate
        /// beyond the bound it crosses, and two changes are at least a window apart.
        #[test]
        fn adaptive_changes_only_on_a_window_beyond_its_bound(
            polls in proptest::collection::vec((0u64..3_000, 0usize..64), 1..300),
        ) {
            let window = 5 * MS;
            let mut d = adaptive();
            let mut t = Instant::now();
            let mut last_change: Option<Instant> = None;
            let mut window_start: Option<Instant> = None;
            let mut window_frames = 0u64;
            for (gap_us, frames) in polls {
                t += Duration::from_micros(gap_us);
                let before = d.driven();
                let start = *window_start.get_or_insert(t);
                window_frames += frames as u64;
                let (after, changed) = d.observe(t, frames);
                proptest::prop_assert_eq!(changed, before != after);
                let closed = t.duration_since(start) >= window;
                if closed {
                    let rate = per_second(window_frames, t.duration_since(start));
                    match (before, after) {
                        (Driven::Guest, Driven::Switch) => proptest::prop_assert!(rate > 10_000),
                        (Driven::Switch, Driven::Guest) => proptest::prop_assert!(rate < 1_000),
                        (Driven::Guest, Driven::Guest) => proptest::prop_assert!(rate <= 10_000),
                        (Driven::Switch, Driven::Switch) => proptest::prop_assert!(rate >= 1_000),
                    }
                    window_start = Some(t);
                    window_frames = 0;
                } else {
                    proptest::prop_assert!(!changed);
                }
                if changed {
                    if let Some(prev) = last_change {
                        proptest::prop_assert!(t.duration_since(prev) >= window);
                    }
                    last_change = Some(t);
                }
            }
        }
    }

    #[test]
    fn rates_are_per_second() {
        assert_eq!(per_second(10, MS), 10_000);
        assert_eq!(per_second(0, MS), 0);
        assert_eq!(per_second(u64::MAX, Duration::ZERO), u64::MAX);
    }
}

#[cfg(test)]
mod ring_tests;
