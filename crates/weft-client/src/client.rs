//! Connecting: negotiation, the memory layout, ring setup over the vhost-user socket.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{
    VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;

use crate::config::{ClientConfig, Negotiated, HEADER_LEN};
use crate::error::ClientError;
use crate::memory::SharedMemory;
use crate::notify::Notifier;
use crate::ring::{DriverRing, RingLayout};
use crate::rx::{RecvBatch, RxQueue};
use crate::stats::ClientStats;
use crate::tx::{TxFrame, TxQueue};

/// Virtqueue indexes (virtio-net): the device transmits to us on 0, we transmit on 1.
const RX_QUEUE: usize = 0;
const TX_QUEUE: usize = 1;
const PAGE: u64 = 4096;

/// How a blocking call waits for the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Poll the ring without sleeping (lowest latency, a core busy while waiting). Between
    /// polls the thread yields (`sched_yield`), so that threads sharing its core — the
    /// other end of a ping-pong, the switch on a small machine — still run.
    BusyPoll,
    /// Sleep on the backend's call eventfd at once (no CPU while idle, a wake-up per wait).
    Block,
    /// Poll for `spin`, then sleep on the call eventfd.
    Adaptive {
        /// How long to poll before sleeping.
        spin: Duration,
    },
}

/// One weft port, owned by this process: a vhost-user frontend with its own shared memory.
///
/// Single-owner (`&mut self` everywhere); move it to the thread that uses it.
pub struct WeftClient {
    // Dropped first: closing the socket tells the backend to stop before the memory goes.
    frontend: Frontend,
    rx: RxQueue,
    tx: TxQueue,
    mem: SharedMemory,
    negotiated: Negotiated,
    config: ClientConfig,
}

impl std::fmt::Debug for WeftClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeftClient")
            .field("negotiated", &self.negotiated)
            .field("config", &self.config)
            .field("memory_len", &self.mem.len())
            .finish_non_exhaustive()
    }
}

