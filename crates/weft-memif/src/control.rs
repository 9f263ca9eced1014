//! The port's control thread: the memif socket, each peer's handshake, the connection's
//! hand-over to the data path, and dropping peers that misbehave.
//!
//! One thread per port, sleeping in epoll on the socket(s), a wake eventfd (the port
//! closing, or a half reporting a broken ring) and the nearest deadline (a handshake's
//! timeout, a client's next reconnection). As a server it accepts any number of peers up
//! to [`MAX_SESSIONS`] at once, but connects one: a second peer that names the port's id
//! while another holds it is refused ("interface already connected"). As a client it
//! connects, and after the server goes (or before it is there) tries again with a
//! backoff from 50 ms to 1 s.

mod session;

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use weft_sys::event::{epoll_add, epoll_delete, Epoll, EpollEvent, EventFd, EventSet};
use weft_vhost::{FileId, SocketDir};

use crate::config::{MemifConfig, Role, MAX_LOG2_RING_SIZE, MAX_QUEUE_PAIRS, MAX_REGIONS};
use crate::connection::{PeerStatus, Shared};
use crate::counters::Counters;
use crate::handover::{describe, AdoptedSession, Connected, Request};
use crate::handshake::{ClientHandshake, ClientPlan, Refusal, ServerHandshake, ServerLimits};
use crate::wire::{Message, Name};
use session::{AdoptedSide, End, Progress, Session};

/// Peers on a server port's socket at once (one connected, the rest in their handshake).
pub(crate) const MAX_SESSIONS: usize = 4;
const TOKEN_WAKE: u64 = 0;
const TOKEN_LISTENER: u64 = 1;
const FIRST_SESSION: u64 = 2;
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Everything the control thread owns.
pub(crate) struct Control {
    pub(crate) config: MemifConfig,
    pub(crate) dir: Arc<SocketDir>,
    pub(crate) name: OsString,
    pub(crate) shared: Arc<Shared>,
    pub(crate) wake: Arc<EventFd>,
    pub(crate) stop: Arc<AtomicBool>,
    /// Server: the listener and (when weft bound it, or it was still there when the port
    /// was taken over) the socket file to remove when the port closes.
    pub(crate) listener: Option<(UnixListener, Option<FileId>)>,
    /// Hand-over requests ([`crate::MemifHandoverSource`]), looked at on every wake.
    requests: mpsc::Receiver<Request>,
    epoll: Epoll,
    sessions: Vec<(u64, Session)>,
    next_token: u64,
    backoff: Duration,
    retry_at: Option<Instant>,
}

/// How the port reaches its control thread: the wake eventfd, the stop flag, and the
/// hand-over requests.
pub(crate) struct Signals {
    pub(crate) wake: Arc<EventFd>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) requests: mpsc::Receiver<Request>,
}

impl Control {
    pub(crate) fn new(
        config: MemifConfig,
        dir: Arc<SocketDir>,
        name: OsString,
        shared: Arc<Shared>,
        signals: Signals,
        listener: Option<(UnixListener, Option<FileId>)>,
    ) -> std::io::Result<Control> {
        let Signals {
            wake,
            stop,
            requests,
        } = signals;
        let epoll = Epoll::new()?;
        epoll_add(&epoll, wake.as_fd(), EventSet::IN, TOKEN_WAKE)?;
        if let Some((l, _)) = &listener {
            epoll_add(&epoll, l.as_fd(), EventSet::IN, TOKEN_LISTENER)?;
        }
        Ok(Control {
            config,
            dir,
            name,
            shared,
            wake,
            stop,
            listener,
            requests,
            epoll,
            sessions: Vec::new(),
            next_token: FIRST_SESSION,
            backoff: BACKOFF_MIN,
            retry_at: Some(Instant::now()),
        })
    }

    /// Runs until the port closes.
    pub(crate) fn run(mut self) {
        let mut events = vec![EpollEvent::default(); 16];
        while !self.stop.load(Ordering::Acquire) {
            let timeout = self.timeout_ms();
            let n = self.epoll.wait(timeout, &mut events).unwrap_or(0);
            for e in events.iter().take(n) {
                match e.data() {
                    TOKEN_WAKE => {
                        let _ = self.wake.read();
                        while let Ok(request) = self.requests.try_recv() {
                            self.hand_over(request);
                        }
                    }
                    TOKEN_LISTENER => self.accept_all(),
                    token => self.on_session(token),
                }
            }
            self.check_connection();
            self.expire();
            self.maybe_connect();
        }
        self.close_all("interface closed");
        if let Some((_, Some(id))) = self.listener.take() {
            let _ = self.dir.remove_socket(&self.name, id);
        }
    }

