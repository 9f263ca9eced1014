//! What a long run needs beyond a burst: a sender held to a rate, sequence numbers in every
//! datagram so a receiver can tell lost from late, and progress lines while it runs.

use std::time::{Duration, Instant};

/// Where the sequence number sits in a UDP payload: its first eight bytes, big-endian.
pub(crate) const SEQUENCE_LEN: usize = 8;

/// Writes `seq` at the start of a UDP `payload` (at least [`SEQUENCE_LEN`] bytes).
pub(crate) fn put_sequence(payload: &mut [u8], seq: u64) {
    if let Some(head) = payload.get_mut(..SEQUENCE_LEN) {
        head.copy_from_slice(&seq.to_be_bytes());
    }
}

/// The sequence number at the start of a UDP `payload`, if it is long enough to hold one.
pub(crate) fn sequence(payload: &[u8]) -> Option<u64> {
    let head: [u8; SEQUENCE_LEN] = payload.get(..SEQUENCE_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(head))
}

/// Holds a sender to `pps` packets per second (0: as fast as it can), in whole bursts as a
/// busy guest sends (each burst one notification, not one per packet), or every millisecond
/// what is due when a burst takes longer than that to fall due. A sender that falls behind
/// (a full ring, a descheduled process) may catch up by at most four bursts; what it could not
/// send in time beyond that is counted as `shortfall`, not sent late in a flood.
pub(crate) struct Pacer {
    pps: u64,
    start: Instant,
    burst: u64,
    last_release: Instant,
    sleep: Duration,
    pub(crate) shortfall: u64,
}

/// The longest a sender holds back packets that are due.
const MAX_HOLD: Duration = Duration::from_millis(1);
const NANOS: u128 = 1_000_000_000;
/// The shortest sleep worth asking for (the timer's grain).
const MIN_SLEEP: Duration = Duration::from_micros(20);

impl Pacer {
    pub(crate) fn new(pps: u64, burst: usize) -> Pacer {
        let start = Instant::now();
        Pacer {
            pps,
            start,
            burst: burst.max(1) as u64,
            last_release: start,
            sleep: MIN_SLEEP,
            shortfall: 0,
        }
    }

    /// How many packets may go now, at most `max`, given `sent` so far; 0 means wait
    /// (call [`Pacer::wait`]).
    pub(crate) fn allowance(&mut self, sent: u64, max: usize) -> usize {
        self.allowance_at(Instant::now(), sent, max)
    }

    fn allowance_at(&mut self, now: Instant, sent: u64, max: usize) -> usize {
        if self.pps == 0 {
            return max;
        }
        // Whole packets due by now.
        let elapsed = now.duration_since(self.start).as_nanos();
        let due = u64::try_from(elapsed * u128::from(self.pps) / NANOS).unwrap_or(u64::MAX);
        let slack = self.burst * 4;
        let owed = due.saturating_sub(sent + self.shortfall);
        if owed > slack {
            self.shortfall += owed - slack;
        }
        let owed = owed.min(slack);
        if owed >= self.burst || (owed > 0 && now.duration_since(self.last_release) >= MAX_HOLD) {
            self.last_release = now;
            return usize::try_from(owed).map_or(max, |n| n.min(max));
        }
        // Until the rest of a burst is due, or the hold ends.
        let missing = u128::from(self.burst - owed) * NANOS / u128::from(self.pps);
        let missing = Duration::from_nanos(u64::try_from(missing).unwrap_or(u64::MAX));
        let hold_left = MAX_HOLD.saturating_sub(now.duration_since(self.last_release));
        self.sleep = missing.min(hold_left).max(MIN_SLEEP);
        0
    }

    /// Sleeps until the next burst is due (as [`Pacer::allowance`] reckoned it).
    pub(crate) fn wait(&self) {
        std::thread::sleep(self.sleep);
    }
}

/// A receiver's check of the sequence numbers it sees: a number above the next expected one
/// means the ones between were lost (unless they come later: `late`, and no longer lost);
/// the count starts at the first number seen, so what was sent before it is not counted.
#[derive(Default)]
pub(crate) struct SequenceCheck {
    next: Option<u64>,
    gaps: u64,
    pub(crate) late: u64,
    pub(crate) unnumbered: u64,
}

