//! weft-udpblast: a batch UDP generator and sink for small-packet rates, because iperf3's UDP
//! sender (one `write` per datagram) tops out at a few tens of thousands of packets per second
//! here, whatever carries the packets.
//!
//! ```text
//! weft-udpblast send --dst 10.0.0.2:9000 --size 18 --seconds 5 [--burst 64]
//! weft-udpblast recv --bind 10.0.0.2:9000 --seconds 10 [--idle-ms 1000]
//! weft-udpblast client-send --socket /run/weft/a.sock --seconds 5 [--burst 64]
//! weft-udpblast client-recv --socket /run/weft/b.sock --seconds 10
//! ```
//!
//! `send` hands the kernel `--burst` datagrams per `sendmmsg` on a connected socket; `recv`
//! takes up to 256 per `recvmmsg`. Each prints one JSON line: packets, the seconds they took
//! and packets per second. The receiver's rate is over the span from its first datagram to its
//! last (it stops `--idle-ms` after the last, or at `--seconds`), so start-up and the wait for
//! the sender do not dilute it. `--size 18` makes 64-byte Ethernet frames (FCS counted).
//! `client-send` / `client-recv` do the same as weft-client endpoints on weft `vhost-user`
//! ports (`client.rs`).

mod client;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

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
    },
}

fn main() -> Result<()> {
    match Args::parse().command {
        Mode::Send {
            dst,
            size,
            seconds,
            burst,
        } => send(dst, size, seconds, burst),
        Mode::Recv {
            bind,
            seconds,
            idle_ms,
        } => recv(bind, seconds, Duration::from_millis(idle_ms)),
        Mode::ClientSend {
            socket,
            size,
            seconds,
            burst,
        } => client::send(&socket, size, seconds, burst.clamp(1, 1024)),
        Mode::ClientRecv {
            socket,
            seconds,
            idle_ms,
        } => client::recv(&socket, seconds, Duration::from_millis(idle_ms)),
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
/// came; the rate is taken from the first packet to the last.
pub(crate) struct ReceiveWindow {
    deadline: Instant,
    idle: Duration,
    first: Option<Instant>,
    last: Instant,
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
}

impl ReceiveWindow {
    pub(crate) fn new(seconds: f64, idle: Duration) -> Self {
        let start = Instant::now();
        ReceiveWindow {
            deadline: start + Duration::from_secs_f64(seconds),
            idle,
            first: None,
            last: start,
            packets: 0,
            bytes: 0,
        }
    }

    /// True once the window is over.
    pub(crate) fn over(&self) -> bool {
        let now = Instant::now();
        now >= self.deadline || (self.first.is_some() && now.duration_since(self.last) >= self.idle)
    }

    /// Counts `packets` packets of `bytes` bytes in all, received just now.
    pub(crate) fn got(&mut self, packets: u64, bytes: u64) {
        let t = Instant::now();
        self.first.get_or_insert(t);
        self.last = t;
        self.packets += packets;
        self.bytes += bytes;
    }

    /// The JSON fields every receiver prints: packets, bytes, seconds and pps.
    pub(crate) fn json_fields(&self) -> String {
        let span = self
            .first
            .map_or(Duration::ZERO, |f| self.last.duration_since(f));
        format!(
            "\"packets\":{},\"bytes\":{},\"seconds\":{:.3},\"pps\":{:.0}",
            self.packets,
            self.bytes,
            span.as_secs_f64(),
            rate(self.packets, span)
        )
    }
}

fn send(dst: SocketAddr, size: usize, seconds: f64, burst: usize) -> Result<()> {
    if burst == 0 || burst > 1024 {
        bail!("--burst must be 1..=1024");
    }
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
    let mut payload = vec![0x5au8; size];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // Every message of the burst points at the same payload: the kernel copies it each time.
    // SAFETY: mmsghdr is plain data; all-zero is a valid value (null name, no control).
    let mut msgs: Vec<libc::mmsghdr> = (0..burst).map(|_| unsafe { std::mem::zeroed() }).collect();
    for m in &mut msgs {
        m.msg_hdr.msg_iov = &mut iov;
        m.msg_hdr.msg_iovlen = 1;
    }
    let vlen = libc::c_uint::try_from(burst)?;
    let (mut packets, mut calls, mut refused) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    while Instant::now() < deadline {
        // SAFETY: `msgs` holds `vlen` initialised headers whose iovec points at `payload`,
        // all alive across the call; the socket is connected, so no address is needed.
        let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), vlen, 0) };
        calls += 1;
        match u64::try_from(r) {
            Ok(n) => packets += n,
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
    let span = start.elapsed();
    println!(
        "{{\"role\":\"send\",\"packets\":{packets},\"seconds\":{:.3},\"pps\":{:.0},\"calls\":{calls},\"refused_calls\":{refused},\"size\":{size},\"burst\":{burst}}}",
        span.as_secs_f64(),
        rate(packets, span)
    );
    Ok(())
}

fn recv(bind: SocketAddr, seconds: f64, idle: Duration) -> Result<()> {
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
    let mut window = ReceiveWindow::new(seconds, idle);
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
                let bytes = msgs[..n].iter().map(|m| u64::from(m.msg_len)).sum::<u64>();
                window.got(u64::try_from(n)?, bytes);
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
