//! Driving the [`auth`](super::auth) handshake of a connection without blocking: a
//! [`Handshake`] moves as far as the socket allows on each [`Handshake::advance`]; the
//! listening end keeps several in [`Pending`] so that a silent or slow client never holds up
//! the real peer, and [`Refusals`] counts and logs (at a limited rate) the ones that fail.
//!
//! [`Pending`] is bounded in total and per source address: a flood from one address only
//! pushes out its own handshakes, never the real peer's from another address.

use std::fmt::Display;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::auth::{self, HandshakeError, Hello, LinkKey, Role, HELLO_LEN, PROOF_LEN};
use super::stats::{TcpLinkDrop, TcpLinkStats};

/// Handshakes a listening end carries at once; when full, a newer connection pushes out the
/// oldest of the address that has the most.
pub(crate) const MAX_PENDING: usize = 8;
/// Handshakes from one source address at once; a newer one pushes out that address's oldest.
pub(crate) const MAX_PENDING_PER_SOURCE: usize = 2;
/// At most one refusal logged per this long (the others are counted, and summed up in it).
const LOG_EVERY: Duration = Duration::from_secs(10);

/// One connection's handshake in progress.
pub(crate) struct Handshake {
    stream: TcpStream,
    /// The peer's address, when the socket knows it.
    peer_addr: Option<SocketAddr>,
    ours: Hello,
    peer: Option<Hello>,
    /// Our hello, then our proof once the peer's hello is in.
    out: [u8; HELLO_LEN + PROOF_LEN],
    queued: usize,
    sent: usize,
    /// The peer's hello, then its proof.
    input: [u8; HELLO_LEN + PROOF_LEN],
    got: usize,
    deadline: Instant,
}

impl Handshake {
    /// Starts the handshake of `stream` (made non-blocking) as `role`: our hello is queued
    /// and sent as far as the socket takes it.
    pub(crate) fn start(
        stream: TcpStream,
        role: Role,
        link_id: u32,
        timeout: Duration,
    ) -> std::io::Result<Handshake> {
        stream.set_nonblocking(true)?;
        let ours = Hello::fresh(role, link_id)?;
        let mut out = [0u8; HELLO_LEN + PROOF_LEN];
        out[..HELLO_LEN].copy_from_slice(&ours.encode());
        Ok(Handshake {
            peer_addr: stream.peer_addr().ok(),
            stream,
            ours,
            peer: None,
            out,
            queued: HELLO_LEN,
            sent: 0,
            input: [0u8; HELLO_LEN + PROOF_LEN],
            got: 0,
            deadline: Instant::now() + timeout,
        })
    }

    /// The connection.
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The source address, if known.
    fn source(&self) -> Option<IpAddr> {
        self.peer_addr.map(|a| a.ip())
    }

    /// When it gives up.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Bytes of ours wait for room in the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.sent < self.queued
    }

    /// The connection, once [`Self::advance`] said it is done.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Moves on as far as the socket allows. `Ok(true)`: the peer proved it knows `key` and
    /// all of ours is sent; the stream now carries frames (none of which was read).
    pub(crate) fn advance(&mut self, key: &LinkKey, now: Instant) -> Result<bool, HandshakeError> {
        self.step(key, now).map_err(|e| match e {
            // Leaving before its hello is not a refusal of our proof: no key, or not weft.
            HandshakeError::Closed if self.peer.is_none() => HandshakeError::ClosedBeforeHello,
            e => e,
        })
    }

    fn step(&mut self, key: &LinkKey, now: Instant) -> Result<bool, HandshakeError> {
        loop {
            self.flush()?;
            let want = if self.peer.is_some() {
                HELLO_LEN + PROOF_LEN
            } else {
                HELLO_LEN
            };
            // Exactly what the handshake needs: frames that follow stay in the socket.
            let read = self.read_up_to(want)?;
            let head = self.got.min(auth::HELLO_MAGIC.len());
            if self.peer.is_none() && self.input[..head] != auth::HELLO_MAGIC[..head] {
                // A peer that starts with anything else is told at once, not at the deadline.
                let mut first = [0u8; 4];
                let n = self.got.min(4);
                first[..n].copy_from_slice(&self.input[..n]);
                return Err(HandshakeError::NotAHello(first));
            }
            if self.got < want {
                if !read {
                    break;
                }
                continue;
            }
            match self.peer {
                None => {
                    let mut bytes = [0u8; HELLO_LEN];
                    bytes.copy_from_slice(&self.input[..HELLO_LEN]);
                    let peer = Hello::parse(&bytes)?;
                    self.ours.check_peer(&peer)?;
                    let proof = auth::prove(key, &self.ours, &peer);
                    self.out[HELLO_LEN..].copy_from_slice(&proof);
                    self.queued = HELLO_LEN + PROOF_LEN;
                    self.peer = Some(peer);
                }
                Some(peer) => {
                    let mut proof = [0u8; PROOF_LEN];
                    proof.copy_from_slice(&self.input[HELLO_LEN..]);
                    auth::verify(key, &self.ours, &peer, &proof)?;
                    self.flush()?;
                    if !self.wants_write() {
                        return Ok(true);
                    }
                    break;
                }
            }
        }
        if now >= self.deadline {
            return Err(HandshakeError::TimedOut);
        }
        Ok(false)
    }

    fn flush(&mut self) -> Result<(), HandshakeError> {
        while self.sent < self.queued {
            match (&self.stream).write(&self.out[self.sent..self.queued]) {
                Ok(0) => return Err(HandshakeError::Closed),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failure(&e)),
            }
        }
        Ok(())
    }

    /// Reads towards `want` bytes; true when some came.
    fn read_up_to(&mut self, want: usize) -> Result<bool, HandshakeError> {
        let mut read = false;
        while self.got < want {
            match (&self.stream).read(&mut self.input[self.got..want]) {
                Ok(0) => return Err(HandshakeError::Closed),
                Ok(n) => {
                    self.got += n;
                    read = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failure(&e)),
            }
        }
        Ok(read)
    }
}

