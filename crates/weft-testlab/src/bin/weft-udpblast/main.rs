//! weft-udpblast: a batch UDP generator and sink for small-packet rates, because iperf3's UDP
//! sender (one `write` per datagram) tops out at a few tens of thousands of packets per second
//! here, whatever carries the packets.
//!
//! ```text
//! weft-udpblast send --dst 10.0.0.2:9000 --size 18 --seconds 5 [--burst 64]
//! weft-udpblast recv --bind 10.0.0.2:9000 --seconds 10 [--idle-ms 1000]
//! weft-udpblast client-send --socket /run/weft/a.sock --seconds 5 [--burst 64]
//! weft-udpblast client-recv --socket /run/weft/b.sock --seconds 10
//! weft-udpblast client-recv --socket /run/weft/b.sock --listen --seconds 600 --report-secs 10
//! ```
//!
//! `send` hands the kernel `--burst` datagrams per `sendmmsg` on a connected socket; `recv`
//! takes up to 256 per `recvmmsg`. Each prints one JSON line: packets, the seconds they took
//! and packets per second. The receiver's rate is over the span from its first datagram to its
//! last (it stops `--idle-ms` after the last, or at `--seconds`), so start-up and the wait for
//! the sender do not dilute it. `--size 18` makes 64-byte Ethernet frames (FCS counted).
//! `client-send` / `client-recv` do the same as weft-client endpoints on weft `vhost-user`
//! ports (`client.rs`); with `--listen` they serve the socket for a weft port in client mode.
//!
//! For long runs (`scripts/soak`): `--pps` holds a sender to a rate; every datagram carries a
//! sequence number, so receivers report `lost` (numbers skipped and never seen) apart from
//! `late`; `--report-secs` prints a progress line (the same fields, `"progress":true`) that
//! often while it runs (`pace.rs`).

mod client;
mod pace;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use weft_client::ClientConfig;
use weft_packet::MacAddr;

/// Datagrams per `recvmmsg`.
const RECV_BATCH: usize = 256;
/// Largest datagram the receiver takes whole (longer ones are counted, truncated).
const RECV_BUFFER: usize = 2048;
/// Socket buffer asked for on both sides, so a burst is not dropped at the socket.
const SOCKET_BUFFER: libc::c_int = 8 << 20;

#[derive(Parser)]
#[command(about = "Batch UDP generator and sink (sendmmsg / recvmmsg)")]
struct Args {
    #[command(subcommand)]
    command: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Send datagrams of `--size` bytes to `--dst` for `--seconds`, `--burst` per system call.
    Send {
        /// Destination address and port.
        #[arg(long)]
        dst: SocketAddr,
        /// UDP payload bytes per datagram (18 = 64-byte Ethernet frames).
        #[arg(long, default_value_t = 18)]
        size: usize,
        /// How long to send.
        #[arg(long)]
        seconds: f64,
        /// Datagrams per `sendmmsg`.
        #[arg(long, default_value_t = 64)]
        burst: usize,
        /// Packets per second to hold to (0: as fast as possible).
        #[arg(long, default_value_t = 0)]
        pps: u64,
        /// Print a progress line this often, in seconds (0: only the last line).
        #[arg(long, default_value_t = 0.0)]
        report_secs: f64,
    },
    /// Count datagrams arriving at `--bind` for up to `--seconds`.
    Recv {
        /// Address and port to receive on.
        #[arg(long)]
        bind: SocketAddr,
        /// Longest time to listen.
        #[arg(long)]
        seconds: f64,
        /// Stop this long after the last datagram (once one has arrived).
        #[arg(long, default_value_t = 1000)]
        idle_ms: u64,
        /// Print a progress line this often, in seconds (0: only the last line).
        #[arg(long, default_value_t = 0.0)]
        report_secs: f64,
    },
    /// Send 64-byte (with `--size 18`) Ethernet/IPv4/UDP frames as a weft-client endpoint on
    /// the vhost-user socket `--socket`, `--burst` per `send_batch`, to `client-recv`'s MAC.
    ClientSend {
        /// The weft vhost-user port's socket.
        #[arg(long)]
        socket: PathBuf,
        /// UDP payload bytes per frame.
        #[arg(long, default_value_t = 18)]
        size: usize,
        /// How long to send.
        #[arg(long)]
        seconds: f64,
        /// Frames per `send_batch`.
        #[arg(long, default_value_t = 64)]
        burst: usize,
        /// Packets per second to hold to (0: as fast as possible).
        #[arg(long, default_value_t = 0)]
        pps: u64,
        /// Print a progress line this often, in seconds (0: only the last line).
        #[arg(long, default_value_t = 0.0)]
        report_secs: f64,
        /// Listen on `--socket` and serve one connection (for a port in client mode).
        #[arg(long)]
        listen: bool,
    },
    /// Count frames arriving at a weft-client endpoint on the vhost-user socket `--socket`.
    ClientRecv {
        /// The weft vhost-user port's socket.
        #[arg(long)]
        socket: PathBuf,
        /// Longest time to listen.
        #[arg(long)]
        seconds: f64,
        /// Stop this long after the last frame (once one has arrived).
        #[arg(long, default_value_t = 1000)]
        idle_ms: u64,
        /// Print a progress line this often, in seconds (0: only the last line).
        #[arg(long, default_value_t = 0.0)]
        report_secs: f64,
        /// Listen on `--socket` and serve one connection (for a port in client mode).
        #[arg(long)]
        listen: bool,
        /// This endpoint's MAC (default: the one client-send sends to).
        #[arg(long)]
        mac: Option<MacAddr>,
        /// Descriptors per ring (QEMU's `rx_queue_size`: 256 by default, 1024 where a
        /// cloud tunes for rate).
        #[arg(long, default_value_t = 256)]
        queue_size: u16,
    },
}

