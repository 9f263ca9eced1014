//! Storm control: token buckets bounding how fast one port floods broadcast, multicast and
//! unknown unicast into its switch, as a hardware switch's per-port storm control does.
//!
//! A port's buckets are shared by every lane polling one of its queues (a multiqueue
//! guest's limit is the port's, not each queue's): one lock, taken once per batch and only
//! by a batch holding a frame that floods, and a refill per batch. Within the batch each
//! flooding frame takes a packet token and/or its length in byte tokens; one that finds
//! too few is dropped and counted under its kind. Frames to known destinations never
//! touch the buckets.

use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::counters::DropReason;
use crate::types::Timestamp;

/// The burst a bucket allows when none is configured: 100 ms at the configured rate.
pub const DEFAULT_STORM_BURST: Duration = Duration::from_millis(100);
/// The longest burst accepted.
const MAX_BURST: Duration = Duration::from_secs(10);
/// Highest packet rate accepted (beyond any port's speed).
const MAX_PPS: u64 = 1 << 32;
/// Highest bit rate accepted (4 Tbit/s).
const MAX_BPS: u64 = 1 << 42;
/// A byte bucket holds at least one largest frame (a 64 KiB super-frame), however low
/// its rate, so a configured rate can never block every frame.
const MIN_BYTE_BURST: u128 = 65_536 + 22;

const NANOS: u128 = 1_000_000_000;

/// A rate: packets and/or bits per second. A frame passes when it fits both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimit {
    /// Packets per second.
    pub pps: Option<u64>,
    /// Bits per second (of the Ethernet frame, without preamble and FCS).
    pub bps: Option<u64>,
}

/// Which kind of flooding a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodKind {
    /// To ff:ff:ff:ff:ff:ff.
    Broadcast,
    /// To any other group address.
    Multicast,
    /// To a unicast address the FDB does not know.
    UnknownUnicast,
}

impl FloodKind {
    const fn index(self) -> usize {
        self as usize
    }

    /// The drop counted when a frame of this kind is over its rate.
    pub const fn drop_reason(self) -> DropReason {
        match self {
            FloodKind::Broadcast => DropReason::StormBroadcast,
            FloodKind::Multicast => DropReason::StormMulticast,
            FloodKind::UnknownUnicast => DropReason::StormUnknownUnicast,
        }
    }
}

/// A port's storm control settings: a rate per kind (`None`: unlimited), and the burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StormControl {
    /// Broadcast.
    pub broadcast: Option<RateLimit>,
    /// Multicast other than broadcast.
    pub multicast: Option<RateLimit>,
    /// Unknown unicast.
    pub unknown_unicast: Option<RateLimit>,
    /// How long a full bucket lasts at its rate: the burst allowed after a quiet spell.
    pub burst: Duration,
}

impl Default for StormControl {
    fn default() -> Self {
        StormControl {
            broadcast: None,
            multicast: None,
            unknown_unicast: None,
            burst: DEFAULT_STORM_BURST,
        }
    }
}

/// A storm control setting the switch cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StormConfigError {
    /// A rate of zero or with neither packets nor bits.
    #[error("a {0} rate needs a packet rate and/or a bit rate above zero (or no limit at all)")]
    EmptyRate(&'static str),
    /// A rate beyond what any port carries.
    #[error("a {kind} rate of {value} {unit} is above the supported {max} {unit}")]
    RateTooHigh {
        /// Broadcast, multicast or unknown unicast.
        kind: &'static str,
        /// The rate given.
        value: u64,
        /// The highest accepted.
        max: u64,
        /// pps or bit/s.
        unit: &'static str,
    },
    /// A burst of zero or above ten seconds.
    #[error("a storm control burst of {0:?} is out of range: use 1 ms to 10 s")]
    BadBurst(Duration),
}

impl StormControl {
    /// Whether any kind is limited.
    pub fn is_enabled(&self) -> bool {
        self.broadcast.is_some() || self.multicast.is_some() || self.unknown_unicast.is_some()
    }

    fn rates(&self) -> [(&'static str, Option<RateLimit>); 3] {
        [
            ("broadcast", self.broadcast),
            ("multicast", self.multicast),
            ("unknown-unicast", self.unknown_unicast),
        ]
    }

    /// Checks every rate and the burst.
    pub fn validate(&self) -> Result<(), StormConfigError> {
        if self.burst < Duration::from_millis(1) || self.burst > MAX_BURST {
            return Err(StormConfigError::BadBurst(self.burst));
        }
        for (kind, rate) in self.rates() {
            let Some(rate) = rate else { continue };
            if rate.pps.unwrap_or(0) == 0 && rate.bps.unwrap_or(0) == 0
                || rate.pps == Some(0)
                || rate.bps == Some(0)
            {
                return Err(StormConfigError::EmptyRate(kind));
            }
            for (value, max, unit) in [(rate.pps, MAX_PPS, "pps"), (rate.bps, MAX_BPS, "bit/s")] {
                if let Some(value) = value.filter(|v| *v > max) {
                    return Err(StormConfigError::RateTooHigh {
                        kind,
                        value,
                        max,
                        unit,
                    });
                }
            }
        }
        Ok(())
    }
}

/// One token bucket, in tokens × 10⁹ so that refill is exact in integer nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens added per nanosecond, scaled: the rate per second.
    rate: u128,
    capacity: u128,
    level: u128,
}

