//! weft-seqstream: a 1 ms stream of numbered Ethernet frames, to measure a traffic gap (how
//! many frames a switch loses, and for how long nothing arrives, while it is upgraded or
//! restarted: `scripts/bench-restart`).
//!
//! ```text
//! weft-seqstream --interface ta --dst 02:..:02 --start-at UNIX_MS --count 6000 [--src MAC]
//!                [--from MAC] [--interval-us 1000] [--linger-ms 500] [--ethertype 0x88b5]
//! ```
//!
//! Run inside a network namespace (`ip netns exec NS weft-seqstream ...`). One AF_PACKET
//! socket on `--interface`, bound to an EtherType of its own (0x88b5, IEEE's "local
//! experimental"), so the kernel hands it only such frames. A thread sends `--count` frames,
//! one every `--interval-us`, to `--dst` from `--src` (default: the interface's MAC), on an
//! absolute schedule that starts at `--start-at` (milliseconds since the epoch, so that two
//! instances started apart share one schedule): frame N is due at start + N intervals, a
//! sender that wakes late sends at once what is due (and says how late it was), so delays do
//! not accumulate. Each frame carries its sequence number, its sender's MAC (the stream's
//! origin, which a forwarder rewriting the Ethernet source keeps) and the sender's
//! CLOCK_MONOTONIC time of sending (one clock for every namespace of the machine).
//!
//! Meanwhile the main thread receives frames addressed to `--src` and counts those of the
//! stream it measures: the one whose origin is `--from` (default: any origin other than its
//! own), which it expects to follow the same schedule and count (its peer was started with
//! the same `--start-at`, `--count` and `--interval-us`). It stops `--linger-ms` after the
//! last frame was due and prints one JSON line: what it sent, and of the stream it measured
//! what arrived, was lost (never arrived), duplicated, reordered; the longest interval
//! between consecutive arrivals (its start, relative to the schedule's start; and the 16
//! longest above two intervals, `gaps`, to tell a gap at a known moment from noise) and the
//! longest run of missing sequence numbers (in frames, and where it began); one-way latency.
//! The arithmetic is [`analyze`], tested below.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use weft_packet::MacAddr;

/// Marks a frame of this tool, after the Ethernet header.
const MAGIC: [u8; 4] = *b"WSEQ";
/// Ethernet header, magic, origin MAC + 2 pad bytes, sequence, send time: 44 bytes, padded
/// to the 60-byte minimum (64 with the FCS).
const FRAME_LEN: usize = 60;
const ORIGIN_AT: usize = 18;
const SEQ_AT: usize = 26;
const SENT_AT: usize = 34;

#[derive(Parser)]
#[command(about = "A 1 ms stream of numbered frames, and the gap and loss in the one received")]
struct Args {
    /// The interface to send and receive on (inside the namespace the tool runs in).
    #[arg(long)]
    interface: String,
    /// Where the frames go (the Ethernet destination).
    #[arg(long)]
    dst: MacAddr,
    /// The Ethernet source and origin of the frames sent, and the address frames are
    /// received for [default: the interface's MAC].
    #[arg(long)]
    src: Option<MacAddr>,
    /// The origin of the stream measured [default: any origin other than this one's].
    #[arg(long)]
    from: Option<MacAddr>,
    /// When frame 0 is due, in milliseconds since the Unix epoch [default: 200 ms from now].
    #[arg(long)]
    start_at: Option<u64>,
    /// Frames to send (and expected from the peer).
    #[arg(long)]
    count: u64,
    /// Microseconds between frames.
    #[arg(long, default_value_t = 1000)]
    interval_us: u64,
    /// How long to go on receiving after the last frame was due.
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
    /// The EtherType of the stream's frames.
    #[arg(long, default_value = "0x88b5", value_parser = parse_ethertype)]
    ethertype: u16,
}

fn parse_ethertype(s: &str) -> Result<u16, String> {
    let hex = s.trim_start_matches("0x");
    u16::from_str_radix(hex, 16).map_err(|e| format!("{s}: {e} (want hex, e.g. 0x88b5)"))
}

/// One frame of the measured stream, as it arrived: its sequence number, when it arrived and
/// when it was sent (CLOCK_MONOTONIC, ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    pub(crate) seq: u64,
    pub(crate) at_ns: u64,
    pub(crate) sent_ns: u64,
}