/// What a sender does: `size`-byte payloads for `seconds`, `burst` per call, held to `pps`
/// (0: unlimited), a progress line every `report_secs` (0: none).
pub(crate) struct SendPlan {
    pub(crate) size: usize,
    pub(crate) seconds: f64,
    pub(crate) burst: usize,
    pub(crate) pps: u64,
    pub(crate) report_secs: f64,
}

/// What a receiver does: listen up to `seconds`, stop `idle` after the last packet, a
/// progress line every `report_secs` (0: none).
pub(crate) struct RecvPlan {
    pub(crate) seconds: f64,
    pub(crate) idle: Duration,
    pub(crate) report_secs: f64,
}

fn main() -> Result<()> {
    match Args::parse().command {
        Mode::Send {
            dst,
            size,
            seconds,
            burst,
            pps,
            report_secs,
        } => {
            if burst == 0 || burst > 1024 {
                bail!("--burst must be 1..=1024");
            }
            send(dst, &send_plan(size, seconds, burst, pps, report_secs)?)
        }
        Mode::Recv {
            bind,
            seconds,
            idle_ms,
            report_secs,
        } => recv(bind, &recv_plan(seconds, idle_ms, report_secs)),
        Mode::ClientSend {
            socket,
            size,
            seconds,
            burst,
            pps,
            report_secs,
            listen,
        } => client::send(
            &client::Endpoint {
                socket: &socket,
                listen,
                mac: None,
                queue_size: ClientConfig::default().queue_size,
            },
            &send_plan(size, seconds, burst.clamp(1, 1024), pps, report_secs)?,
        ),
        Mode::ClientRecv {
            socket,
            seconds,
            idle_ms,
            report_secs,
            listen,
            mac,
            queue_size,
        } => client::recv(
            &client::Endpoint {
                socket: &socket,
                listen,
                mac,
                queue_size,
            },
            &recv_plan(seconds, idle_ms, report_secs),
        ),
    }
}

fn send_plan(
    size: usize,
    seconds: f64,
    burst: usize,
    pps: u64,
    report_secs: f64,
) -> Result<SendPlan> {
    if size < pace::SEQUENCE_LEN {
        bail!(
            "--size must be at least {} bytes: the payload carries a sequence number",
            pace::SEQUENCE_LEN
        );
    }
    Ok(SendPlan {
        size,
        seconds,
        burst,
        pps,
        report_secs,
    })
}

fn recv_plan(seconds: f64, idle_ms: u64, report_secs: f64) -> RecvPlan {
    RecvPlan {
        seconds,
        idle: Duration::from_millis(idle_ms),
        report_secs,
    }
}