impl Bucket {
    fn new(rate_per_sec: u64, burst_ns: u128, min_capacity: u128) -> Bucket {
        let capacity = (u128::from(rate_per_sec) * burst_ns).max(min_capacity * NANOS);
        Bucket {
            rate: u128::from(rate_per_sec),
            capacity,
            level: capacity,
        }
    }

    fn refill(&mut self, elapsed_ns: u128) {
        self.level = (self.level + self.rate * elapsed_ns).min(self.capacity);
    }

    fn has(&self, tokens: u128) -> bool {
        self.level >= tokens * NANOS
    }

    fn take(&mut self, tokens: u128) {
        self.level -= tokens * NANOS;
    }
}

/// The buckets of one kind: packets and/or bytes.
#[derive(Debug, Clone, Copy, Default)]
struct KindBuckets {
    packets: Option<Bucket>,
    bytes: Option<Bucket>,
}

impl KindBuckets {
    fn new(rate: Option<RateLimit>, burst_ns: u128) -> KindBuckets {
        let Some(rate) = rate else {
            return KindBuckets::default();
        };
        KindBuckets {
            packets: rate.pps.map(|pps| Bucket::new(pps, burst_ns, 1)),
            bytes: rate
                .bps
                .map(|bps| Bucket::new(bps / 8, burst_ns, MIN_BYTE_BURST)),
        }
    }

    fn refill(&mut self, elapsed_ns: u128) {
        for b in [&mut self.packets, &mut self.bytes].into_iter().flatten() {
            b.refill(elapsed_ns);
        }
    }

    /// Takes one packet of `len` bytes if both buckets have room for it.
    fn admit(&mut self, len: usize) -> bool {
        let len = len as u128;
        let fits = self.packets.is_none_or(|b| b.has(1)) && self.bytes.is_none_or(|b| b.has(len));
        if fits {
            if let Some(b) = &mut self.packets {
                b.take(1);
            }
            if let Some(b) = &mut self.bytes {
                b.take(len);
            }
        }
        fits
    }
}

/// The buckets of one port, shared by the lanes that poll it.
#[derive(Debug)]
pub struct StormMeter {
    state: Mutex<MeterState>,
}

#[derive(Debug)]
struct MeterState {
    kinds: [KindBuckets; 3],
    /// The time of the last refill (`None` before the first: buckets start full).
    last: Option<u64>,
}

/// A port's storm control: its settings and its (shared) buckets. Clones share the
/// buckets, so every lane's copy of a port's options meters the same traffic.
#[derive(Debug, Clone, Default)]
pub struct StormPolicy {
    config: StormControl,
    meter: Option<Arc<StormMeter>>,
}

impl PartialEq for StormPolicy {
    /// Same settings (the buckets' levels are state, not configuration).
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
    }
}

impl Eq for StormPolicy {}

impl StormPolicy {
    /// Storm control with these settings, buckets full.
    pub fn new(config: StormControl) -> Result<StormPolicy, StormConfigError> {
        config.validate()?;
        let burst_ns = config.burst.as_nanos();
        let meter = config.is_enabled().then(|| {
            Arc::new(StormMeter {
                state: Mutex::new(MeterState {
                    kinds: [
                        KindBuckets::new(config.broadcast, burst_ns),
                        KindBuckets::new(config.multicast, burst_ns),
                        KindBuckets::new(config.unknown_unicast, burst_ns),
                    ],
                    last: None,
                }),
            })
        });
        Ok(StormPolicy { config, meter })
    }

    /// The settings.
    pub fn config(&self) -> &StormControl {
        &self.config
    }

    /// Whether any kind is limited.
    pub fn is_enabled(&self) -> bool {
        self.meter.is_some()
    }

    /// The buckets, refilled up to `now`, for one batch; `None` when nothing is limited.
    pub(crate) fn begin(&self, now: Timestamp) -> Option<StormGate<'_>> {
        let meter = self.meter.as_ref()?;
        // A lane that panicked while holding the lock left the buckets consistent (every
        // change is a single assignment), so they stay usable.
        let mut state = meter.state.lock().unwrap_or_else(PoisonError::into_inner);
        // Lanes read the clock separately: a batch stamped before the last refill adds
        // nothing rather than moving the clock back.
        let elapsed = state.last.map_or(0, |last| now.0.saturating_sub(last));
        if state.last.is_none_or(|last| now.0 > last) {
            state.last = Some(now.0);
        }
        for kind in &mut state.kinds {
            kind.refill(u128::from(elapsed));
        }
        Some(StormGate { state })
    }
}

/// A port's buckets, held for one batch.
pub(crate) struct StormGate<'a> {
    state: MutexGuard<'a, MeterState>,
}

impl StormGate<'_> {
    /// Takes the tokens of one flooding frame of `len` bytes, or says why it is dropped.
    #[inline]
    pub(crate) fn admit(&mut self, kind: FloodKind, len: usize) -> Result<(), DropReason> {
        let admitted = self
            .state
            .kinds
            .get_mut(kind.index())
            .is_none_or(|buckets| buckets.admit(len));
        if admitted {
            Ok(())
        } else {
            Err(kind.drop_reason())
        }
    }
}