/// What [`analyze`] makes of a stream's arrivals. Times in ms; `*_at_ms` relative to the
/// schedule's start (when frame 0 was due).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    /// Distinct frames of the schedule that arrived.
    pub(crate) received: u64,
    /// Frames of the schedule that never arrived.
    pub(crate) lost: u64,
    /// Arrivals of a frame that had arrived already.
    pub(crate) duplicates: u64,
    /// First arrivals of a frame after a later one of the stream had arrived.
    pub(crate) reordered: u64,
    /// Arrivals with a sequence number outside the schedule.
    pub(crate) out_of_range: u64,
    /// The longest interval between consecutive arrivals, counting from when frame 0 was
    /// due and up to when the last frame was due (so a stream that never arrives, or stops,
    /// has a gap to its end).
    pub(crate) longest_gap_ms: f64,
    /// Where that interval began.
    pub(crate) gap_at_ms: f64,
    /// The [`TOP_GAPS`] longest intervals above two frame intervals, longest first: (where
    /// each began, its length), so that a gap at a known moment can be told from noise
    /// elsewhere in the stream.
    pub(crate) gaps: Vec<(f64, f64)>,
    /// The longest run of consecutive sequence numbers that never arrived, in frames.
    pub(crate) longest_missing_run: u64,
    /// When the first frame of that run was due (0 when nothing is missing).
    pub(crate) missing_run_at_ms: f64,
    /// One-way latency (arrival less sending) of the first arrivals: the largest and the
    /// median.
    pub(crate) latency_max_ms: f64,
    pub(crate) latency_median_ms: f64,
}

/// How many of the longest gaps [`Summary::gaps`] keeps.
pub(crate) const TOP_GAPS: usize = 16;

fn ms(ns: u64) -> f64 {
    // Durations of a run (seconds): exact enough in an f64.
    #[allow(clippy::cast_precision_loss)]
    let x = ns as f64;
    x / 1e6
}

/// The stream's figures, from its `arrivals` in the order they arrived: `count` frames were
/// due, frame N at `start_ns + N * interval_ns`.
pub(crate) fn analyze(
    count: u64,
    start_ns: u64,
    interval_ns: u64,
    arrivals: &[Arrival],
) -> Summary {
    let len = usize::try_from(count).expect("a schedule that fits in memory");
    let mut seen = vec![false; len];
    let (mut received, mut duplicates, mut reordered, mut out_of_range) = (0, 0, 0, 0);
    let mut highest: Option<u64> = None;
    let mut latencies = Vec::with_capacity(arrivals.len());
    let last_due = start_ns + count.saturating_sub(1) * interval_ns;
    // The arrival-time gaps, between virtual points at the first and last frames' due times.
    let mut previous = start_ns;
    let (mut longest_gap, mut gap_at) = (0u64, start_ns);
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    for a in arrivals {
        let Some(slot) = usize::try_from(a.seq).ok().filter(|&i| i < len) else {
            out_of_range += 1;
            continue;
        };
        if seen[slot] {
            duplicates += 1;
            continue;
        }
        seen[slot] = true;
        received += 1;
        if highest.is_some_and(|h| a.seq < h) {
            reordered += 1;
        }
        highest = highest.max(Some(a.seq));
        latencies.push(a.at_ns.saturating_sub(a.sent_ns));
        let gap = a.at_ns.saturating_sub(previous);
        if gap > 2 * interval_ns {
            gaps.push((previous, gap));
        }
        if gap > longest_gap {
            (longest_gap, gap_at) = (gap, previous);
        }
        previous = previous.max(a.at_ns);
    }
    if last_due > previous + 2 * interval_ns {
        gaps.push((previous, last_due - previous));
    }
    if last_due > previous && last_due - previous > longest_gap {
        (longest_gap, gap_at) = (last_due - previous, previous);
    }
    gaps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    gaps.truncate(TOP_GAPS);
    let (mut run, mut run_start, mut longest_run, mut longest_run_start) = (0u64, 0u64, 0u64, 0u64);
    for (seq, &got) in (0u64..).zip(&seen) {
        if got {
            run = 0;
            continue;
        }
        if run == 0 {
            run_start = seq;
        }
        run += 1;
        if run > longest_run {
            (longest_run, longest_run_start) = (run, run_start);
        }
    }
    latencies.sort_unstable();
    Summary {
        received,
        lost: count - received,
        duplicates,
        reordered,
        out_of_range,
        longest_gap_ms: ms(longest_gap),
        gap_at_ms: ms(gap_at - start_ns),
        gaps: gaps
            .iter()
            .map(|&(at, len)| (ms(at - start_ns), ms(len)))
            .collect(),
        longest_missing_run: longest_run,
        missing_run_at_ms: ms(longest_run_start * interval_ns),
        latency_max_ms: latencies.last().copied().map_or(0.0, ms),
        latency_median_ms: latencies.get(latencies.len() / 2).copied().map_or(0.0, ms),
    }
}

