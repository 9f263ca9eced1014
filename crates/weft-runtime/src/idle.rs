//! What a worker does when a pass over its ports found nothing.

use std::time::Duration;

/// How an idle worker waits (VNET/P §4.3: immediate, timed, adaptive yield).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleStrategy {
    /// Never sleep: poll again at once (lowest latency, a whole core busy).
    Poll,
    /// Sleep on the ports' readiness descriptors for at most this long each time.
    Sleep(Duration),
    /// Poll for `spin` after the last packet, then sleep, each sleep twice as long as the
    /// one before (from 50 µs) up to `max_sleep`; any packet starts over.
    Adaptive {
        /// How long to keep polling after the last packet.
        spin: Duration,
        /// The longest single sleep.
        max_sleep: Duration,
    },
}

impl Default for IdleStrategy {
    fn default() -> Self {
        IdleStrategy::Adaptive {
            spin: Duration::from_micros(200),
            max_sleep: Duration::from_millis(10),
        }
    }
}

const FIRST_SLEEP: Duration = Duration::from_micros(50);

/// The idle state of one worker.
#[derive(Debug)]
pub(crate) struct Idler {
    strategy: IdleStrategy,
    idle_for: Duration,
    next_sleep: Duration,
}

impl Idler {
    pub(crate) fn new(strategy: IdleStrategy) -> Self {
        Idler {
            strategy,
            idle_for: Duration::ZERO,
            next_sleep: FIRST_SLEEP,
        }
    }

    /// A pass found work.
    pub(crate) fn busy(&mut self) {
        self.idle_for = Duration::ZERO;
        self.next_sleep = FIRST_SLEEP;
    }

    /// A pass that took `elapsed` found nothing: how long to sleep now (`None`: poll again).
    pub(crate) fn idle(&mut self, elapsed: Duration) -> Option<Duration> {
        self.idle_for = self.idle_for.saturating_add(elapsed);
        match self.strategy {
            IdleStrategy::Poll => None,
            IdleStrategy::Sleep(d) => Some(d),
            IdleStrategy::Adaptive { spin, max_sleep } => {
                if self.idle_for < spin {
                    return None;
                }
                let sleep = self.next_sleep.min(max_sleep);
                self.next_sleep = self.next_sleep.saturating_mul(2).min(max_sleep);
                self.idle_for = self.idle_for.saturating_add(sleep);
                Some(sleep)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_spins_then_sleeps_longer_and_longer_up_to_the_cap() {
        let mut i = Idler::new(IdleStrategy::Adaptive {
            spin: Duration::from_micros(100),
            max_sleep: Duration::from_micros(300),
        });
        assert_eq!(i.idle(Duration::from_micros(60)), None);
        assert_eq!(
            i.idle(Duration::from_micros(60)),
            Some(Duration::from_micros(50))
        );
        assert_eq!(i.idle(Duration::ZERO), Some(Duration::from_micros(100)));
        assert_eq!(i.idle(Duration::ZERO), Some(Duration::from_micros(200)));
        assert_eq!(i.idle(Duration::ZERO), Some(Duration::from_micros(300)));
        assert_eq!(i.idle(Duration::ZERO), Some(Duration::from_micros(300)));
        i.busy();
        assert_eq!(
            i.idle(Duration::from_micros(10)),
            None,
            "work starts the spin over"
        );
    }

    #[test]
    fn poll_never_sleeps_and_sleep_always_does() {
        assert_eq!(
            Idler::new(IdleStrategy::Poll).idle(Duration::from_secs(1)),
            None
        );
        let d = Duration::from_millis(2);
        assert_eq!(
            Idler::new(IdleStrategy::Sleep(d)).idle(Duration::ZERO),
            Some(d)
        );
    }
}
