//! TCP links: a port whose other end is another weft switch, carrying Ethernet frames in one
//! TCP connection (VNET/P §3–4 carries frames over UDP or TCP between hosts). TCP gives what
//! UDP does not: delivery in order through middleboxes that only pass TCP, and flow control
//! of its own; it costs head-of-line blocking, so VXLAN stays the default overlay.
//!
//! - [`TcpLinkPort::open`] takes a [`TcpLinkConfig`]: one end listens, the other connects
//!   ([`TcpLinkMode`]); it splits into [`TcpLinkRx`] / [`TcpLinkTx`] for `Switch::add_port`,
//!   plus its [`TcpLinkStats`].
//! - [`framing`]: the wire format (a 22-byte header per frame: magic, version, link id,
//!   length, the frame's offload state as a virtio-net header) and the reassembler.
//! - A link thread per port makes the connection, and makes it again when it is lost, after
//!   pauses doubling from 100 ms to [`TcpLinkConfig::max_backoff`], forever. While there is
//!   no connection, frames sent to the port are dropped and counted
//!   ([`TcpLinkDrop::Disconnected`]); while the peer is slow, the bounded output buffer fills
//!   and further frames are refused ([`TcpLinkDrop::BufferFull`]).
//! - A peer sending a bad magic, version, link id or length is cut off and counted; the
//!   connection is then made again.
//! - With a [`LinkKey`] ([`TcpLinkConfig::key`]) each connection starts with a mutual
//!   proof of the key ([`auth`]); a connection that fails it, or does not finish within
//!   [`TcpLinkConfig::handshake_timeout`], is closed, counted ([`TcpLinkDrop::AuthFailed`],
//!   [`TcpLinkDrop::BadHandshake`], [`TcpLinkDrop::HandshakeTimeout`]) and logged at a limited
//!   rate. The listening end runs several handshakes at once beside the live connection, so
//!   a bad client holds up neither the real peer nor the data path, and only a peer that
//!   proved itself replaces the live connection. Handshakes in progress are bounded in total
//!   and per source address, so a flood only pushes out its own
//!   ([`TcpLinkDrop::HandshakeLimit`]).
//!
//! Without a key the link is not authenticated: anyone who reaches the listening port can
//! send frames into the switch. A newcomer then replaces the live connection only when it
//! comes from the live peer's address (the peer restarted); from anywhere else it is refused
//! while the live connection is up ([`TcpLinkDrop::RefusedTakeover`]). Either way frames are not encrypted: run the link over
//! WireGuard or IPsec for confidentiality (or over a trusted underlay).

pub mod auth;
mod conn;
pub mod framing;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
mod halves;
pub mod handover;
mod handshake;
mod key_file;
mod outbuf;
mod park;
pub mod stats;

#[cfg(test)]
mod tests;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_switch::PortCaps;
use weft_sys::event::{Epoll, EventFd};

use crate::error::OverlayError;
use conn::{Dial, Shared};
use framing::{DecodeRules, Reassembler, HEADER_LEN, MAX_WIRE_FRAME_LEN};
use outbuf::OutBuf;
use park::LinkPark;

use crate::handover::RxParking;

pub use auth::{KeyFileError, LinkKey};
pub use halves::{TcpLinkRx, TcpLinkTx};
pub(crate) use handover::Carried;
pub use handover::{TcpConnectionHandover, TcpLinkHandover, TcpLinkHandoverSource};
pub use key_file::{key_file_options, read_key_file, read_opened_key_file, KeyFileBytes};
pub use stats::{TcpLinkDrop, TcpLinkStats, TcpLinkStatsSnapshot};

/// How long a handshake may take by default: a few round trips even on a slow path.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// Which end of the connection this port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpLinkMode {
    /// Accept the peer's connections on this address (port 0: any free port).
    Listen(SocketAddr),
    /// Connect to the peer at this address.
    Connect(SocketAddr),
}