fn errno(what: &str) -> anyhow::Error {
    anyhow::Error::new(std::io::Error::last_os_error()).context(what.to_string())
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; a valid clock cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Sleeps until CLOCK_MONOTONIC reads `at_ns`.
fn sleep_until(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(at_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::try_from(at_ns % 1_000_000_000).unwrap_or(0),
    };
    // SAFETY: clock_nanosleep reads the timespec; no remainder is asked for (TIMER_ABSTIME).
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// The size of a `sockaddr_ll` (20 bytes).
#[allow(clippy::cast_possible_truncation)]
const SLL_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;

/// A link-layer address for EtherType `ethertype` on the interface `index`.
fn sockaddr_ll(ethertype: u16, index: i32) -> libc::sockaddr_ll {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = u16::try_from(libc::AF_PACKET).unwrap_or(17);
    sll.sll_protocol = ethertype.to_be();
    sll.sll_ifindex = index;
    sll
}

/// An AF_PACKET socket on `interface`, bound to `ethertype`; the interface's index and MAC.
fn open(interface: &str, ethertype: u16) -> Result<(OwnedFd, i32, MacAddr)> {
    let proto = ethertype.to_be();
    // SAFETY: a plain socket(2) call; the descriptor is owned at once.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    if raw < 0 {
        return Err(errno("socket(AF_PACKET) (needs CAP_NET_RAW)"));
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let name = std::ffi::CString::new(interface)?;
    // SAFETY: a NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        bail!("no interface {interface} here");
    }
    let index = i32::try_from(index)?;
    let sll = sockaddr_ll(ethertype, index);
    // SAFETY: bind reads `sll`, whose size is given.
    let r = unsafe { libc::bind(fd.as_raw_fd(), std::ptr::from_ref(&sll).cast(), SLL_LEN) };
    if r < 0 {
        return Err(errno(&format!("binding to {interface}")));
    }
    let mac = std::fs::read_to_string(format!("/sys/class/net/{interface}/address"))
        .with_context(|| format!("the MAC of {interface}"))?;
    let mac = mac
        .trim()
        .parse::<MacAddr>()
        .map_err(|e| anyhow::anyhow!("the MAC of {interface}: {e}"))?;
    Ok((fd, index, mac))
}

fn frame(dst: MacAddr, src: MacAddr, ethertype: u16, seq: u64, sent_ns: u64) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f[14..18].copy_from_slice(&MAGIC);
    f[ORIGIN_AT..ORIGIN_AT + 6].copy_from_slice(&src.0);
    f[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_be_bytes());
    f[SENT_AT..SENT_AT + 8].copy_from_slice(&sent_ns.to_be_bytes());
    f
}

/// What the sender did.
#[derive(Default)]
struct Sent {
    sent: u64,
    errors: u64,
    first_error: Option<String>,
    late_max_ns: u64,
}

fn send_loop(
    fd: &OwnedFd,
    index: i32,
    dst: MacAddr,
    src: MacAddr,
    ethertype: u16,
    (start_ns, interval_ns, count): (u64, u64, u64),
) -> Sent {
    let mut to = sockaddr_ll(ethertype, index);
    to.sll_halen = 6;
    to.sll_addr[..6].copy_from_slice(&dst.0);
    let mut out = Sent::default();
    for seq in 0..count {
        let due = start_ns + seq * interval_ns;
        sleep_until(due);
        let now = now_ns(libc::CLOCK_MONOTONIC);
        out.late_max_ns = out.late_max_ns.max(now.saturating_sub(due));
        let f = frame(dst, src, ethertype, seq, now);
        // SAFETY: sendto reads `f` and `to`, whose sizes are given.
        let r = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                f.as_ptr().cast(),
                f.len(),
                0,
                std::ptr::from_ref(&to).cast(),
                SLL_LEN,
            )
        };
        if r < 0 {
            out.errors += 1;
            if out.first_error.is_none() {
                out.first_error = Some(format!("frame {seq}: {}", std::io::Error::last_os_error()));
            }
        } else {
            out.sent += 1;
        }
    }
    out
}