fn set_buffer(fd: RawFd, option: libc::c_int) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: `fd` is an open socket; the option value is a live c_int of the stated length.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            std::ptr::from_ref(&SOCKET_BUFFER).cast(),
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn rate(packets: u64, span: Duration) -> f64 {
    let secs = span.as_secs_f64();
    if secs > 0.0 {
        packets as f64 / secs
    } else {
        0.0
    }
}

/// A receiver's window: it ends at the deadline, or `idle` after the last packet once one
/// came; the rate is taken from the first packet to the last. It checks the packets'
/// sequence numbers and prints progress lines when asked to.
pub(crate) struct ReceiveWindow {
    role: &'static str,
    deadline: Instant,
    idle: Duration,
    first: Option<Instant>,
    last: Instant,
    packets: u64,
    bytes: u64,
    sequence: pace::SequenceCheck,
    progress: pace::Progress,
}

impl ReceiveWindow {
    pub(crate) fn new(role: &'static str, plan: &RecvPlan) -> Self {
        let start = Instant::now();
        ReceiveWindow {
            role,
            deadline: start + Duration::from_secs_f64(plan.seconds),
            idle: plan.idle,
            first: None,
            last: start,
            packets: 0,
            bytes: 0,
            sequence: pace::SequenceCheck::default(),
            progress: pace::Progress::new(plan.report_secs),
        }
    }

    /// True once the window is over; prints a progress line when one is due.
    pub(crate) fn over(&mut self) -> bool {
        if let Some(t) = self.progress.due() {
            println!(
                "{{\"role\":\"{}\",\"progress\":true,\"t\":{t:.3},{}}}",
                self.role,
                self.json_fields()
            );
        }
        let now = Instant::now();
        now >= self.deadline || (self.first.is_some() && now.duration_since(self.last) >= self.idle)
    }

    /// Counts one packet of `bytes` bytes whose payload carried `seq`, received just now.
    pub(crate) fn got(&mut self, bytes: usize, seq: Option<u64>) {
        let t = Instant::now();
        self.first.get_or_insert(t);
        self.last = t;
        self.packets += 1;
        self.bytes += bytes as u64;
        self.sequence.see(seq);
    }

    /// The JSON fields every receiver prints: packets, bytes, seconds, pps, and what the
    /// sequence numbers say.
    pub(crate) fn json_fields(&self) -> String {
        let span = self
            .first
            .map_or(Duration::ZERO, |f| self.last.duration_since(f));
        format!(
            "\"packets\":{},\"bytes\":{},\"seconds\":{:.3},\"pps\":{:.0},\"lost\":{},\"late\":{},\"unnumbered\":{}",
            self.packets,
            self.bytes,
            span.as_secs_f64(),
            rate(self.packets, span),
            self.sequence.lost(),
            self.sequence.late,
            self.sequence.unnumbered,
        )
    }
}

/// A sender's count, printed as progress lines and as its last line.
pub(crate) struct SendTally {
    role: &'static str,
    start: Instant,
    pub(crate) packets: u64,
    pacer: pace::Pacer,
    progress: pace::Progress,
}

impl SendTally {
    pub(crate) fn new(role: &'static str, plan: &SendPlan) -> Self {
        SendTally {
            role,
            start: Instant::now(),
            packets: 0,
            pacer: pace::Pacer::new(plan.pps, plan.burst),
            progress: pace::Progress::new(plan.report_secs),
        }
    }

    /// How many packets may go now (at most `burst`); waits a little and says 0 when none
    /// may. Prints a progress line (with `extra` fields) when one is due.
    pub(crate) fn allowance(&mut self, burst: usize, extra: &str) -> usize {
        if let Some(t) = self.progress.due() {
            println!(
                "{{\"role\":\"{}\",\"progress\":true,\"t\":{t:.3},{}{extra}}}",
                self.role,
                self.json_fields()
            );
        }
        let n = self.pacer.allowance(self.packets, burst);
        if n == 0 {
            self.pacer.wait();
        }
        n
    }

    pub(crate) fn json_fields(&self) -> String {
        let span = self.start.elapsed();
        format!(
            "\"packets\":{},\"seconds\":{:.3},\"pps\":{:.0},\"shortfall\":{}",
            self.packets,
            span.as_secs_f64(),
            rate(self.packets, span),
            self.pacer.shortfall
        )
    }
}

