//! How a port is driven (VNET/P §4.3 dispatch modes) and when it interrupts its guest
//! (VNET/P+ §IV.A optimistic interrupts): the settings and their checks.

use std::time::Duration;

/// Who makes the port look at the guest's transmit queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchMode {
    /// The guest kicks after queueing frames and the worker reacts to the kick: lowest
    /// latency at low rates, and an idle worker may sleep.
    GuestDriven,
    /// The guest is asked never to kick and the worker keeps polling the ring: no guest
    /// exits, highest throughput, a polling worker.
    SwitchDriven,
    /// Guest-driven at low rates, switch-driven at high ones, with hysteresis: after a
    /// window above `high_pps` go switch-driven, after one below `low_pps` go back.
    Adaptive {
        /// αl: below this many frames per second over a window, go guest-driven.
        low_pps: u64,
        /// αu: above this many frames per second over a window, go switch-driven.
        high_pps: u64,
        /// ω: how long the rate is measured before deciding.
        window: Duration,
    },
}

impl DispatchMode {
    /// Adaptive with VNET/P's bounds: 10³ and 10⁴ frames/s over 5 ms.
    pub const ADAPTIVE_DEFAULT: DispatchMode = DispatchMode::Adaptive {
        low_pps: 1_000,
        high_pps: 10_000,
        window: Duration::from_millis(5),
    };
}

impl Default for DispatchMode {
    fn default() -> Self {
        Self::ADAPTIVE_DEFAULT
    }
}

/// When the port interrupts the guest after putting buffers in a used ring (received
/// frames, or completed transmissions). Every policy honours the guest's own suppression
/// (`EVENT_IDX`'s `used_event`, or the `NO_INTERRUPT` flag): a policy only decides when
/// the port asks, never makes it interrupt a guest that said it needs none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotifyPolicy {
    /// After every burst.
    #[default]
    Immediate,
    /// At most once per `frames` frames or `max_delay`, whichever comes first; a
    /// notification held back is sent once `max_delay` has passed even if traffic stops.
    Coalesced {
        /// Frames after which the held-back notification goes out (at least 1).
        frames: u32,
        /// The longest a notification is held back.
        max_delay: Duration,
    },
    /// VNET/P+ optimistic interrupts: an early interrupt as soon as the first frames of a
    /// burst are in the used ring, and at the end of coalescing a second one only if the
    /// receive density since that early interrupt is "just right" (see `notify.rs`).
    Optimistic,
}

/// The longest window or delay a setting may ask for.
pub const MAX_MODE_PERIOD: Duration = Duration::from_secs(10);

/// A dispatch or notification setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// The adaptive bounds are not ordered.
    #[error("adaptive dispatch needs low_pps < high_pps (got {low} and {high}): the gap is the hysteresis")]
    BoundsNotOrdered {
        /// αl given.
        low: u64,
        /// αu given.
        high: u64,
    },
    /// The adaptive window is zero or too long.
    #[error("adaptive dispatch window {0:?} must be above zero and at most 10 s")]
    BadWindow(Duration),
    /// A coalescing count of zero.
    #[error("coalesced notifications need frames >= 1")]
    ZeroFrames,
    /// The coalescing delay is zero or too long.
    #[error("coalesced notification delay {0:?} must be above zero and at most 10 s")]
    BadDelay(Duration),
}

impl DispatchMode {
    /// Checks the bounds and window.
    pub fn validate(&self) -> Result<(), ModeError> {
        if let DispatchMode::Adaptive {
            low_pps,
            high_pps,
            window,
        } = *self
        {
            if low_pps >= high_pps {
                return Err(ModeError::BoundsNotOrdered {
                    low: low_pps,
                    high: high_pps,
                });
            }
            if window.is_zero() || window > MAX_MODE_PERIOD {
                return Err(ModeError::BadWindow(window));
            }
        }
        Ok(())
    }
}

impl NotifyPolicy {
    /// Checks the coalescing count and delay.
    pub fn validate(&self) -> Result<(), ModeError> {
        if let NotifyPolicy::Coalesced { frames, max_delay } = *self {
            if frames == 0 {
                return Err(ModeError::ZeroFrames);
            }
            if max_delay.is_zero() || max_delay > MAX_MODE_PERIOD {
                return Err(ModeError::BadDelay(max_delay));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_adaptive_with_vnetp_bounds_and_immediate_notifications() {
        assert_eq!(
            DispatchMode::default(),
            DispatchMode::Adaptive {
                low_pps: 1_000,
                high_pps: 10_000,
                window: Duration::from_millis(5)
            }
        );
        assert_eq!(DispatchMode::default().validate(), Ok(()));
        assert_eq!(NotifyPolicy::default(), NotifyPolicy::Immediate);
    }

    #[test]
    fn adaptive_bounds_must_leave_a_gap_and_the_window_a_length() {
        let mode = |low_pps, high_pps, window| DispatchMode::Adaptive {
            low_pps,
            high_pps,
            window,
        };
        let ms = Duration::from_millis;
        assert_eq!(
            mode(10, 10, ms(5)).validate(),
            Err(ModeError::BoundsNotOrdered { low: 10, high: 10 })
        );
        assert!(mode(20, 10, ms(5)).validate().is_err());
        assert_eq!(
            mode(1, 10, Duration::ZERO).validate(),
            Err(ModeError::BadWindow(Duration::ZERO))
        );
        assert!(mode(1, 10, Duration::from_secs(11)).validate().is_err());
        assert_eq!(mode(0, 1, ms(1)).validate(), Ok(()));
    }

    #[test]
    fn coalescing_needs_a_count_and_a_delay() {
        let us = Duration::from_micros;
        let c = |frames, max_delay| NotifyPolicy::Coalesced { frames, max_delay };
        assert_eq!(c(0, us(50)).validate(), Err(ModeError::ZeroFrames));
        assert_eq!(
            c(8, Duration::ZERO).validate(),
            Err(ModeError::BadDelay(Duration::ZERO))
        );
        assert!(c(8, Duration::from_secs(60)).validate().is_err());
        assert_eq!(c(1, us(1)).validate(), Ok(()));
        assert_eq!(NotifyPolicy::Optimistic.validate(), Ok(()));
    }
}
