//! Ping-pong through a weft switch: two weft-client endpoints on two vhost-user ports of one
//! switch (run by a weft worker thread, as weftd runs it). The "ping" side sends a 64-byte
//! frame and waits for the "pong" side to send it back; round trips are timed, alternating
//! busy-polling and blocking (adaptive) clients, and summarised as median and p99.
//!
//! ```text
//! cargo run --release -p weft-client --example pingpong -- [round trips per mode] [rounds]
//! ```
//! `scripts/bench-client` runs it pinned with taskset.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_runtime::{IdleStrategy, WorkerConfig};
use weft_vhost::VhostPortConfig;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Any failure of the example, reported by `main`.
type Error = Box<dyn std::error::Error + Send + Sync>;

fn frame(from: u8, to: u8, seq: u64) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, to]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, from]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..22].copy_from_slice(&seq.to_le_bytes());
    f
}

fn seq_of(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(14..22)?.try_into().ok()?))
}

/// The pong side: sends every frame back, until told to stop by sequence `u64::MAX`.
fn pong(mut client: WeftClient, mode: WaitMode) -> Result<WeftClient, Error> {
    let mut batch = RecvBatch::new();
    loop {
        let n = client.recv_wait(&mut batch, 32, TIMEOUT, mode)?;
        if n == 0 {
            continue;
        }
        for f in batch.iter() {
            let Some(seq) = seq_of(f.bytes) else { continue };
            if seq == u64::MAX {
                return Ok(client);
            }
            let back = frame(0xb, 0xa, seq);
            while client.send_batch(&[TxFrame::plain(&back)])? == 0 {
                client.wait_tx_space(TIMEOUT, mode)?;
            }
        }
    }
}

/// Times `n` round trips; returns them in µs, sorted.
fn ping(
    client: &mut WeftClient,
    mode: WaitMode,
    n: usize,
    first_seq: u64,
) -> Result<Vec<f64>, Error> {
    let mut batch = RecvBatch::new();
    let mut rtts = Vec::with_capacity(n);
    for i in 0..n {
        let seq = first_seq + i as u64;
        let f = frame(0xa, 0xb, seq);
        let t = Instant::now();
        client.send_batch(&[TxFrame::plain(&f)])?;
        loop {
            let got = client.recv_wait(&mut batch, 32, TIMEOUT, mode)?;
            if got == 0 {
                return Err(format!("no answer to {seq} within {TIMEOUT:?}").into());
            }
            if batch.iter().any(|f| seq_of(f.bytes) == Some(seq)) {
                break;
            }
        }
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    rtts.sort_by(f64::total_cmp);
    Ok(rtts)
}

/// The `per_mille`-th value of `sorted` (nearest rank).
fn percentile(sorted: &[f64], per_mille: usize) -> f64 {
    let i = (sorted.len().saturating_sub(1) * per_mille).div_ceil(1000);
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let worker_cpu = std::env::var("WORKER_CPU")
        .ok()
        .and_then(|c| c.parse().ok());
    let modes = [
        ("busy-poll", WaitMode::BusyPoll, IdleStrategy::Poll),
        (
            "blocking (adaptive)",
            WaitMode::Adaptive {
                spin: Duration::from_micros(50),
            },
            IdleStrategy::default(),
        ),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut seq = 0u64;
    for round in 0..rounds {
        for (m, (name, mode, idle)) in modes.iter().enumerate() {
            let rig = common::Rig::new(
                &format!("pingpong-{round}-{m}"),
                2,
                VhostPortConfig::default(),
                WorkerConfig {
                    idle: *idle,
                    cpu: worker_cpu,
                    ..WorkerConfig::default()
                },
            );
            let mut a = WeftClient::connect(&rig.sockets[0], ClientConfig::default())?;
            let b = WeftClient::connect(&rig.sockets[1], ClientConfig::default())?;
            rig.wait_running();
            let mode = *mode;
            let ponger = std::thread::spawn(move || pong(b, mode));
            // Warm up (and let the switch learn both addresses).
            ping(&mut a, mode, 100, seq)?;
            seq += 100;
            let rtts = ping(&mut a, mode, n, seq)?;
            seq += n as u64;
            eprintln!(
                "round {round} {name:20} median {:7.1} µs  p99 {:7.1} µs",
                percentile(&rtts, 500),
                percentile(&rtts, 990)
            );
            results[m].extend(rtts);
            a.send_batch(&[TxFrame::plain(&frame(0xa, 0xb, u64::MAX))])?;
            match ponger.join() {
                Ok(result) => drop(result?),
                Err(_) => return Err("the pong thread panicked".into()),
            }
        }
    }
    println!("64 B round trip between two weft-client endpoints through a weft switch ({n} x {rounds} per mode)");
    for (m, (name, _, idle)) in modes.iter().enumerate() {
        let r = &mut results[m];
        r.sort_by(f64::total_cmp);
        println!(
            "{name:20} (worker {idle:?}): median {:7.1} µs  p99 {:7.1} µs",
            percentile(r, 500),
            percentile(r, 990)
        );
    }
    Ok(())
}
