//! The link thread: makes the connection (listening or connecting), tunes its socket, hands
//! it to the halves, watches it and makes the next one when it dies — forever, connecting
//! again after exponentially growing pauses.
//!
//! Thread ownership: the halves and the link thread share [`Shared`]. The current connection
//! is published behind a mutex plus a generation number the receive half checks once per
//! batch; the transmit half's output buffer sits behind its own mutex, taken once per burst by
//! the transmit half and, when bytes wait for room in the socket, by the link thread that
//! flushes them on `POLLOUT`. A half that finds the stream broken shuts the socket down; the
//! link thread sees the hang-up and replaces the connection. Lock order: `current` before
//! `out`, and only the link thread takes both.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use weft_sys::event::{epoll_add, epoll_delete, Epoll, EventFd, EventSet};
use weft_sys::sockopt::{self, opt};

use super::auth::{HandshakeError, LinkKey, Role};
use super::handshake::{Handshake, Pending, Refusals, MAX_PENDING};
use super::outbuf::OutBuf;
use super::park::LinkPark;
use super::stats::{TcpLinkDrop, TcpLinkStats};
use super::TcpLinkConfig;
use crate::handover::RxParking;

/// What the halves and the link thread share.
pub(crate) struct Shared {
    pub(crate) stats: Arc<TcpLinkStats>,
    /// Moves whenever the connection changes (made, lost, replaced).
    pub(crate) generation: AtomicU64,
    /// The connection the receive half reads.
    pub(crate) current: Mutex<Option<Arc<TcpStream>>>,
    /// The transmit side's buffer and the connection it writes to.
    pub(crate) out: Mutex<OutBuf>,
    /// Written by the transmit half when bytes wait for room in the socket, and on stop.
    pub(crate) kick: EventFd,
    /// The receive half's readiness descriptor: holds the current connection's socket.
    pub(crate) readiness: Epoll,
    pub(crate) stop: AtomicBool,
    /// Holds the link thread still while a hand-over reads the link's state.
    pub(crate) park: LinkPark,
    /// A duplicate of the listening socket (for a hand-over), when listening.
    pub(crate) listener: Option<TcpListener>,
    /// The receive half's buffered bytes between batches.
    pub(crate) rx_parking: RxParking<ParkedRx>,
    /// The link has a key: its connections passed the handshake.
    pub(crate) keyed: bool,
    pub(crate) link_id: u32,
}

/// What the receive half parks between batches when bytes of its stream wait in user space.
pub(crate) struct ParkedRx {
    pub(crate) reasm: super::framing::Reassembler,
    /// The connection they came from (the generation the half followed).
    pub(crate) generation: u64,
}

