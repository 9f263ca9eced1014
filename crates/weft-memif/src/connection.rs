//! One connected peer's memory and rings, and the place where the control thread hands
//! it to the data path.
//!
//! The control thread builds a [`Connection`] when a handshake completes and installs it
//! in [`Shared`]; the halves pick it up between batches (a generation number tells them it
//! changed), so they never wait on the control thread. When the peer goes, the control
//! thread installs `None`; the memory is unmapped when the last half lets go of its
//! `Arc` — after the batch that still holds frames from it is finished.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use weft_sys::event::EventFd;

use crate::config::Role;
use crate::counters::Counters;
use crate::fds::Interrupt;
use crate::memory::SharedMemory;
use crate::ring::{Consumer, OwnBuffers, Producer, RingPlace};

/// A ring weft consumes, as the data path sets it up.
#[derive(Debug)]
pub(crate) struct RxRing {
    pub(crate) place: RingPlace,
    pub(crate) interrupt: Interrupt,
    pub(crate) own: Option<OwnBuffers>,
    /// Where the receive half's cursor stood when it last gave slots back, and (a client)
    /// how far it had offered slots: what a hand-over carries (the indexes in shared
    /// memory are the peer's to scribble on).
    pub(crate) released: AtomicU16,
    pub(crate) offered: AtomicU16,
}

impl RxRing {
    /// A ring of a fresh connection.
    pub(crate) fn new(place: RingPlace, interrupt: Interrupt, own: Option<OwnBuffers>) -> Self {
        RxRing {
            place,
            interrupt,
            own,
            released: AtomicU16::new(0),
            offered: AtomicU16::new(0),
        }
    }

    /// A ring taken over from another process, whose half had read up to `released` and
    /// (a client) offered slots up to `offered`.
    pub(crate) fn resumed(mut self, released: u16, offered: u16) -> Self {
        self.released = AtomicU16::new(released);
        self.offered = AtomicU16::new(offered);
        self
    }

    /// The receiving end a half reads the ring with, from where the last one stopped (the
    /// start, on a fresh connection: both positions 0).
    pub(crate) fn consumer(&self, role: Role, buffer_size: u32) -> Consumer {
        let mut consumer = Consumer::new(self.place, role, self.own, buffer_size);
        consumer.resume_at(
            self.released.load(Ordering::Acquire),
            self.offered.load(Ordering::Acquire),
        );
        consumer
    }

    /// Notes where `consumer` stands after it gave slots back (its half owns it; this is
    /// the copy a hand-over reads).
    pub(crate) fn note_released(&self, consumer: &Consumer) {
        self.released.store(consumer.cursor(), Ordering::Release);
        self.offered.store(consumer.offered(), Ordering::Release);
    }
}

/// A ring weft produces into: its cursor lives here, behind a lock, because several
/// lanes' transmit halves may share one ring when fewer were negotiated.
#[derive(Debug)]
pub(crate) struct TxRing {
    pub(crate) producer: Producer,
    pub(crate) interrupt: Interrupt,
}

/// A connected peer.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) memory: SharedMemory,
    pub(crate) role: Role,
    pub(crate) buffer_size: u32,
    pub(crate) rx: Vec<RxRing>,
    pub(crate) tx: Vec<Mutex<TxRing>>,
    fault: Mutex<Option<String>>,
    faulted: AtomicBool,
    control_wake: Arc<EventFd>,
}

impl Connection {
    pub(crate) fn new(
        memory: SharedMemory,
        role: Role,
        buffer_size: u32,
        rx: Vec<RxRing>,
        tx: Vec<TxRing>,
        control_wake: Arc<EventFd>,
    ) -> Connection {
        Connection {
            memory,
            role,
            buffer_size,
            rx,
            tx: tx.into_iter().map(Mutex::new).collect(),
            fault: Mutex::new(None),
            faulted: AtomicBool::new(false),
            control_wake,
        }
    }

    /// The data path found the peer broke a ring: the control thread drops it.
    pub(crate) fn fail(&self, why: String) {
        if self.faulted.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Ok(mut f) = self.fault.lock() {
            *f = Some(why);
        }
        let _ = self.control_wake.write(1);
    }

    /// True once a half found a fault (or the memory lost pages).
    pub(crate) fn broken(&self) -> bool {
        self.faulted.load(Ordering::Acquire)
    }

    /// Why it broke.
    pub(crate) fn fault(&self) -> Option<String> {
        self.fault.lock().ok().and_then(|f| f.clone())
    }
}

/// What the control thread and the halves share.
#[derive(Debug)]
pub(crate) struct Shared {
    current: Mutex<Option<Arc<Connection>>>,
    generation: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) status: Mutex<PeerStatus>,
    /// One per queue pair: wakes the receive half serving it.
    pub(crate) rx_wakes: Vec<EventFd>,
}

/// The peer as the control thread last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerStatus {
    /// A peer completed its handshake and is there.
    pub connected: bool,
    /// Its application name (HELLO or INIT).
    pub peer_name: String,
    /// Its interface name (CONNECT or CONNECTED).
    pub peer_interface: String,
    /// Rings negotiated: (peer to weft, weft to peer).
    pub rings: (u16, u16),
    /// Why the last peer went, if one went.
    pub last_disconnect: Option<String>,
}

impl Shared {
    pub(crate) fn new(queue_pairs: u16) -> std::io::Result<Shared> {
        let rx_wakes = (0..queue_pairs)
            .map(|_| EventFd::new(true))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Shared {
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            counters: Counters::default(),
            status: Mutex::new(PeerStatus::default()),
            rx_wakes,
        })
    }

    /// Hands `conn` (or no connection) to the halves and wakes the receive halves.
    pub(crate) fn install(&self, conn: Option<Arc<Connection>>) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        *current = conn;
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(current);
        for w in &self.rx_wakes {
            let _ = w.write(1);
        }
    }

    /// The generation now: changes whenever [`Shared::install`] runs.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The connection and its generation.
    pub(crate) fn current(&self) -> (u64, Option<Arc<Connection>>) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (self.generation(), current.clone())
    }
}