/// The configuration of one TCP link port.
#[derive(Debug, Clone)]
pub struct TcpLinkConfig {
    /// Listen or connect.
    pub mode: TcpLinkMode,
    /// The number both ends must agree on (frames carrying another are a misconfigured peer).
    pub link_id: u32,
    /// Largest L3 packet in an ordinary frame (68 to 65535).
    pub mtu: usize,
    /// Carry 64 KB TCP/UDP super-frames and pending checksums across unsegmented.
    pub offloads: bool,
    /// A connection that cannot deliver (keepalive unanswered, data unacknowledged) for this
    /// long is given up (at least 2 s).
    pub dead_after: Duration,
    /// Longest pause between connection attempts.
    pub max_backoff: Duration,
    /// `SO_SNDBUF` / `SO_RCVBUF` in bytes; `None` leaves the kernel's autotuning, which sizes
    /// them to the bandwidth-delay product.
    pub socket_buffer: Option<usize>,
    /// The output buffer in bytes (frames waiting for room in the socket).
    pub out_buffer: usize,
    /// The receive buffer in bytes (at least two largest frames).
    pub rx_buffer: usize,
    /// Network namespace to make the connections in (`/run/netns/NAME`), if not this one.
    pub netns: Option<PathBuf>,
    /// The pre-shared key both ends prove they know when connecting; `None`: the link is
    /// unauthenticated (and speaks exactly as before keys existed).
    pub key: Option<LinkKey>,
    /// How long a connection's handshake may take before it is refused (with a key).
    pub handshake_timeout: Duration,
}

impl TcpLinkConfig {
    /// A link in `mode` with link id 0 and the defaults.
    pub fn new(mode: TcpLinkMode) -> TcpLinkConfig {
        TcpLinkConfig {
            mode,
            link_id: 0,
            mtu: 1500,
            offloads: true,
            dead_after: Duration::from_secs(6),
            max_backoff: Duration::from_secs(5),
            socket_buffer: None,
            out_buffer: 1 << 20,
            rx_buffer: 1 << 19,
            netns: None,
            key: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// The configuration with its network namespace.
    pub fn netns(mut self, path: PathBuf) -> TcpLinkConfig {
        self.netns = Some(path);
        self
    }

    fn validate(&self) -> Result<(), OverlayError> {
        if !(68..=65_535).contains(&self.mtu) {
            return Err(OverlayError::Config(format!(
                "MTU {} out of range: use 68 to 65535",
                self.mtu
            )));
        }
        if self.handshake_timeout.is_zero() {
            return Err(OverlayError::Config(
                "handshake timeout 0: give the peer some time (3 s by default)".into(),
            ));
        }
        if self.out_buffer < HEADER_LEN + MAX_WIRE_FRAME_LEN {
            return Err(OverlayError::Config(format!(
                "output buffer of {} bytes cannot hold a largest frame: use at least {}",
                self.out_buffer,
                HEADER_LEN + MAX_WIRE_FRAME_LEN
            )));
        }
        Ok(())
    }

    /// What the transmit half takes.
    pub fn caps(&self) -> PortCaps {
        if self.offloads {
            PortCaps::full_offload(self.mtu)
        } else {
            PortCaps::plain(self.mtu)
        }
    }
}

/// Stops the link thread when the last half is dropped.
pub(crate) struct LinkGuard {
    shared: Arc<Shared>,
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.shared.wake();
        self.shared.park.notify();
    }
}

/// An opened TCP link port, before it is split into halves.
pub struct TcpLinkPort {
    rx: TcpLinkRx,
    tx: TcpLinkTx,
    stats: Arc<TcpLinkStats>,
    local: Option<SocketAddr>,
}

fn socket_error(call: &'static str) -> impl FnOnce(std::io::Error) -> OverlayError {
    move |source| OverlayError::Socket { call, source }
}

impl TcpLinkPort {
    /// Binds the listening socket (in `config.netns` when set) or prepares to connect, and
    /// starts the link thread. Connections come and go afterwards on their own.
    pub fn open(config: &TcpLinkConfig) -> Result<TcpLinkPort, OverlayError> {
        config.validate()?;
        let dial = match config.mode {
            TcpLinkMode::Listen(addr) => {
                let listener = crate::netns::run_in(config.netns.as_deref(), || {
                    let l = TcpListener::bind(addr).map_err(socket_error("bind TCP"))?;
                    l.set_nonblocking(true)
                        .map_err(socket_error("O_NONBLOCK"))?;
                    Ok(l)
                })?;
                Dial::Listen(listener)
            }
            TcpLinkMode::Connect(addr) => Dial::Connect(addr, config.netns.clone()),
        };
        TcpLinkPort::start(config, dial, None)
    }