/// Takes a mutex whether or not a panicking thread poisoned it: the guarded values keep
/// their invariants between calls.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Makes `stream` the connection (or none), for both halves.
    pub(crate) fn publish(&self, stream: Option<Arc<TcpStream>>) {
        let mut current = lock(&self.current);
        if let Some(old) = current.take() {
            let _ = epoll_delete(&self.readiness, old.as_fd());
            let _ = old.shutdown(std::net::Shutdown::Both);
            self.stats.disconnected();
        }
        if let Some(new) = &stream {
            let added = epoll_add(&self.readiness, new.as_fd(), EventSet::IN, 0);
            if added.is_err() {
                self.stats.io_error();
            }
            self.stats.connected();
        }
        lock(&self.out).attach(stream.clone());
        *current = stream;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Wakes the link thread (to flush, or to stop).
    pub(crate) fn wake(&self) {
        let _ = self.kick.write(1);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A point where the link thread may park for a hand-over; true: end now, quietly.
    fn park_point(&self) -> bool {
        self.park.point(|| self.stopping())
    }
}

/// How the link thread gets its connections.
pub(crate) enum Dial {
    /// Accepts them. A newer one replaces the current one when it proved the key, or, on a
    /// link without a key, when it comes from the current peer's address (the peer noticed
    /// a dead link first, or restarted).
    Listen(TcpListener),
    /// Makes them, inside a network namespace when given.
    Connect(SocketAddr, Option<PathBuf>),
}

/// The peer shut its side down (`poll`'s `POLLRDHUP`, which nix does not name).
const RDHUP: PollFlags = PollFlags::from_bits_retain(libc::POLLRDHUP);

/// Connection attempts time out after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The first pause after a failed attempt; it doubles up to the configured maximum.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// How long the link thread sleeps at most without an event (it then checks for stop).
const TICK: Duration = Duration::from_millis(500);

/// How long a hand-over waits for the link thread to park at most: a connection attempt
/// and a handshake in progress finish first.
pub(crate) fn park_timeout(config: &TcpLinkConfig) -> Duration {
    CONNECT_TIMEOUT + config.handshake_timeout + 2 * TICK
}

/// The link thread's body: runs until [`Shared::stop`]. `adopted`: a connection handed over
/// from another process, already published, watched first.
pub(crate) fn run(
    shared: &Shared,
    dial: &Dial,
    config: &TcpLinkConfig,
    adopted: Option<Arc<TcpStream>>,
) {
    let mut refusals = Refusals::default();
    let mut pending = config
        .key
        .clone()
        .map(|key| Pending::new(key, config.link_id, config.handshake_timeout));
    if let Some(stream) = adopted {
        if serve(
            shared,
            dial,
            config,
            stream,
            pending.as_mut(),
            &mut refusals,
        ) {
            return;
        }
    }
    let mut backoff = FIRST_BACKOFF;
    while !shared.stopping() {
        if shared.park_point() {
            return;
        }
        let stream = match dial {
            Dial::Listen(listener) => accept(shared, listener, pending.as_mut(), &mut refusals),
            Dial::Connect(addr, netns) => {
                let made = crate::netns::run_in(netns.as_deref(), || {
                    TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).map_err(|source| {
                        crate::OverlayError::Socket {
                            call: "connect",
                            source,
                        }
                    })
                });
                let made = match (made, &config.key) {
                    (Ok(s), None) => Ok(s),
                    (Ok(s), Some(key)) => authenticate(shared, s, key, config).map_err(|e| {
                        if !shared.stopping() {
                            refusals.refuse(&shared.stats, Some(*addr), &e);
                        }
                    }),
                    (Err(_), _) => {
                        shared.stats.connect_failed();
                        Err(())
                    }
                };
                match made {
                    Ok(s) => Some(s),
                    Err(()) => {
                        pause(shared, backoff);
                        backoff = (backoff * 2).min(config.max_backoff);
                        None
                    }
                }
            }
        };
        let Some(stream) = stream else { continue };
        if tune(&stream, config).is_err() {
            shared.stats.io_error();
            continue;
        }
        backoff = FIRST_BACKOFF;
        let stream = Arc::new(stream);
        shared.publish(Some(Arc::clone(&stream)));
        if serve(
            shared,
            dial,
            config,
            stream,
            pending.as_mut(),
            &mut refusals,
        ) {
            return;
        }
    }
}

/// Watches a published connection, and the newer ones that replace it, until it is lost
/// or the port stops. True: the port stopped after a hand-over; leave the connection be.
fn serve(
    shared: &Shared,
    dial: &Dial,
    config: &TcpLinkConfig,
    mut stream: Arc<TcpStream>,
    mut pending: Option<&mut Pending>,
    refusals: &mut Refusals,
) -> bool {
    loop {
        match watch(shared, &stream, dial, pending.as_deref_mut(), refusals) {
            Watch::Replace(newer) => match tune(&newer, config) {
                Ok(()) => {
                    stream = Arc::new(newer);
                    shared.publish(Some(Arc::clone(&stream)));
                }
                Err(_) => shared.stats.io_error(),
            },
            Watch::HandedOver => return true,
            Watch::Lost | Watch::Stop => break,
        }
    }
    shared.publish(None);
    false
}

/// The connecting end's handshake: nothing else waits on the link thread meanwhile (there
/// is no connection to flush), so it waits for it, up to the handshake time or a stop.
fn authenticate(
    shared: &Shared,
    stream: TcpStream,
    key: &LinkKey,
    config: &TcpLinkConfig,
) -> Result<TcpStream, HandshakeError> {
    let mut handshake = Handshake::start(
        stream,
        Role::Connector,
        config.link_id,
        config.handshake_timeout,
    )
    .map_err(|e| HandshakeError::Io(e.kind()))?;
    loop {
        if handshake.advance(key, Instant::now())? {
            return Ok(handshake.into_stream());
        }
        if shared.stopping() {
            return Err(HandshakeError::TimedOut);
        }
        let mut events = PollFlags::POLLIN;
        if handshake.wants_write() {
            events |= PollFlags::POLLOUT;
        }
        let mut fds = [
            PollFd::new(handshake.stream().as_fd(), events),
            PollFd::new(shared.kick.as_fd(), PollFlags::POLLIN),
        ];
        let wait = handshake
            .deadline()
            .saturating_duration_since(Instant::now())
            .min(TICK);
        let _ = poll(&mut fds, timeout(wait));
        if fds[1].any().unwrap_or(false) {
            let _ = shared.kick.read();
        }
    }
}

