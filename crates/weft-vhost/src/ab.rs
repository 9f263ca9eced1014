//! An in-process A/B switch for measuring small data-path changes on a noisy machine.
//!
//! On the shared VMs weft is measured on, the rate moves between plateaus (about 5, 12 and
//! 18 Mpps at 64 B) every few seconds, whatever runs: runs of two builds, seconds apart,
//! cannot resolve a 10 % change. Here one build carries both variants and flips between
//! them every few hundred milliseconds, so each phase is compared with its neighbours on
//! the same plateau. A change under test is written behind [`variant`]; with the
//! `ab-toggle` feature off (always, outside such a measurement) [`variant`] is a constant
//! `false` and nothing else here exists. `scripts/ab-vhost` builds, runs and reads it.
//!
//! With the feature on, a thread started with the first transmit half flips the variant
//! bits `WEFT_AB_MASK` every `WEFT_AB_MS` milliseconds (default 500) and writes one line
//! per phase to `WEFT_AB_OUT` (default `/tmp/weft-ab.txt`): the bits it ran with and the
//! frames delivered to guests per second in it, in millions. The count assumes one worker
//! thread, as in the benchmark (with several, some additions would be lost).

#[cfg(feature = "ab-toggle")]
mod toggle {
    use std::io::Write;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use std::sync::Once;
    use std::time::{Duration, Instant};

    static BITS: AtomicU32 = AtomicU32::new(0);
    static DELIVERED: AtomicU64 = AtomicU64::new(0);
    static START: Once = Once::new();

    /// True while variant bit `bit` is on.
    #[inline(always)]
    pub fn variant(bit: u32) -> bool {
        BITS.load(Ordering::Relaxed) & bit != 0
    }

    /// Counts frames delivered to a guest (one worker thread writes: a load and a store,
    /// no locked instruction in the path being measured).
    #[inline(always)]
    pub(crate) fn delivered(frames: u64) {
        let n = DELIVERED.load(Ordering::Relaxed);
        DELIVERED.store(n.wrapping_add(frames), Ordering::Relaxed);
    }

    /// Starts the flipping thread once, if `WEFT_AB_MASK` is set.
    pub(crate) fn start() {
        START.call_once(|| {
            let env = |name: &str| std::env::var(name).ok();
            let Some(mask) = env("WEFT_AB_MASK").and_then(|m| m.parse::<u32>().ok()) else {
                return;
            };
            let phase = env("WEFT_AB_MS")
                .and_then(|m| m.parse().ok())
                .unwrap_or(500u64);
            let out = env("WEFT_AB_OUT").unwrap_or_else(|| "/tmp/weft-ab.txt".into());
            let Ok(mut file) = std::fs::File::create(&out) else {
                tracing::warn!(path = %out, "ab-toggle: cannot create the output file");
                return;
            };
            let spawned = std::thread::Builder::new()
                .name("weft-ab".into())
                .spawn(move || loop {
                    let (before, since) = (DELIVERED.load(Ordering::Relaxed), Instant::now());
                    std::thread::sleep(Duration::from_millis(phase));
                    let frames = DELIVERED.load(Ordering::Relaxed).wrapping_sub(before);
                    let bits = BITS.load(Ordering::Relaxed);
                    let rate = frames as f64 / since.elapsed().as_secs_f64() / 1e6;
                    if writeln!(file, "{bits} {rate:.3}").is_err() {
                        return;
                    }
                    BITS.store(bits ^ mask, Ordering::Relaxed);
                });
            if spawned.is_err() {
                tracing::warn!("ab-toggle: cannot start the flipping thread");
            }
        });
    }
}

#[cfg(not(feature = "ab-toggle"))]
mod toggle {
    /// Always false: the `ab-toggle` feature is off.
    #[inline(always)]
    pub const fn variant(_bit: u32) -> bool {
        false
    }

    #[inline(always)]
    pub(crate) fn delivered(_frames: u64) {}

    pub(crate) fn start() {}
}

pub use toggle::variant;
pub(crate) use toggle::{delivered, start};
