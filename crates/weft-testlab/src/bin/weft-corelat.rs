//! weft-corelat: how long a cache line takes to go from one CPU to another and back, now.
//!
//! ```text
//! weft-corelat [--cpus 0,1] [--ms 300]
//! ```
//!
//! Two threads, one pinned to each CPU, pass a counter in one cache line back and forth;
//! every 1000 round trips make one sample, and the median sample is printed in nanoseconds
//! (one line, a whole number). On the shared VMs weft is benchmarked on, the host moves the
//! virtual CPUs between its cores: the same two CPUs measure ~27 ns, ~65 ns or ~305 ns apart,
//! each for seconds to minutes, and every rate measured between the two CPUs moves with it. `scripts/bench-vhost` runs this before and after each measurement, so
//! that measurements can be compared where the CPUs stood equally far apart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

/// Round trips per sample (one clock read each side of them).
const TRIPS_PER_SAMPLE: u32 = 1000;

#[derive(Parser)]
#[command(about = "Cache-line round trip between two CPUs, in ns (median of samples)")]
struct Args {
    /// The two CPUs, as `A,B`.
    #[arg(long, default_value = "0,1")]
    cpus: String,
    /// How long to measure, in milliseconds.
    #[arg(long, default_value_t = 300)]
    ms: u64,
}

/// The line passed between the two threads, alone in its cache line.
#[repr(align(64))]
struct Line(AtomicU64);

fn main() -> Result<()> {
    let args = Args::parse();
    let (a, b) = parse_cpus(&args.cpus)?;
    if args.ms == 0 {
        bail!("--ms must be at least 1");
    }
    let line = Line(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    let mut samples = std::thread::scope(|scope| -> Result<Vec<f64>> {
        // The answering side: whenever the counter is odd, makes it even (one more).
        let answer = scope.spawn(|| -> Result<()> {
            weft_runtime::pin_to(b).with_context(|| format!("cannot pin a thread to CPU {b}"))?;
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = line.0.load(Ordering::Acquire);
                if v != seen && v % 2 == 1 {
                    line.0.store(v + 1, Ordering::Release);
                    seen = v + 1;
                }
                std::hint::spin_loop();
            }
            Ok(())
        });
        let asked = ask(&line, a, b, Duration::from_millis(args.ms));
        stop.store(true, Ordering::Relaxed);
        answer
            .join()
            .map_err(|_| anyhow::anyhow!("the answering thread panicked"))??;
        asked
    })?;
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!("{median:.0}");
    Ok(())
}

/// The asking side, on CPU `cpu`: makes the counter odd and waits for the answer from CPU
/// `other`, for `span`; returns each sample's mean round trip in ns.
fn ask(line: &Line, cpu: usize, other: usize, span: Duration) -> Result<Vec<f64>> {
    weft_runtime::pin_to(cpu).with_context(|| format!("cannot pin a thread to CPU {cpu}"))?;
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut value = 0u64;
    while start.elapsed() < span || samples.is_empty() {
        let t = Instant::now();
        for _ in 0..TRIPS_PER_SAMPLE {
            line.0.store(value + 1, Ordering::Release);
            let mut spins = 0u32;
            while line.0.load(Ordering::Acquire) != value + 2 {
                std::hint::spin_loop();
                // The clock read rarely: an answer that never comes (the answering thread
                // could not be pinned, or never runs) ends the measurement, not hangs it.
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1 << 16) && t.elapsed() > Duration::from_secs(1) {
                    bail!("no answer from CPU {other} in 1 s");
                }
            }
            value += 2;
        }
        samples.push(t.elapsed().as_nanos() as f64 / f64::from(TRIPS_PER_SAMPLE));
    }
    Ok(samples)
}

fn parse_cpus(text: &str) -> Result<(usize, usize)> {
    let parse = |s: &str| {
        s.trim()
            .parse::<usize>()
            .with_context(|| format!("'{s}' is not a CPU number (--cpus A,B, e.g. 0,1)"))
    };
    match text.split_once(',') {
        Some((a, b)) if parse(a)? != parse(b)? => Ok((parse(a)?, parse(b)?)),
        Some(_) => bail!("--cpus needs two different CPUs, got '{text}'"),
        None => bail!("--cpus needs two CPUs as A,B (e.g. 0,1), got '{text}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpus;

    #[test]
    fn two_different_cpus_are_taken_and_anything_else_is_refused() {
        assert_eq!(parse_cpus("0,1").unwrap(), (0, 1));
        assert_eq!(parse_cpus(" 3 , 2").unwrap(), (3, 2));
        for bad in ["0", "0,0", "a,1", "0,1,2", "", ","] {
            assert!(parse_cpus(bad).is_err(), "{bad:?} was taken");
        }
    }
}