/// Sleeps `d`, or until woken.
fn pause(shared: &Shared, d: Duration) {
    let mut fds = [PollFd::new(shared.kick.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, timeout(d));
    let _ = shared.kick.read();
}

fn timeout(d: Duration) -> PollTimeout {
    PollTimeout::try_from(d).unwrap_or(PollTimeout::MAX)
}

/// Waits for a connection on the listener (or a stop): without a key the newest accepted,
/// with one the first whose peer proved itself.
fn accept(
    shared: &Shared,
    listener: &TcpListener,
    pending: Option<&mut Pending>,
    refusals: &mut Refusals,
) -> Option<TcpStream> {
    let wait = pending.as_deref().map_or(TICK, |p| p.wait_at_most(TICK));
    let kicked = {
        let mut fds = vec![
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.kick.as_fd(), PollFlags::POLLIN),
        ];
        push_handshakes(&mut fds, pending.as_deref());
        let _ = poll(&mut fds, timeout(wait));
        fds[1].any().unwrap_or(false)
    };
    if kicked {
        let _ = shared.kick.read();
    }
    match serve_listener(shared, listener, pending, refusals) {
        Ok(made) => made,
        Err(()) => {
            // Out of descriptors, say: wait a little rather than spin on a readable listener.
            pause(shared, FIRST_BACKOFF);
            None
        }
    }
}

/// Adds the sockets of the handshakes in progress to a poll set.
fn push_handshakes<'a>(fds: &mut Vec<PollFd<'a>>, pending: Option<&'a Pending>) {
    for h in pending.map_or(&[][..], Pending::handshakes) {
        let mut events = PollFlags::POLLIN;
        if h.wants_write() {
            events |= PollFlags::POLLOUT;
        }
        fds.push(PollFd::new(h.stream().as_fd(), events));
    }
}

/// Takes what waits on the listener. Without a key: the connection accepted, as is. With
/// one: each accepted connection starts a handshake beside the others, and a connection whose
/// peer proved itself is returned (a silent or slow client never holds up the real peer).
/// `Err`: accepting failed (counted).
fn serve_listener(
    shared: &Shared,
    listener: &TcpListener,
    pending: Option<&mut Pending>,
    refusals: &mut Refusals,
) -> Result<Option<TcpStream>, ()> {
    let Some(pending) = pending else {
        return accept_one(shared, listener);
    };
    let mut failed = false;
    for _ in 0..MAX_PENDING {
        match accept_one(shared, listener) {
            Ok(Some(s)) => pending.add(s, &shared.stats, refusals),
            Ok(None) => break,
            Err(()) => {
                failed = true;
                break;
            }
        }
    }
    match pending.advance(&shared.stats, refusals) {
        Some(s) => Ok(Some(s)),
        None if failed => Err(()),
        None => Ok(None),
    }
}

/// One connection from the listener, if one waits.
fn accept_one(shared: &Shared, listener: &TcpListener) -> Result<Option<TcpStream>, ()> {
    match listener.accept() {
        Ok((s, _)) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(_) => {
            shared.stats.connect_failed();
            Err(())
        }
    }
}

enum Watch {
    /// A newer connection arrived on the listener.
    Replace(TcpStream),
    /// The connection hung up, failed, or a half cut it.
    Lost,
    /// The port is going away.
    Stop,
    /// The port is going away after handing its connection to another process.
    HandedOver,
}