fn io_failure(e: &std::io::Error) -> HandshakeError {
    match e.kind() {
        // A peer that resets is one that closed (a refusal on its side, usually).
        ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => HandshakeError::Closed,
        kind => HandshakeError::Io(kind),
    }
}

/// Counts refused connections and logs them, at most once per [`LOG_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    logged: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    /// Counts (under the error's reason) and maybe logs one refused connection.
    pub(crate) fn refuse(
        &mut self,
        stats: &TcpLinkStats,
        peer: Option<SocketAddr>,
        e: &HandshakeError,
    ) {
        self.refuse_for(stats, peer, e.drop_reason(), e);
    }

    /// Counts under `reason` and maybe logs one refused connection, saying `why`.
    pub(crate) fn refuse_for(
        &mut self,
        stats: &TcpLinkStats,
        peer: Option<SocketAddr>,
        reason: TcpLinkDrop,
        why: &dyn Display,
    ) {
        stats.count_drop(reason, 1);
        let now = Instant::now();
        if self
            .logged
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            self.unlogged += 1;
            return;
        }
        let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
        tracing::warn!(
            peer = %peer,
            also_refused_since_last_log = self.unlogged,
            "tcp link: refused a connection: {why}"
        );
        self.logged = Some(now);
        self.unlogged = 0;
    }
}

/// The handshakes a listening end has in progress, bounded.
pub(crate) struct Pending {
    key: LinkKey,
    link_id: u32,
    timeout: Duration,
    list: Vec<Handshake>,
}

impl Pending {
    /// No handshake yet.
    pub(crate) fn new(key: LinkKey, link_id: u32, timeout: Duration) -> Pending {
        Pending {
            key,
            link_id,
            timeout,
            list: Vec::with_capacity(MAX_PENDING),
        }
    }

    /// Starts the handshake of an accepted connection. When its source address has
    /// [`MAX_PENDING_PER_SOURCE`] already, that address's oldest gives way; when all are
    /// taken, the oldest of the address with the most (counted `handshake_limit`).
    pub(crate) fn add(&mut self, stream: TcpStream, stats: &TcpLinkStats, log: &mut Refusals) {
        let peer = stream.peer_addr().ok();
        let handshake = match Handshake::start(stream, Role::Listener, self.link_id, self.timeout) {
            Ok(h) => h,
            Err(e) => {
                log.refuse(stats, peer, &io_failure(&e));
                return;
            }
        };
        let source = handshake.source();
        let from_source = self.list.iter().filter(|h| h.source() == source).count();
        let evict = if from_source >= MAX_PENDING_PER_SOURCE {
            self.list.iter().position(|h| h.source() == source)
        } else if self.list.len() >= MAX_PENDING {
            self.oldest_of_busiest_source()
        } else {
            None
        };
        if let Some(i) = evict {
            let pushed_out = self.list.remove(i);
            log.refuse_for(
                stats,
                pushed_out.peer_addr,
                TcpLinkDrop::HandshakeLimit,
                &"too many handshakes pending from its address (or in all)",
            );
        }
        self.list.push(handshake);
    }

    /// The index of the oldest handshake of the source address with the most in progress.
    fn oldest_of_busiest_source(&self) -> Option<usize> {
        let count = |source| self.list.iter().filter(|h| h.source() == source).count();
        let busiest = self.list.iter().map(|h| count(h.source())).max()?;
        // The list is in arrival order: the first of that source is its oldest.
        self.list.iter().position(|h| count(h.source()) == busiest)
    }

    /// The handshakes in progress (to poll their sockets).
    pub(crate) fn handshakes(&self) -> &[Handshake] {
        &self.list
    }

    /// How long until the next deadline (at most `cap`).
    pub(crate) fn wait_at_most(&self, cap: Duration) -> Duration {
        let now = Instant::now();
        self.list
            .iter()
            .map(|h| h.deadline().saturating_duration_since(now))
            .fold(cap, Duration::min)
    }

    /// Advances every handshake; refuses (counts, logs, closes) the failed ones and returns
    /// a connection whose peer proved itself, if one did.
    pub(crate) fn advance(
        &mut self,
        stats: &TcpLinkStats,
        log: &mut Refusals,
    ) -> Option<TcpStream> {
        let now = Instant::now();
        let mut i = 0;
        while i < self.list.len() {
            match self.list[i].advance(&self.key, now) {
                Ok(false) => i += 1,
                Ok(true) => return Some(self.list.remove(i).into_stream()),
                Err(e) => {
                    let failed = self.list.remove(i);
                    log.refuse(stats, failed.peer_addr, &e);
                }
            }
        }
        None
    }
}