    /// Describes the port for a hand-over, answers, and (when the answer was taken)
    /// parks until the requester resumes the port or lets it go.
    fn hand_over(&mut self, request: Request) {
        let connected = self.sessions.iter().find_map(|(_, s)| {
            Some(Connected {
                socket: s.sock.as_fd(),
                connection: s.connection.as_deref()?,
                peer_name: &s.peer_name,
                peer_interface: &s.peer_interface,
            })
        });
        let listener = self.listener.as_ref().map(|(l, _)| l.as_fd());
        let described = describe(&self.config, listener, connected);
        let ok = described.is_ok();
        if request.reply.send(described).is_ok() && ok {
            // Until the guard is dropped (a failed hand-over) or forever (this process
            // exits once the new one runs the port).
            let _ = request.resume.recv();
        }
    }

    fn timeout_ms(&self) -> i32 {
        let now = Instant::now();
        let next = self
            .sessions
            .iter()
            .filter_map(|(_, s)| s.deadline)
            .chain(self.retry_at.filter(|_| self.config.role == Role::Client))
            .min();
        let wait = next.map_or(Duration::from_secs(1), |t| t.saturating_duration_since(now));
        i32::try_from(wait.min(Duration::from_secs(1)).as_millis()).unwrap_or(1000) + 1
    }

