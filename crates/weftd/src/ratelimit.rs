//! Rate limits for log lines that someone else can trigger (a client, a guest, the wire):
//! at most `burst` lines per `period`, and the next line allowed says how many were
//! suppressed meanwhile.

use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Window {
    start: Option<Instant>,
    used: u32,
    suppressed: u64,
}

/// A fixed-window rate limit, usable as a `static`.
pub struct RateLimit {
    burst: u32,
    period: Duration,
    window: Mutex<Window>,
}

impl RateLimit {
    /// At most `burst` per `period`.
    pub const fn new(burst: u32, period: Duration) -> Self {
        RateLimit {
            burst,
            period,
            window: Mutex::new(Window {
                start: None,
                used: 0,
                suppressed: 0,
            }),
        }
    }

    /// `Some(suppressed since the last allowed one)` when a line may be logged now.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut w = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if w.start.is_none_or(|s| now.duration_since(s) >= self.period) {
            w.start = Some(now);
            w.used = 0;
        }
        if w.used < self.burst {
            w.used += 1;
            Some(std::mem::take(&mut w.suppressed))
        } else {
            w.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_lines_are_counted_until_the_next_period() {
        let limit = RateLimit::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.allow_at(t0), Some(0));
        assert_eq!(limit.allow_at(t0), Some(0));
        assert_eq!(limit.allow_at(t0), None);
        assert_eq!(limit.allow_at(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.allow_at(t0 + Duration::from_secs(10)), Some(2));
    }
}