fn send(dst: SocketAddr, plan: &SendPlan) -> Result<()> {
    let burst = plan.burst;
    let any: SocketAddr = if dst.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = UdpSocket::bind(any).context("binding the sending socket")?;
    socket
        .connect(dst)
        .with_context(|| format!("connect {dst}"))?;
    let fd = socket.as_raw_fd();
    // Best effort: without it the default buffer only means more ENOBUFS, counted below.
    let _ = set_buffer(fd, libc::SO_SNDBUF);
    // One payload per message of the burst: each carries its own sequence number.
    let mut payloads = vec![0x5au8; plan.size * burst];
    let mut iovs: Vec<libc::iovec> = payloads
        .chunks_mut(plan.size)
        .map(|p| libc::iovec {
            iov_base: p.as_mut_ptr().cast(),
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is a valid value (null name, no control).
    let mut msgs: Vec<libc::mmsghdr> = (0..burst).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = 1;
    }
    let (mut calls, mut refused) = (0u64, 0u64);
    let mut tally = SendTally::new("send", plan);
    let deadline = tally.start + Duration::from_secs_f64(plan.seconds);
    while Instant::now() < deadline {
        let n = tally.allowance(burst, &format!(",\"refused_calls\":{refused}"));
        if n == 0 {
            continue;
        }
        let chunks = payloads.chunks_mut(plan.size).zip(iovs.iter_mut());
        for (seq, (payload, iov)) in (tally.packets..).zip(chunks.take(n)) {
            pace::put_sequence(payload, seq);
            iov.iov_base = payload.as_mut_ptr().cast();
        }
        let vlen = libc::c_uint::try_from(n)?;
        // SAFETY: `msgs` holds at least `vlen` initialised headers whose iovecs point into
        // `payloads`, all alive across the call; the socket is connected, so no address is
        // needed.
        let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), vlen, 0) };
        calls += 1;
        match u64::try_from(r) {
            Ok(sent) => tally.packets += sent,
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // A full device queue or an ICMP error from an earlier datagram: count
                    // and go on, as a traffic source should.
                    Some(libc::ENOBUFS | libc::EAGAIN | libc::ECONNREFUSED | libc::EINTR) => {
                        refused += 1;
                    }
                    _ => return Err(e).context("sendmmsg"),
                }
            }
        }
    }
    println!(
        "{{\"role\":\"send\",{},\"calls\":{calls},\"refused_calls\":{refused},\"size\":{},\"burst\":{burst}}}",
        tally.json_fields(),
        plan.size
    );
    Ok(())
}

fn recv(bind: SocketAddr, plan: &RecvPlan) -> Result<()> {
    let socket = UdpSocket::bind(bind).with_context(|| format!("bind {bind}"))?;
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    let fd = socket.as_raw_fd();
    let _ = set_buffer(fd, libc::SO_RCVBUF);
    let mut buffers = vec![0u8; RECV_BATCH * RECV_BUFFER];
    let mut iovs: Vec<libc::iovec> = buffers
        .chunks_mut(RECV_BUFFER)
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is a valid value (null name, no control).
    let mut msgs: Vec<libc::mmsghdr> = (0..RECV_BATCH)
        .map(|_| unsafe { std::mem::zeroed() })
        .collect();
    for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = 1;
    }
    let vlen = libc::c_uint::try_from(RECV_BATCH)?;
    let mut window = ReceiveWindow::new("recv", plan);
    while !window.over() {
        // SAFETY: `msgs` holds `vlen` headers, each pointing at its own RECV_BUFFER-byte
        // slice of `buffers`; everything stays alive and unaliased across the call.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                vlen,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        match usize::try_from(r) {
            Ok(n) => {
                for (m, buffer) in msgs.iter().zip(buffers.chunks(RECV_BUFFER)).take(n) {
                    let len = usize::try_from(m.msg_len).map_or(0, |l| l.min(RECV_BUFFER));
                    window.got(len, pace::sequence(&buffer[..len]));
                }
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN | libc::EINTR) => {}
                    _ => return Err(e).context("recvmmsg"),
                }
            }
        }
    }
    println!("{{\"role\":\"recv\",{}}}", window.json_fields());
    Ok(())
}