    fn accept_all(&mut self) {
        loop {
            let Some((l, _)) = &self.listener else {
                return;
            };
            let stream = match l.accept() {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let sock = OwnedFd::from(stream);
            if self.sessions.len() >= MAX_SESSIONS {
                let _ = crate::fds::send(
                    sock.as_fd(),
                    &Message::disconnect("too many connections").encode(),
                    None,
                );
                self.shared.counters.refuse(Refusal::Busy);
                continue;
            }
            let handshake = ServerHandshake::new(self.server_limits());
            let session = Session::server(
                sock,
                handshake,
                Instant::now() + self.config.handshake_timeout,
            );
            if session
                .send(&ServerHandshake::new(self.server_limits()).hello(), None)
                .is_ok()
            {
                self.add_session(session);
            }
        }
    }

    /// Watches `session`'s socket; false (and the session dropped) when it cannot be.
    fn add_session(&mut self, session: Session) -> bool {
        let token = self.next_token;
        self.next_token += 1;
        let watched = epoll_add(
            &self.epoll,
            session.sock.as_fd(),
            EventSet::IN | EventSet::READ_HANG_UP,
            token,
        )
        .is_ok();
        if watched {
            self.sessions.push((token, session));
        }
        watched
    }

    fn server_limits(&self) -> ServerLimits {
        let secret = self
            .config
            .secret
            .as_ref()
            .map(|_| self.config.secret_field());
        ServerLimits {
            id: self.config.id,
            secret,
            max_rings: self.config.queue_pairs.min(MAX_QUEUE_PAIRS),
            max_regions: MAX_REGIONS,
            max_log2_ring_size: MAX_LOG2_RING_SIZE,
            max_region_bytes: self.config.max_region_bytes,
            name: Name::new(self.config.name.as_bytes()),
        }
    }

    fn on_session(&mut self, token: u64) {
        let Some(pos) = self.sessions.iter().position(|(t, _)| *t == token) else {
            return;
        };
        let busy = self
            .sessions
            .iter()
            .any(|(t, s)| *t != token && s.identified);
        let (_, session) = &mut self.sessions[pos];
        let result = session.on_readable(&self.config, &self.wake);
        let outcome = match result {
            Ok(Progress::Continue) => return,
            Ok(Progress::Identified) if busy => Err(End::Refused(
                Refusal::Busy,
                "interface already connected".into(),
            )),
            Ok(Progress::Identified) => session.ack().map(|()| None),
            Ok(Progress::Connected(conn)) => Ok(Some(conn)),
            Err(end) => Err(end),
        };
        match outcome {
            Ok(None) => {}
            Ok(Some(conn)) => {
                session.deadline = None;
                session.connection = Some(Arc::clone(&conn));
                let names = (session.peer_name.clone(), session.peer_interface.clone());
                self.connected(conn, names);
                Counters::add(&self.shared.counters.connects, 1);
                tracing::info!(role = ?self.config.role, id = self.config.id, "memif peer connected");
            }
            Err(end) => self.end_session(token, end),
        }
    }

    /// Hands a connection to the halves and says so in the port's status.
    fn connected(&mut self, conn: Arc<crate::connection::Connection>, names: (String, String)) {
        let status = PeerStatus {
            connected: true,
            peer_name: names.0,
            peer_interface: names.1,
            rings: (
                u16::try_from(conn.rx.len()).unwrap_or(0),
                u16::try_from(conn.tx.len()).unwrap_or(0),
            ),
            last_disconnect: None,
        };
        self.set_status(status);
        self.backoff = BACKOFF_MIN;
        self.retry_at = None;
        self.shared.install(Some(conn));
    }

    /// Serves a peer taken over from another process, as though it had just connected
    /// here (not counted as a connect: the peer never reconnected).
    pub(crate) fn adopt_session(&mut self, adopted: AdoptedSession) {
        let side = match self.config.role {
            Role::Server => AdoptedSide::Server(self.server_limits()),
            Role::Client => AdoptedSide::Client(self.client_plan()),
        };
        let conn = Arc::clone(&adopted.connection);
        let names = (adopted.peer_name.clone(), adopted.peer_interface.clone());
        if self.add_session(Session::adopted(side, adopted)) {
            self.connected(conn, names);
            tracing::info!(role = ?self.config.role, id = self.config.id, "memif peer taken over");
        } else {
            tracing::warn!(
                id = self.config.id,
                "memif peer taken over but not watchable: dropped"
            );
        }
    }

    /// Drops a connected peer whose ring a half found broken, or whose memory shrank.
    fn check_connection(&mut self) {
        let broken = self.sessions.iter().find_map(|(t, s)| {
            let conn = s.connection.as_ref()?;
            if conn.memory.tripped() {
                return Some((*t, true, "memory truncated under the port".to_string()));
            }
            conn.broken().then(|| {
                (
                    *t,
                    false,
                    conn.fault().unwrap_or_else(|| "ring broken".into()),
                )
            })
        });
        if let Some((token, truncated, why)) = broken {
            let c = &self.shared.counters;
            Counters::add(
                if truncated {
                    &c.memory_truncated
                } else {
                    &c.ring_faults
                },
                1,
            );
            tracing::warn!(reason = %why, "memif peer dropped");
            // end_session tells the peer why: its connection is broken.
            self.end_session(token, End::PeerLeft(why));
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let late: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.deadline.is_some_and(|d| d <= now))
            .map(|(t, _)| *t)
            .collect();
        for token in late {
            self.end_session(
                token,
                End::Refused(Refusal::Timeout, "handshake timed out".into()),
            );
        }
    }

    fn maybe_connect(&mut self) {
        if self.config.role != Role::Client || !self.sessions.is_empty() {
            return;
        }
        let now = Instant::now();
        if self.retry_at.is_some_and(|t| t > now) {
            return;
        }
        match self.dir.connect_seqpacket(&self.name) {
            Ok(sock) => {
                let handshake = ClientHandshake::new(self.client_plan());
                let session = Session::client(sock, handshake, now + self.config.handshake_timeout);
                self.add_session(session);
                self.retry_at = None;
            }
            Err(e) => {
                if !e.is_absent() {
                    tracing::debug!(error = %e, "memif connect failed");
                }
                self.schedule_retry();
            }
        }
    }

    fn schedule_retry(&mut self) {
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    fn client_plan(&self) -> ClientPlan {
        ClientPlan {
            id: self.config.id,
            secret: self.config.secret_field(),
            queue_pairs: self.config.queue_pairs,
            log2_ring_size: self.config.log2_ring_size,
            buffer_size: self.config.buffer_size,
            name: Name::new(self.config.name.as_bytes()),
            interface_name: Name::new(self.config.interface_name.as_bytes()),
        }
    }

    /// Ends a session: a refusal is counted and told to the peer; a connected peer's
    /// connection is withdrawn from the halves (its memory unmapped once they let go).
    fn end_session(&mut self, token: u64, end: End) {
        let Some(pos) = self.sessions.iter().position(|(t, _)| *t == token) else {
            return;
        };
        let (_, session) = self.sessions.remove(pos);
        let _ = epoll_delete(&self.epoll, session.sock.as_fd());
        let why = match &end {
            End::Refused(reason, why) => {
                self.shared.counters.refuse(*reason);
                let _ = session.send(&Message::disconnect(why), None);
                tracing::info!(reason = %why, "memif peer refused");
                why.clone()
            }
            End::PeerLeft(why) => {
                if session
                    .connection
                    .as_ref()
                    .is_some_and(|c| c.broken() || c.memory.tripped())
                {
                    // A peer that broke its ring is told why; one that left needs no
                    // answer (nor is it counted: a server refusing a client that came
                    // before it was started is no hostile peer).
                    let _ = session.send(&Message::disconnect(why), None);
                }
                why.clone()
            }
        };
        if session.connection.is_some() {
            Counters::add(&self.shared.counters.disconnects, 1);
            self.shared.install(None);
            let mut status = self.status();
            status.connected = false;
            status.last_disconnect = Some(why);
            self.set_status(status);
        }
        if session.role() == Role::Client {
            self.schedule_retry();
        }
    }

    fn close_all(&mut self, why: &str) {
        let tokens: Vec<u64> = self.sessions.iter().map(|(t, _)| *t).collect();
        for token in tokens {
            if let Some((_, s)) = self.sessions.iter().find(|(t, _)| *t == token) {
                let _ = s.send(&Message::disconnect(why), None);
            }
            self.end_session(token, End::PeerLeft(why.into()));
        }
    }

    fn status(&self) -> PeerStatus {
        self.shared
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    fn set_status(&self, status: PeerStatus) {
        if let Ok(mut s) = self.shared.status.lock() {
            *s = status;
        }
    }
}
