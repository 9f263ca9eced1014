//! The state one port's control thread and data path share: its queues, the negotiated
//! features, and the readiness descriptor an idle worker sleeps on.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;
use weft_switch::PortCaps;

use crate::config::VhostPortConfig;
use crate::error::VhostError;
use crate::features::Features;
use crate::memory::{DirtyLog, GuardedMemory, LogCounters, LogRefusals, MemoryRefusals, RingLog};
use crate::vring::{is_guest_tx, RingError, RingLayout, Vring, VringState};

/// Shared by the control thread and the two halves of one port.
pub(crate) struct DeviceShared {
    pub(crate) config: VhostPortConfig,
    /// `2k`: pair `k`'s receive queue, `2k + 1`: its transmit queue; at least one pair
    /// (the config is validated).
    pub(crate) vrings: Vec<Vring>,
    /// Negotiated features (0 while no frontend has set any).
    features: AtomicU64,
    /// Bumped whenever `features` (and so the caps) change.
    caps_generation: AtomicU64,
    /// Per queue pair: holds its transmit queue's kick descriptor while it has one. These
    /// descriptors never change, so the lanes' sets built from them (`LaneShare`) and a
    /// worker's epoll set need not follow reconnections.
    pair_readiness: Vec<Epoll>,
    pub(crate) connected: AtomicBool,
    /// Memory tables refused, by reason.
    pub(crate) memory_refusals: MemoryRefusals,
    /// Logging requests refused, by reason.
    pub(crate) log_refusals: LogRefusals,
    /// What the rings logged while the frontend had dirty logging on.
    pub(crate) log_counters: Arc<LogCounters>,
    /// Whether the rings log now, and the size of the log they write (for status).
    logging: AtomicBool,
    log_bytes: AtomicU64,
    /// A guest MAC to announce from this port (`SEND_RARP`), with [`ANNOUNCE_PENDING`] set
    /// until the receive half sends it.
    announce: AtomicU64,
    /// Announcements sent.
    pub(crate) announcements: AtomicU64,
    /// The MTU the frontend gave its guest (`NET_SET_MTU`); 0 until it says.
    pub(crate) guest_mtu: AtomicU32,
    /// `NET_SET_MTU` requests refused.
    pub(crate) mtu_refusals: AtomicU64,
}

/// Marks [`DeviceShared::announce`] as holding a MAC to announce.
const ANNOUNCE_PENDING: u64 = 1 << 63;

impl DeviceShared {
    pub(crate) fn new(config: VhostPortConfig) -> Result<Arc<Self>, VhostError> {
        config.validate()?;
        Ok(Arc::new(DeviceShared {
            vrings: (0..config.num_queues())
                .map(|i| Vring::new(queue_name(i), config.max_queue_size))
                .collect::<Result<_, _>>()?,
            config,
            features: AtomicU64::new(0),
            caps_generation: AtomicU64::new(0),
            pair_readiness: (0..config.queue_pairs)
                .map(|_| Epoll::new().map_err(VhostError::io("creating the readiness epoll")))
                .collect::<Result<_, _>>()?,
            connected: AtomicBool::new(false),
            memory_refusals: MemoryRefusals::default(),
            log_refusals: LogRefusals::default(),
            log_counters: Arc::default(),
            logging: AtomicBool::new(false),
            log_bytes: AtomicU64::new(0),
            announce: AtomicU64::new(0),
            announcements: AtomicU64::new(0),
            guest_mtu: AtomicU32::new(0),
            mtu_refusals: AtomicU64::new(0),
        }))
    }

    /// The guest's first receive queue (the port transmits into it).
    #[cfg(test)]
    pub(crate) fn rx_vring(&self) -> &Vring {
        &self.vrings[crate::vring::RX_QUEUE]
    }

    /// The guest's first transmit queue (the port receives from it).
    #[cfg(test)]
    pub(crate) fn tx_vring(&self) -> &Vring {
        &self.vrings[crate::vring::TX_QUEUE]
    }

    /// Queue pairs of the port.
    pub(crate) fn queue_pairs(&self) -> usize {
        self.vrings.len() / 2
    }

