//! `weft top`: per-port rates from two successive `stats` samples, redrawn in the terminal
//! (like `snabb top`), or printed once when stdout is not a terminal.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use weft_control::response::{PortCounters, SwitchStats, WorkerStats};
use weft_control::{Request, Response};

use crate::cli::TopArgs;
use crate::client::Daemon;
use crate::error::CliError;
use crate::output::{si, Align, Table};
use crate::terminal::{Key, Terminal};

/// Rates of one port over one interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortRate {
    /// Switch.
    pub switch: String,
    /// Port.
    pub port: String,
    /// Packets received per second.
    pub rx_pps: f64,
    /// Bits received per second.
    pub rx_bps: f64,
    /// Packets sent per second.
    pub tx_pps: f64,
    /// Bits sent per second.
    pub tx_bps: f64,
    /// Packets dropped per second, all reasons.
    pub drops_ps: f64,
}

/// One refresh of `weft top`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopSample {
    /// Seconds between the two `stats` samples.
    pub interval_secs: f64,
    /// Ports present in both samples, by switch then port.
    pub ports: Vec<PortRate>,
    /// Workers, from the second sample.
    pub workers: Vec<WorkerStats>,
}

struct Snapshot {
    at: Instant,
    switches: Vec<SwitchStats>,
    workers: Vec<WorkerStats>,
}

fn snapshot(daemon: &mut dyn Daemon, switch: Option<&String>) -> Result<Snapshot, CliError> {
    match daemon.call(Request::Stats {
        switch: switch.cloned(),
    })? {
        Response::Stats { switches, workers } => Ok(Snapshot {
            at: Instant::now(),
            switches,
            workers,
        }),
        other => Err(crate::commands::unexpected("stats", &other)),
    }
}

fn drops_total(c: &PortCounters) -> u64 {
    c.drops.values().fold(0, |a, b| a.saturating_add(*b))
}

/// Per-port rates between two samples `elapsed` apart. A counter that went backwards (the
/// port was re-created) counts as zero.
pub fn rates(prev: &[SwitchStats], next: &[SwitchStats], elapsed: Duration) -> Vec<PortRate> {
    let before: BTreeMap<(&str, &str), &PortCounters> = prev
        .iter()
        .flat_map(|s| {
            s.ports
                .iter()
                .map(move |p| ((s.name.as_str(), p.name.as_str()), &p.counters))
        })
        .collect();
    let secs = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)] // rates are approximate by nature
    let per_sec = |a: u64, b: u64| {
        if secs > 0.0 {
            b.saturating_sub(a) as f64 / secs
        } else {
            0.0
        }
    };
    let mut out = Vec::new();
    for s in next {
        for p in &s.ports {
            let Some(old) = before.get(&(s.name.as_str(), p.name.as_str())) else {
                continue;
            };
            let new = &p.counters;
            out.push(PortRate {
                switch: s.name.clone(),
                port: p.name.clone(),
                rx_pps: per_sec(old.rx_packets, new.rx_packets),
                rx_bps: per_sec(old.rx_bytes, new.rx_bytes) * 8.0,
                tx_pps: per_sec(old.tx_packets, new.tx_packets),
                tx_bps: per_sec(old.tx_bytes, new.tx_bytes) * 8.0,
                drops_ps: per_sec(drops_total(old), drops_total(new)),
            });
        }
    }
    out.sort_by(|a, b| (&a.switch, &a.port).cmp(&(&b.switch, &b.port)));
    out
}

fn sample_between(prev: &Snapshot, next: &Snapshot) -> TopSample {
    let elapsed = next.at.saturating_duration_since(prev.at);
    TopSample {
        interval_secs: elapsed.as_secs_f64(),
        ports: rates(&prev.switches, &next.switches, elapsed),
        workers: next.workers.clone(),
    }
}

/// Two samples `args.interval` apart, as rates.
pub fn sample_once(daemon: &mut dyn Daemon, args: &TopArgs) -> Result<TopSample, CliError> {
    let first = snapshot(daemon, args.switch.as_ref())?;
    std::thread::sleep(args.interval);
    let second = snapshot(daemon, args.switch.as_ref())?;
    Ok(sample_between(&first, &second))
}

/// The rates as a table, with worker load below.
pub fn render(sample: &TopSample, interval: Duration) -> String {
    use Align::{Left as L, Right as R};
    let mut out = format!(
        "weft top — every {}s — q or Ctrl-C quits\n\n",
        interval.as_secs_f64()
    );
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PORT", L),
        ("RX-PPS", R),
        ("RX-BPS", R),
        ("TX-PPS", R),
        ("TX-BPS", R),
        ("DROPS/S", R),
    ]);
    for p in &sample.ports {
        t.row([
            p.switch.clone(),
            p.port.clone(),
            si(p.rx_pps),
            si(p.rx_bps),
            si(p.tx_pps),
            si(p.tx_bps),
            si(p.drops_ps),
        ]);
    }
    if t.is_empty() {
        out.push_str("no ports\n");
    } else {
        out.push_str(&t.render());
    }
    if !sample.workers.is_empty() {
        out.push('\n');
        out.push_str(&crate::output::workers_table(&sample.workers).render());
    }
    out
}

const CLEAR: &str = "\x1b[H\x1b[2J";
const ENTER_SCREEN: &str = "\x1b[?1049h\x1b[?25l";
const LEAVE_SCREEN: &str = "\x1b[?25h\x1b[?1049l";

/// Redraws the rates every interval until q, Ctrl-C or SIGTERM.
pub fn run_live(
    daemon: &mut dyn Daemon,
    args: &TopArgs,
    out: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<(), CliError> {
    let write_error = |e| CliError::io("writing to the terminal", e);
    let mut terminal = Terminal::open();
    writeln!(out, "{ENTER_SCREEN}{CLEAR}collecting the first sample...").map_err(write_error)?;
    out.flush().map_err(write_error)?;
    let result = live_loop(daemon, args, out, stop, &mut terminal);
    let _ = write!(out, "{LEAVE_SCREEN}");
    let _ = out.flush();
    result
}

fn live_loop(
    daemon: &mut dyn Daemon,
    args: &TopArgs,
    out: &mut dyn Write,
    stop: &AtomicBool,
    terminal: &mut Terminal,
) -> Result<(), CliError> {
    let mut prev = snapshot(daemon, args.switch.as_ref())?;
    loop {
        let now = Instant::now();
        let deadline = now.checked_add(args.interval).unwrap_or(now);
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if terminal.wait_key(left.min(Duration::from_millis(100))) == Some(Key::Quit) {
                return Ok(());
            }
        }
        let next = snapshot(daemon, args.switch.as_ref())?;
        let text = render(&sample_between(&prev, &next), args.interval);
        write!(out, "{CLEAR}{text}")
            .and_then(|()| out.flush())
            .map_err(|e| CliError::io("writing to the terminal", e))?;
        prev = next;
    }
}

#[cfg(test)]
mod tests;
