//! How a vhost-user port is driven and when it interrupts its guest, as the control
//! protocol and the state file spell them: short strings such as `adaptive`,
//! `adaptive:1000,10000,5000`, `coalesced:32,50`, which the CLI takes as they are.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Who makes a vhost-user port look at its guest's transmit queue.
///
/// Written `guest-driven`, `switch-driven`, `adaptive` (VNET/P's bounds: 1000 and 10000
/// frames/s over 5000 µs) or `adaptive:LOW_PPS,HIGH_PPS,WINDOW_US`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum VhostDispatch {
    /// The guest's kicks wake the worker.
    GuestDriven,
    /// The worker polls; the guest does not kick.
    SwitchDriven,
    /// By frame rate, with hysteresis.
    Adaptive {
        /// Below this rate over a window: guest-driven.
        low_pps: u64,
        /// Above this rate over a window: switch-driven.
        high_pps: u64,
        /// The window, in microseconds.
        window_us: u64,
    },
}

/// When a vhost-user port interrupts its guest.
///
/// Written `immediate`, `optimistic`, `coalesced` (32 frames or 50 µs) or
/// `coalesced:FRAMES,MAX_DELAY_US`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum VhostNotify {
    /// After every burst.
    Immediate,
    /// At most every `frames` frames or `max_delay_us`, whichever first.
    Coalesced {
        /// Frames per interrupt at most.
        frames: u32,
        /// The longest an interrupt is held back, in microseconds.
        max_delay_us: u64,
    },
    /// VNET/P+ optimistic interrupts.
    Optimistic,
}

/// The longest adaptive window or coalescing delay, in microseconds (10 s).
pub const MAX_PERIOD_US: u64 = 10_000_000;

/// A dispatch mode or notification policy that does not parse or cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VhostModeError(String);

fn numbers<const N: usize>(args: &str, what: &str) -> Result<[u64; N], VhostModeError> {
    let parts: Vec<&str> = args.split(',').map(str::trim).collect();
    let bad = || VhostModeError(format!("{what}: expected {N} numbers separated by commas"));
    if parts.len() != N {
        return Err(bad());
    }
    let mut out = [0u64; N];
    for (slot, part) in out.iter_mut().zip(parts) {
        *slot = part.parse().map_err(|_| bad())?;
    }
    Ok(out)
}

fn check_period(us: u64, what: &str) -> Result<(), VhostModeError> {
    if us == 0 || us > MAX_PERIOD_US {
        return Err(VhostModeError(format!(
            "{what} {us} µs must be between 1 and {MAX_PERIOD_US}"
        )));
    }
    Ok(())
}

impl VhostDispatch {
    /// Checks the bounds and window.
    pub fn validate(&self) -> Result<(), VhostModeError> {
        if let VhostDispatch::Adaptive {
            low_pps,
            high_pps,
            window_us,
        } = *self
        {
            if low_pps >= high_pps {
                return Err(VhostModeError(format!(
                    "adaptive dispatch needs LOW_PPS < HIGH_PPS (got {low_pps} and {high_pps})"
                )));
            }
            check_period(window_us, "adaptive window")?;
        }
        Ok(())
    }
}

impl VhostNotify {
    /// Checks the count and delay.
    pub fn validate(&self) -> Result<(), VhostModeError> {
        if let VhostNotify::Coalesced {
            frames,
            max_delay_us,
        } = *self
        {
            if frames == 0 {
                return Err(VhostModeError("coalesced FRAMES must be at least 1".into()));
            }
            check_period(max_delay_us, "coalesced MAX_DELAY_US")?;
        }
        Ok(())
    }
}

impl FromStr for VhostDispatch {
    type Err = VhostModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, args) = s.split_once(':').map_or((s, None), |(n, a)| (n, Some(a)));
        let mode = match (name, args) {
            ("guest-driven", None) => VhostDispatch::GuestDriven,
            ("switch-driven", None) => VhostDispatch::SwitchDriven,
            ("adaptive", None) => VhostDispatch::Adaptive {
                low_pps: 1_000,
                high_pps: 10_000,
                window_us: 5_000,
            },
            ("adaptive", Some(args)) => {
                let [low_pps, high_pps, window_us] =
                    numbers::<3>(args, "adaptive:LOW_PPS,HIGH_PPS,WINDOW_US")?;
                VhostDispatch::Adaptive {
                    low_pps,
                    high_pps,
                    window_us,
                }
            }
            _ => {
                return Err(VhostModeError(format!(
                    "unknown dispatch mode {s:?}: use guest-driven, switch-driven, adaptive or \
                     adaptive:LOW_PPS,HIGH_PPS,WINDOW_US"
                )))
            }
        };
        mode.validate()?;
        Ok(mode)
    }
}