    /// Pair `pair`'s receive queue (the port transmits into it).
    pub(crate) fn rx_vring_of(&self, pair: usize) -> Option<&Vring> {
        self.vrings.get(2 * pair)
    }

    /// Pair `pair`'s transmit queue (the port receives from it).
    pub(crate) fn tx_vring_of(&self, pair: usize) -> Option<&Vring> {
        self.vrings.get(2 * pair + 1)
    }

    pub(crate) fn features(&self) -> Features {
        Features(self.features.load(Ordering::Acquire))
    }

    pub(crate) fn set_features(&self, features: Features) {
        if self.features.swap(features.0, Ordering::AcqRel) != features.0 {
            self.caps_generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Changes whenever the caps may have changed.
    pub(crate) fn caps_generation(&self) -> u64 {
        self.caps_generation.load(Ordering::Acquire)
    }

    /// What the port can transmit now (conservative until features are negotiated).
    pub(crate) fn caps(&self) -> PortCaps {
        self.features().port_caps(self.config.mtu)
    }

    /// An epoll set that is readable when a kick arrives on any transmit queue `lane`
    /// serves (it holds those pairs' own sets).
    pub(crate) fn lane_readiness(&self, lane: LaneShare) -> Result<Epoll, VhostError> {
        let set = Epoll::new().map_err(VhostError::io("creating the readiness epoll"))?;
        for (pair, inner) in self.pair_readiness.iter().enumerate() {
            if lane.owns(pair) {
                set.ctl(
                    ControlOperation::Add,
                    inner.as_raw_fd(),
                    EpollEvent::new(EventSet::IN, 0),
                )
                .map_err(VhostError::io("building the readiness epoll"))?;
            }
        }
        Ok(set)
    }

    /// Replaces ring `index`'s kick descriptor, keeping the readiness set in step: a
    /// descriptor is removed from the set before it is closed (once closed here it could
    /// no longer be removed, and the frontend's copy would keep waking the worker).
    pub(crate) fn replace_kick(&self, index: usize, state: &mut VringState, kick: Option<EventFd>) {
        let readiness = self.pair_readiness.get(index / 2);
        if let (true, Some(readiness)) = (is_guest_tx(index), readiness) {
            if let Some(old) = &state.kick {
                let _ = readiness.ctl(
                    ControlOperation::Delete,
                    old.as_raw_fd(),
                    EpollEvent::default(),
                );
            }
            if let Some(new) = &kick {
                if let Err(e) = readiness.ctl(
                    ControlOperation::Add,
                    new.as_raw_fd(),
                    EpollEvent::new(EventSet::IN, 0),
                ) {
                    tracing::warn!(error = %e, "cannot watch the transmit queue's kicks");
                }
            }
        }
        state.kick = kick;
    }

    /// Records whether the rings log dirty pages now, into `log`.
    pub(crate) fn set_logging(&self, on: bool, log: Option<&DirtyLog>) {
        self.logging.store(on, Ordering::Relaxed);
        let bytes = log.map_or(0, |l| l.len() as u64);
        self.log_bytes
            .store(if on { bytes } else { 0 }, Ordering::Relaxed);
    }

    /// Whether the rings log dirty pages now, and the bytes of the log.
    pub(crate) fn logging(&self) -> (bool, u64) {
        (
            self.logging.load(Ordering::Relaxed),
            self.log_bytes.load(Ordering::Relaxed),
        )
    }

    /// Asks the receive half to announce `mac` (a later request replaces an earlier one
    /// not yet sent) and wakes its worker.
    pub(crate) fn request_announce(&self, mac: [u8; 6]) {
        let mut word = [0u8; 8];
        word[..6].copy_from_slice(&mac);
        self.announce.store(
            u64::from_le_bytes(word) | ANNOUNCE_PENDING,
            Ordering::Release,
        );
        for pair in 0..self.queue_pairs() {
            if let Some(vring) = self.tx_vring_of(pair) {
                if let Some(kick) = &vring.lock().kick {
                    let _ = kick.write(1);
                    break;
                }
            }
        }
    }

    /// The MAC waiting to be announced, if any, left waiting (a hand-over carries it).
    pub(crate) fn pending_announce(&self) -> Option<[u8; 6]> {
        let word = self.announce.load(Ordering::Acquire);
        if word & ANNOUNCE_PENDING == 0 {
            return None;
        }
        let bytes = word.to_le_bytes();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&bytes[..6]);
        Some(mac)
    }

    /// The MAC to announce, if one is waiting (taken: announced once).
    pub(crate) fn take_announce(&self) -> Option<[u8; 6]> {
        if self.announce.load(Ordering::Relaxed) & ANNOUNCE_PENDING == 0 {
            return None;
        }
        let word = self.announce.swap(0, Ordering::Acquire);
        if word & ANNOUNCE_PENDING == 0 {
            return None;
        }
        let bytes = word.to_le_bytes();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&bytes[..6]);
        Some(mac)
    }