impl SequenceCheck {
    pub(crate) fn see(&mut self, seq: Option<u64>) {
        let Some(seq) = seq else {
            self.unnumbered += 1;
            return;
        };
        match self.next {
            Some(next) if seq < next => self.late += 1,
            Some(next) => {
                self.gaps += seq - next;
                self.next = Some(seq + 1);
            }
            None => self.next = Some(seq + 1),
        }
    }

    /// Numbers skipped and never seen later.
    pub(crate) fn lost(&self) -> u64 {
        self.gaps.saturating_sub(self.late)
    }
}

/// Says when a progress line is due: every `every` (never when zero).
pub(crate) struct Progress {
    every: Option<Duration>,
    start: Instant,
    next: Instant,
}

impl Progress {
    pub(crate) fn new(every_secs: f64) -> Progress {
        let start = Instant::now();
        let every = (every_secs > 0.0).then(|| Duration::from_secs_f64(every_secs));
        Progress {
            every,
            start,
            next: start + every.unwrap_or(Duration::ZERO),
        }
    }

    /// Seconds since the start when a line is due now, else `None`.
    pub(crate) fn due(&mut self) -> Option<f64> {
        let every = self.every?;
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        self.next += every;
        Some(now.duration_since(self.start).as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_count_as_lost_until_the_missing_numbers_arrive_late() {
        let mut check = SequenceCheck::default();
        for seq in [10, 11, 14, 15, 12] {
            check.see(Some(seq));
        }
        assert_eq!(check.lost(), 1, "13 never came; 12 came late");
        assert_eq!(check.late, 1);
        check.see(None);
        assert_eq!(check.unnumbered, 1);
    }

    #[test]
    fn what_was_sent_before_the_first_number_seen_is_not_lost() {
        let mut check = SequenceCheck::default();
        check.see(Some(1_000_000));
        check.see(Some(1_000_001));
        assert_eq!(check.lost(), 0);
    }

    #[test]
    fn sequence_numbers_round_trip_through_a_payload() {
        let mut payload = [0u8; 18];
        put_sequence(&mut payload, 0x0102_0304_0506_0708);
        assert_eq!(sequence(&payload), Some(0x0102_0304_0506_0708));
        assert_eq!(sequence(&payload[..7]), None);
    }

    #[test]
    fn a_pacer_behind_by_more_than_its_slack_counts_the_rest_as_shortfall() {
        let mut pacer = Pacer::new(1_000_000, 16);
        let at = pacer.start + Duration::from_millis(5);
        assert_eq!(pacer.allowance_at(at, 0, 1024), 64, "slack is four bursts");
        assert_eq!(pacer.shortfall, 5000 - 64);
    }

    #[test]
    fn a_pacer_releases_whole_bursts_or_what_is_due_after_a_millisecond() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        // 1000 pps: a burst of 32 takes 32 ms to fall due, so what is due goes out every
        // millisecond instead.
        let mut slow = Pacer::new(1000, 32);
        let t0 = slow.start;
        assert_eq!(slow.allowance_at(t0 + us(500), 0, 32), 0, "nothing due yet");
        assert_eq!(slow.allowance_at(t0 + ms(3), 0, 32), 3);
        assert_eq!(
            slow.allowance_at(t0 + ms(3) + us(500), 3, 32),
            0,
            "held under 1 ms"
        );
        // 10^6 pps: 32 packets fall due in 32 µs; fewer than a burst are held back.
        let mut fast = Pacer::new(1_000_000, 32);
        let t0 = fast.start;
        assert_eq!(
            fast.allowance_at(t0 + us(20), 0, 32),
            0,
            "20 due: less than a burst"
        );
        assert_eq!(fast.allowance_at(t0 + us(40), 0, 32), 32, "a whole burst");
        assert_eq!(
            fast.allowance_at(t0 + us(41), 32, 32),
            0,
            "the next is not due yet"
        );
        assert_eq!(fast.shortfall, 0);
    }
}