impl FromStr for VhostNotify {
    type Err = VhostModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, args) = s.split_once(':').map_or((s, None), |(n, a)| (n, Some(a)));
        let policy = match (name, args) {
            ("immediate", None) => VhostNotify::Immediate,
            ("optimistic", None) => VhostNotify::Optimistic,
            ("coalesced", None) => VhostNotify::Coalesced {
                frames: 32,
                max_delay_us: 50,
            },
            ("coalesced", Some(args)) => {
                let [frames, max_delay_us] = numbers::<2>(args, "coalesced:FRAMES,MAX_DELAY_US")?;
                let frames = u32::try_from(frames).map_err(|_| {
                    VhostModeError(format!("coalesced FRAMES {frames} is too large"))
                })?;
                VhostNotify::Coalesced {
                    frames,
                    max_delay_us,
                }
            }
            _ => {
                return Err(VhostModeError(format!(
                    "unknown notification policy {s:?}: use immediate, optimistic, coalesced or \
                     coalesced:FRAMES,MAX_DELAY_US"
                )))
            }
        };
        policy.validate()?;
        Ok(policy)
    }
}

impl fmt::Display for VhostDispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VhostDispatch::GuestDriven => f.write_str("guest-driven"),
            VhostDispatch::SwitchDriven => f.write_str("switch-driven"),
            VhostDispatch::Adaptive {
                low_pps,
                high_pps,
                window_us,
            } => write!(f, "adaptive:{low_pps},{high_pps},{window_us}"),
        }
    }
}

impl fmt::Display for VhostNotify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VhostNotify::Immediate => f.write_str("immediate"),
            VhostNotify::Optimistic => f.write_str("optimistic"),
            VhostNotify::Coalesced {
                frames,
                max_delay_us,
            } => write!(f, "coalesced:{frames},{max_delay_us}"),
        }
    }
}

macro_rules! string_conversions {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = VhostModeError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
    };
}
string_conversions!(VhostDispatch);
string_conversions!(VhostNotify);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_print_and_round_trip_through_json() {
        for s in [
            "guest-driven",
            "switch-driven",
            "adaptive:1000,10000,5000",
            "adaptive:1,2,3",
        ] {
            let d: VhostDispatch = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(serde_json::from_str::<VhostDispatch>(&json).unwrap(), d);
        }
        for s in [
            "immediate",
            "optimistic",
            "coalesced:32,50",
            "coalesced:1,1",
        ] {
            let n: VhostNotify = s.parse().unwrap();
            assert_eq!(n.to_string(), s);
            let json = serde_json::to_string(&n).unwrap();
            assert_eq!(serde_json::from_str::<VhostNotify>(&json).unwrap(), n);
        }
        assert_eq!(
            "adaptive".parse::<VhostDispatch>().unwrap().to_string(),
            "adaptive:1000,10000,5000"
        );
        assert_eq!(
            "coalesced".parse::<VhostNotify>().unwrap().to_string(),
            "coalesced:32,50"
        );
    }

    #[test]
    fn bad_modes_say_what_is_wrong() {
        for bad in [
            "polling",
            "adaptive:10,10,5000",
            "adaptive:1,2",
            "adaptive:1,2,0",
            "guest-driven:1",
        ] {
            assert!(bad.parse::<VhostDispatch>().is_err(), "{bad}");
        }
        for bad in [
            "coalesced:0,50",
            "coalesced:8,0",
            "coalesced:8,99999999",
            "coalesced:x,1",
            "lazy",
        ] {
            assert!(bad.parse::<VhostNotify>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<VhostDispatch>("\"adaptive:5,1,1\"").is_err());
        let e = "adaptive:10,10,5000".parse::<VhostDispatch>().unwrap_err();
        assert!(e.to_string().contains("LOW_PPS < HIGH_PPS"));
    }
}