/// Receives until CLOCK_MONOTONIC reads `until_ns`: the arrivals of the stream from `from`
/// (or any origin but `me`), addressed to `me`; and how many other frames of this tool came.
fn receive(
    fd: RawFd,
    me: MacAddr,
    from: Option<MacAddr>,
    until_ns: u64,
) -> Result<(Vec<Arrival>, u64)> {
    let mut arrivals = Vec::new();
    let mut others = 0u64;
    let mut buf = [0u8; 2048];
    loop {
        let now = now_ns(libc::CLOCK_MONOTONIC);
        if now >= until_ns {
            return Ok((arrivals, others));
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let wait = i32::try_from((until_ns - now) / 1_000_000 + 1).unwrap_or(i32::MAX);
        // SAFETY: one pollfd, as counted.
        let r = unsafe { libc::poll(&mut pfd, 1, wait.min(100)) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("poll");
        }
        loop {
            let mut sll = sockaddr_ll(0, 0);
            let mut sll_len = SLL_LEN;
            // SAFETY: recvfrom writes at most the given lengths into `buf` and `sll`.
            let n = unsafe {
                libc::recvfrom(
                    fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    std::ptr::from_mut(&mut sll).cast(),
                    &mut sll_len,
                )
            };
            let at_ns = now_ns(libc::CLOCK_MONOTONIC);
            let Ok(n) = usize::try_from(n) else {
                break; // EAGAIN: drained
            };
            if sll.sll_pkttype == libc::PACKET_OUTGOING || n < SENT_AT + 8 {
                continue;
            }
            let f = &buf[..n];
            if f[0..6] != me.0 || f[14..18] != MAGIC {
                continue;
            }
            let origin = &f[ORIGIN_AT..ORIGIN_AT + 6];
            let ours = match from {
                Some(m) => origin == m.0,
                None => origin != me.0,
            };
            if !ours {
                others += 1;
                continue;
            }
            let word = |at: usize| u64::from_be_bytes(f[at..at + 8].try_into().unwrap_or([0; 8]));
            arrivals.push(Arrival {
                seq: word(SEQ_AT),
                at_ns,
                sent_ns: word(SENT_AT),
            });
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.count == 0 || args.interval_us == 0 {
        bail!("--count and --interval-us must be above 0");
    }
    let (fd, index, if_mac) = open(&args.interface, args.ethertype)?;
    let src = args.src.unwrap_or(if_mac);
    let interval_ns = args.interval_us * 1000;
    // The schedule's start on this process's monotonic clock, from the shared wall-clock one.
    let real = now_ns(libc::CLOCK_REALTIME);
    let mono = now_ns(libc::CLOCK_MONOTONIC);
    let start_real = args
        .start_at
        .map_or(real + 200_000_000, |ms| ms * 1_000_000);
    if start_real < real {
        bail!(
            "--start-at is {} ms in the past",
            (real - start_real) / 1_000_000
        );
    }
    let start_ns = mono + (start_real - real);
    let end_ns = start_ns + (args.count - 1) * interval_ns + args.linger_ms * 1_000_000;
    let fd = Arc::new(fd);
    let sender = {
        let fd = Arc::clone(&fd);
        let (dst, ethertype, count) = (args.dst, args.ethertype, args.count);
        std::thread::spawn(move || {
            send_loop(
                &fd,
                index,
                dst,
                src,
                ethertype,
                (start_ns, interval_ns, count),
            )
        })
    };
    let (arrivals, others) = receive(fd.as_raw_fd(), src, args.from, end_ns)?;
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("the sender panicked"))?;
    let s = analyze(args.count, start_ns, interval_ns, &arrivals);
    let json = serde_json::json!({
        "interface": args.interface,
        "src": src.to_string(),
        "dst": args.dst.to_string(),
        "start_unix_ms": start_real / 1_000_000,
        "count": args.count,
        "interval_us": args.interval_us,
        "sent": sent.sent,
        "send_errors": sent.errors,
        "first_send_error": sent.first_error,
        "send_late_max_ms": ms(sent.late_max_ns),
        "received": s.received,
        "lost": s.lost,
        "duplicates": s.duplicates,
        "reordered": s.reordered,
        "out_of_range": s.out_of_range,
        "others": others,
        "longest_gap_ms": s.longest_gap_ms,
        "gap_at_ms": s.gap_at_ms,
        "gaps": s.gaps.iter().map(|&(at, len)| [at, len]).collect::<Vec<_>>(),
        "longest_missing_run": s.longest_missing_run,
        "missing_run_at_ms": s.missing_run_at_ms,
        "latency_max_ms": s.latency_max_ms,
        "latency_median_ms": s.latency_median_ms,
    });
    println!("{json}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 5_000 * MS;

    /// Frame `seq` arriving `delay_ms` after it was due (sent when due).
    fn on_time(seq: u64, delay_ms: u64) -> Arrival {
        Arrival {
            seq,
            at_ns: T0 + seq * MS + delay_ms * MS,
            sent_ns: T0 + seq * MS,
        }
    }

    #[test]
    fn a_whole_stream_has_no_loss_and_one_interval_gaps() {
        let arrivals: Vec<_> = (0..100).map(|s| on_time(s, 0)).collect();
        let s = analyze(100, T0, MS, &arrivals);
        assert_eq!(
            (s.received, s.lost, s.duplicates, s.reordered),
            (100, 0, 0, 0)
        );
        assert!((s.longest_gap_ms - 1.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.longest_missing_run, 0);
        assert!(s.latency_max_ms.abs() < 1e-9);
    }

    #[test]
    fn a_hole_is_lost_frames_a_missing_run_and_a_gap_where_it_is() {
        // Frames 40..=69 never arrive.
        let arrivals: Vec<_> = (0..100)
            .filter(|s| !(40..70).contains(s))
            .map(|s| on_time(s, 0))
            .collect();
        let s = analyze(100, T0, MS, &arrivals);
        assert_eq!((s.received, s.lost), (70, 30));
        assert_eq!(s.longest_missing_run, 30);
        assert!((s.missing_run_at_ms - 40.0).abs() < 1e-9, "{s:?}");
        // From frame 39's arrival to frame 70's.
        assert!((s.longest_gap_ms - 31.0).abs() < 1e-9, "{s:?}");
        assert!((s.gap_at_ms - 39.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.gaps, vec![(39.0, 31.0)]);
    }

    #[test]
    fn the_longest_gaps_are_listed_longest_first_with_where_they_began() {
        // Frames 10..13 and 50..60 missing: gaps of 4 and 11 ms; the rest 1 ms apart.
        let arrivals: Vec<_> = (0..100)
            .filter(|s| !(10..13).contains(s) && !(50..60).contains(s))
            .map(|s| on_time(s, 0))
            .collect();
        let s = analyze(100, T0, MS, &arrivals);
        assert_eq!(s.gaps, vec![(49.0, 11.0), (9.0, 4.0)]);
    }

    #[test]
    fn frames_held_back_and_delivered_late_make_a_gap_without_loss() {
        // 20 frames queued during a hand-over, all delivered at once when frame 60 was due.
        let arrivals: Vec<_> = (0..100)
            .map(|s| {
                if (40..60).contains(&s) {
                    Arrival {
                        seq: s,
                        at_ns: T0 + 60 * MS,
                        sent_ns: T0 + s * MS,
                    }
                } else {
                    on_time(s, 0)
                }
            })
            .collect();
        let s = analyze(100, T0, MS, &arrivals);
        assert_eq!((s.lost, s.longest_missing_run), (0, 0));
        assert!((s.longest_gap_ms - 21.0).abs() < 1e-9, "{s:?}");
        assert!((s.latency_max_ms - 20.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn duplicates_reordering_and_strangers_are_counted_apart() {
        let mut arrivals: Vec<_> = (0..10).map(|s| on_time(s, 0)).collect();
        arrivals.swap(3, 4);
        arrivals.push(on_time(5, 1));
        arrivals.push(on_time(99, 0));
        let s = analyze(10, T0, MS, &arrivals);
        assert_eq!(
            (
                s.received,
                s.lost,
                s.duplicates,
                s.reordered,
                s.out_of_range
            ),
            (10, 0, 1, 1, 1)
        );
    }

    #[test]
    fn a_stream_that_stops_has_a_gap_to_the_end_and_one_that_never_came_is_all_gap() {
        let arrivals: Vec<_> = (0..50).map(|s| on_time(s, 0)).collect();
        let s = analyze(100, T0, MS, &arrivals);
        assert_eq!((s.lost, s.longest_missing_run), (50, 50));
        // From frame 49's arrival to when frame 99 was due.
        assert!((s.longest_gap_ms - 50.0).abs() < 1e-9, "{s:?}");
        assert!((s.gap_at_ms - 49.0).abs() < 1e-9, "{s:?}");

        let s = analyze(100, T0, MS, &[]);
        assert_eq!((s.received, s.lost, s.longest_missing_run), (0, 100, 100));
        assert!((s.longest_gap_ms - 99.0).abs() < 1e-9, "{s:?}");
        assert!(s.missing_run_at_ms.abs() < 1e-9);
    }
}