    /// Starts ring `index` (under its lock) with its descriptors, logging as `dirty` says.
    pub(crate) fn start_ring(
        &self,
        index: usize,
        start: RingStart,
        dirty: Option<RingLog>,
    ) -> Result<(), RingError> {
        let vring = self.vrings.get(index).ok_or(RingError::BadSize(0))?;
        let mut state = vring.lock();
        state.dirty = dirty;
        state.start(
            start.mem,
            &start.layout,
            start.features,
            self.config.max_queue_size,
        )?;
        state.enabled = start.enabled;
        state.call = start.call;
        self.replace_kick(index, &mut state, start.kick);
        if is_guest_tx(index) {
            // Wake the worker so it looks at buffers the guest queued before the start.
            if let Some(kick) = &state.kick {
                let _ = kick.write(1);
            }
        } else if let Some(mem) = state.mem.clone() {
            // The guest's receive queue: the port never waits for its buffers (a frame that
            // finds none is dropped and counted), so a kick after each refill would only
            // cost the guest a VM exit (a system call for DPDK's virtio-user) for nothing.
            // Ask it never to: NO_NOTIFY, or with EVENT_IDX an `avail_event` it passes once
            // per 65536 buffers. A ring whose used ring cannot be written faults in use.
            if state.hold_off_kicks(&mem).is_ok() {
                state.guest_kicks = Some(false);
            }
        }
        Ok(())
    }
}

/// Which queue pairs of a port one lane of a switch serves (`weft_switch::lanes`): pair
/// `p` belongs to lane `p % lanes`. With one lane, every pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneShare {
    pub(crate) index: usize,
    pub(crate) lanes: usize,
}

impl LaneShare {
    /// The whole port, for a switch with one lane.
    #[cfg(any(test, fuzzing))]
    pub(crate) const WHOLE: LaneShare = LaneShare { index: 0, lanes: 1 };

    pub(crate) fn owns(self, pair: usize) -> bool {
        pair % self.lanes.max(1) == self.index
    }
}

/// Virtqueue `index`'s name as the guest knows it (`rx<k>` / `tx<k>` for queue pair k), in
/// logs and in `weft port show`.
pub fn queue_name(index: usize) -> &'static str {
    const NAMES: [&str; 32] = [
        "rx0", "tx0", "rx1", "tx1", "rx2", "tx2", "rx3", "tx3", "rx4", "tx4", "rx5", "tx5", "rx6",
        "tx6", "rx7", "tx7", "rx8", "tx8", "rx9", "tx9", "rx10", "tx10", "rx11", "tx11", "rx12",
        "tx12", "rx13", "tx13", "rx14", "tx14", "rx15", "tx15",
    ];
    NAMES.get(index).copied().unwrap_or("queue")
}

/// Everything a ring needs to start.
pub(crate) struct RingStart {
    pub(crate) mem: Arc<GuardedMemory>,
    pub(crate) layout: RingLayout,
    pub(crate) features: Features,
    pub(crate) enabled: bool,
    pub(crate) kick: Option<EventFd>,
    pub(crate) call: Option<EventFd>,
}