/// Watches the live connection: hang-ups, errors, room to flush buffered output, newer
/// connections (and their handshakes, when the link has a key).
fn watch(
    shared: &Shared,
    stream: &TcpStream,
    dial: &Dial,
    mut pending: Option<&mut Pending>,
    refusals: &mut Refusals,
) -> Watch {
    loop {
        if shared.park_point() {
            return Watch::HandedOver;
        }
        if shared.stopping() {
            return Watch::Stop;
        }
        let flush = lock(&shared.out).has_pending();
        let mut events = RDHUP;
        if flush {
            events |= PollFlags::POLLOUT;
        }
        let wait = pending.as_deref().map_or(TICK, |p| p.wait_at_most(TICK));
        let handshaking = pending
            .as_deref()
            .is_some_and(|p| !p.handshakes().is_empty());
        let (stream_events, kicked, listener_ready) = {
            let mut fds = vec![
                PollFd::new(stream.as_fd(), events),
                PollFd::new(shared.kick.as_fd(), PollFlags::POLLIN),
            ];
            if let Dial::Listen(l) = dial {
                fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
                push_handshakes(&mut fds, pending.as_deref());
            }
            if poll(&mut fds, timeout(wait)).is_err() {
                continue;
            }
            let ready = |i: usize| {
                fds.get(i)
                    .and_then(PollFd::revents)
                    .unwrap_or(PollFlags::empty())
            };
            // nix reports revents holding a bit it does not name as `None`: that is
            // POLLRDHUP, the only such bit asked for.
            (
                fds.first().and_then(PollFd::revents),
                ready(1).contains(PollFlags::POLLIN),
                ready(2).contains(PollFlags::POLLIN),
            )
        };
        if kicked {
            let _ = shared.kick.read();
        }
        let Some(s) = stream_events else {
            return Watch::Lost;
        };
        if s.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            return Watch::Lost;
        }
        if s.contains(PollFlags::POLLOUT) && lock(&shared.out).flush(&shared.stats).is_err() {
            return Watch::Lost;
        }
        if listener_ready || handshaking {
            if let Dial::Listen(l) = dial {
                if let Ok(Some(newer)) = serve_listener(shared, l, pending.as_deref_mut(), refusals)
                {
                    // With a key the newcomer proved itself. Without one, only the live
                    // peer's own address may take over (it restarted, and our side of its
                    // old connection is half-open); anyone else waits for the live
                    // connection to die, so it cannot silently cut the real peer off.
                    if pending.is_some() || same_source(&newer, stream) {
                        return Watch::Replace(newer);
                    }
                    refusals.refuse_for(
                        &shared.stats,
                        newer.peer_addr().ok(),
                        TcpLinkDrop::RefusedTakeover,
                        &"the link has no key and its live connection comes from another address",
                    );
                }
            }
        }
    }
}

/// True when both connections come from the same address (ports aside).
fn same_source(a: &TcpStream, b: &TcpStream) -> bool {
    match (a.peer_addr(), b.peer_addr()) {
        (Ok(a), Ok(b)) => a.ip() == b.ip(),
        _ => false,
    }
}

/// Socket options of a link connection: non-blocking; no Nagle delay (frames are already
/// batched); keepalive probes and a user timeout so that a cut underlay is noticed within
/// `dead_after` whether the link is idle or has data in flight; socket buffers as configured
/// (the kernel's autotuning, which follows the bandwidth-delay product, when not).
pub(crate) fn tune(stream: &TcpStream, config: &TcpLinkConfig) -> std::io::Result<()> {
    stream.set_nonblocking(true)?;
    stream.set_nodelay(true)?;
    let dead = config.dead_after.max(Duration::from_secs(2));
    let probe_every = i32::try_from((dead.as_secs() / 3).max(1)).unwrap_or(i32::MAX);
    let user_timeout = u32::try_from(dead.as_millis()).unwrap_or(u32::MAX);
    sockopt::set(stream, opt::SO_KEEPALIVE, &1)?;
    sockopt::set(stream, opt::TCP_KEEPIDLE, &probe_every)?;
    sockopt::set(stream, opt::TCP_KEEPINTVL, &probe_every)?;
    sockopt::set(stream, opt::TCP_KEEPCNT, &2)?;
    sockopt::set(stream, opt::TCP_USER_TIMEOUT, &user_timeout)?;
    if let Some(size) = config.socket_buffer {
        let size = i32::try_from(size).unwrap_or(i32::MAX);
        sockopt::set(stream, opt::SO_SNDBUF, &size)?;
        sockopt::set(stream, opt::SO_RCVBUF, &size)?;
    }
    Ok(())
}
