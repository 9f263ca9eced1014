//! The data path's clock: monotonic nanoseconds since the process first asked, as the
//! switch's [`Timestamp`]; and the way back to wall time for captures and logs.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use weft_switch::Timestamp;

static BASE: OnceLock<(Instant, SystemTime)> = OnceLock::new();

/// The instant the data-path clock counts from, and the wall time at that instant.
pub fn clock_base() -> (Instant, SystemTime) {
    *BASE.get_or_init(|| (Instant::now(), SystemTime::now()))
}

/// The data-path clock now.
pub fn now() -> Timestamp {
    at(Instant::now())
}

/// The data-path clock at `instant` (a worker reads the clock once per pass and derives
/// both its timing and the switch's timestamp from that one reading).
pub(crate) fn at(instant: Instant) -> Timestamp {
    let (base, _) = clock_base();
    let since = instant.saturating_duration_since(base);
    Timestamp(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// A data-path timestamp as nanoseconds since the Unix epoch.
pub fn wall_time_ns(t: Timestamp) -> u64 {
    let (_, wall) = clock_base();
    let base = wall
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    base.saturating_add(t.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_maps_to_wall_time() {
        let a = now();
        let b = now();
        assert!(b >= a);
        let later = Instant::now() + std::time::Duration::from_secs(1);
        assert!(at(later).0 >= b.0 + 1_000_000_000);
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let mapped = u128::from(wall_time_ns(b));
        assert!(
            mapped.abs_diff(wall) < 5_000_000_000,
            "within seconds of the wall clock"
        );
    }
}