/// Between two polls: yield when busy-polling, else a CPU spin hint.
fn pause(mode: WaitMode) {
    if mode == WaitMode::BusyPoll {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn stride(len: usize) -> u64 {
    (len as u64).next_multiple_of(64)
}

impl WeftClient {
    /// Connects to the vhost-user socket at `path` (a weft `vhost_user` port), negotiates
    /// features, creates the shared memory, sets up both rings and posts every receive
    /// buffer. Frames can flow when it returns.
    pub fn connect(
        path: impl AsRef<Path>,
        config: ClientConfig,
    ) -> Result<WeftClient, ClientError> {
        config.validate().map_err(ClientError::Config)?;
        Self::set_up(Frontend::connect(path, 2)?, config)
    }

    /// The same over a connection already made: the side that listens, for a weft port in
    /// client mode (`--vhost-mode client`), which connects to the frontend as QEMU's
    /// `server=on` sockets expect.
    pub fn from_stream(
        stream: UnixStream,
        config: ClientConfig,
    ) -> Result<WeftClient, ClientError> {
        config.validate().map_err(ClientError::Config)?;
        Self::set_up(Frontend::from_stream(stream, 2), config)
    }

    fn set_up(frontend: Frontend, config: ClientConfig) -> Result<WeftClient, ClientError> {
        frontend.set_owner()?;
        let offered = frontend.get_features()?;
        if offered & crate::config::bit(VIRTIO_F_VERSION_1) == 0 {
            return Err(ClientError::NoVersion1(offered));
        }
        let negotiated = Negotiated(offered & config.wanted_features());
        let protocol_bit = VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
        frontend.set_features(negotiated.0 | (offered & protocol_bit))?;
        let mut frontend = frontend;
        if offered & protocol_bit != 0 {
            let protocol = frontend.get_protocol_features()?;
            let wanted = protocol & VhostUserProtocolFeatures::REPLY_ACK;
            frontend.set_protocol_features(wanted)?;
            if !wanted.is_empty() {
                // Every request acknowledged: a refused setup fails here, not later.
                frontend.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
            }
        }

        // Layout: both rings, then receive buffers, then transmit buffers.
        let size = config.queue_size;
        let rx_layout = RingLayout::new(0, size);
        let tx_layout = RingLayout::new(rx_layout.len().next_multiple_of(PAGE), size);
        let rx_buffer_len = if negotiated.mergeable_rx() {
            config.rx_buffer_len
        } else {
            HEADER_LEN + negotiated.max_rx_frame(config.mtu)
        };
        let rx_stride = stride(rx_buffer_len);
        let tx_stride = stride(HEADER_LEN + negotiated.max_tx_frame(config.mtu));
        let rx_buffers = (tx_layout.desc + tx_layout.len()).next_multiple_of(PAGE);
        let tx_buffers = rx_buffers + rx_stride * u64::from(size);
        let total = (tx_buffers + tx_stride * u64::from(size)).next_multiple_of(PAGE);
        let total = usize::try_from(total).map_err(|_| ClientError::MemoryTooLarge(usize::MAX))?;
        let mem = SharedMemory::new(total)?;
        let va = mem.host_address();
        frontend.set_mem_table(&[VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: total as u64,
            userspace_addr: va,
            mmap_offset: 0,
            mmap_handle: mem.raw_fd(),
        }])?;

        let event_idx = negotiated.event_idx();
        let rx = RxQueue::new(
            &mem,
            DriverRing::new(rx_layout, event_idx),
            Notifier::new()?,
            rx_buffers,
            u32::try_from(rx_stride).map_err(|_| ClientError::Config("rx_buffer_len too large"))?,
            negotiated,
            config.mtu,
        )?;
        let tx = TxQueue::new(
            DriverRing::new(tx_layout, event_idx),
            Notifier::new()?,
            tx_buffers,
            tx_stride,
            negotiated,
            config.mtu,
        );
        for (index, layout, notifier) in [
            (RX_QUEUE, rx_layout, &rx.notifier),
            (TX_QUEUE, tx_layout, &tx.notifier),
        ] {
            frontend.set_vring_num(index, size)?;
            frontend.set_vring_base(index, 0)?;
            frontend.set_vring_addr(
                index,
                &VringConfigData {
                    queue_max_size: size,
                    queue_size: size,
                    flags: 0,
                    desc_table_addr: va + layout.desc,
                    used_ring_addr: va + layout.used,
                    avail_ring_addr: va + layout.avail,
                    log_addr: None,
                },
            )?;
            frontend.set_vring_call(index, &notifier.call)?;
            frontend.set_vring_kick(index, &notifier.kick)?;
            frontend.set_vring_enable(index, true)?;
        }
        // The backend may have missed the receive buffers posted before its ring started.
        rx.notifier.kick()?;
        Ok(WeftClient {
            frontend,
            rx,
            tx,
            mem,
            negotiated,
            config,
        })
    }

    /// Queues as many of `frames` as there are free transmit slots, with one index update
    /// and at most one kick (none when the backend suppressed it with `EVENT_IDX` or
    /// `NO_NOTIFY`). Returns how many were queued: a prefix of `frames`; the rest is yours
    /// to send again once there is room ([`wait_tx_space`](Self::wait_tx_space)) —
    /// backpressure, never loss. Every frame is checked first (length; offloads must have
    /// been negotiated; frames above the MTU must be GSO super-frames): one bad frame
    /// refuses the whole batch with [`ClientError::BadFrame`].
    pub fn send_batch(&mut self, frames: &[TxFrame<'_>]) -> Result<usize, ClientError> {
        self.tx.send(&self.mem, frames)
    }

    /// Free transmit slots now (completed sends reclaimed first).
    pub fn tx_space(&mut self) -> Result<usize, ClientError> {
        self.tx.space(&self.mem)
    }

    /// Waits, as `mode` says, until a transmit slot is free or `timeout` passes. True when
    /// there is room.
    pub fn wait_tx_space(
        &mut self,
        timeout: Duration,
        mode: WaitMode,
    ) -> Result<bool, ClientError> {
        let deadline = Instant::now() + timeout;
        let spin_until = match mode {
            WaitMode::BusyPoll => deadline,
            WaitMode::Block => Instant::now(),
            WaitMode::Adaptive { spin } => Instant::now() + spin.min(timeout),
        };
        loop {
            if self.tx.space(&self.mem)? > 0 {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            if now >= spin_until {
                // A wake-up may be stale (a call for buffers already reclaimed): look again.
                self.tx.wait_space(&self.mem, deadline - now)?;
            } else {
                pause(mode);
            }
        }
    }

    /// Receives up to `max` frames into `out` (cleared first) without waiting; their
    /// buffers go back to the ring at once, with at most one kick. Returns how many.
    pub fn recv_batch(&mut self, out: &mut RecvBatch, max: usize) -> Result<usize, ClientError> {
        self.rx.recv(&self.mem, out, max)
    }

    /// Like [`recv_batch`](Self::recv_batch), but waits as `mode` says, up to `timeout`,
    /// when nothing is there. Returns 0 on timeout.
    pub fn recv_wait(
        &mut self,
        out: &mut RecvBatch,
        max: usize,
        timeout: Duration,
        mode: WaitMode,
    ) -> Result<usize, ClientError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let spin_until = match mode {
            WaitMode::BusyPoll => deadline,
            WaitMode::Block => start,
            WaitMode::Adaptive { spin } => start + spin.min(timeout),
        };
        loop {
            let n = self.rx.recv(&self.mem, out, max)?;
            if n > 0 {
                return Ok(n);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(0);
            }
            if now >= spin_until {
                self.rx.wait(&self.mem, deadline - now)?;
            } else {
                pause(mode);
            }
        }
    }

    /// True when frames wait to be received.
    pub fn rx_ready(&mut self) -> Result<bool, ClientError> {
        self.rx.ready(&self.mem)
    }

    /// The receive queue's call eventfd, to wait in your own event loop: arm it with
    /// [`arm_rx_notification`](Self::arm_rx_notification) first.
    pub fn rx_call_fd(&self) -> std::os::fd::RawFd {
        self.rx.notifier.call_fd()
    }

    /// Asks the backend to signal [`rx_call_fd`](Self::rx_call_fd) when frames arrive.
    /// Returns true if some already have (do not sleep then).
    pub fn arm_rx_notification(&mut self) -> Result<bool, ClientError> {
        self.rx.ring.set_interrupts(&self.mem, true)?;
        self.rx.ready(&self.mem)
    }

    /// The features agreed with the backend.
    pub fn negotiated(&self) -> Negotiated {
        self.negotiated
    }

    /// The configuration this client was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Counters: frames, bytes, kicks sent and suppressed, sleeps, backend faults.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            tx: self.tx.ring.stats,
            rx: self.rx.ring.stats,
        }
    }

    /// Bytes of shared memory this client mapped (rings and buffers).
    pub fn memory_len(&self) -> usize {
        self.mem.len()
    }

    /// Stops both rings at the backend (it reports where it stopped) and disconnects.
    pub fn close(self) -> Result<(), ClientError> {
        for index in [RX_QUEUE, TX_QUEUE] {
            self.frontend.get_vring_base(index)?;
        }
        Ok(())
    }
}