    /// The port around its listener or peer address, and a connection carried over from
    /// another process if any; starts the link thread.
    pub(crate) fn start(
        config: &TcpLinkConfig,
        dial: Dial,
        carried: Option<Carried<'_>>,
    ) -> Result<TcpLinkPort, OverlayError> {
        let (local, listener) = match &dial {
            Dial::Listen(l) => (
                l.local_addr().ok(),
                Some(l.try_clone().map_err(socket_error("dup the listener"))?),
            ),
            Dial::Connect(..) => (None, None),
        };
        let stats = Arc::new(TcpLinkStats::default());
        let shared = Arc::new(Shared {
            stats: Arc::clone(&stats),
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
            out: Mutex::new(OutBuf::new(config.out_buffer)),
            kick: EventFd::new(true).map_err(|source| OverlayError::Socket {
                call: "eventfd",
                source,
            })?,
            readiness: Epoll::new().map_err(|source| OverlayError::Socket {
                call: "epoll_create",
                source,
            })?,
            stop: AtomicBool::new(false),
            park: LinkPark::new(conn::park_timeout(config)),
            listener,
            rx_parking: RxParking::default(),
            keyed: config.key.is_some(),
            link_id: config.link_id,
        });
        let mut reasm = Reassembler::new(config.rx_buffer);
        let (mut adopted, mut generation) = (None, 0);
        if let Some(c) = carried {
            let stream = Arc::new(c.stream);
            if !reasm.load(c.rx) || !conn::lock(&shared.out).load(c.tx) {
                return Err(crate::handover::HandoverError::BadState(
                    "buffered bytes beyond the buffers".into(),
                )
                .into());
            }
            shared.publish(Some(Arc::clone(&stream)));
            // Publishing started the output buffer over: the carried bytes go first.
            conn::lock(&shared.out).load(c.tx);
            generation = shared.generation.load(std::sync::atomic::Ordering::Acquire);
            adopted = Some(stream);
        }
        let thread_shared = Arc::clone(&shared);
        let thread_config = config.clone();
        let thread_stream = adopted.clone();
        std::thread::Builder::new()
            .name("weft-tcp-link".into())
            .spawn(move || conn::run(&thread_shared, &dial, &thread_config, thread_stream))
            .map_err(socket_error("spawn the link thread"))?;
        let guard = Arc::new(LinkGuard { shared });
        let caps = config.caps();
        let rx = TcpLinkRx {
            guard: Arc::clone(&guard),
            rules: DecodeRules {
                link_id: config.link_id,
                max_frame_len: caps.max_frame_len,
                offloads: config.offloads,
            },
            stream: adopted,
            generation,
            frame_buffered: reasm.has_frame(),
            reasm,
            lent: Vec::with_capacity(weft_switch::port::MAX_BATCH),
        };
        let tx = TcpLinkTx {
            guard,
            link_id: config.link_id,
            caps,
        };
        Ok(TcpLinkPort {
            rx,
            tx,
            stats,
            local,
        })
    }

    /// The halves and the counters.
    pub fn split(self) -> (TcpLinkRx, TcpLinkTx, Arc<TcpLinkStats>) {
        (self.rx, self.tx, self.stats)
    }

    /// The address a listening port is bound to (its port resolved); `None` when connecting.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }
}
