//! weft-client: lets any process own a weft port.
//!
//! A [`WeftClient`] is a vhost-user **frontend** — the role QEMU or DPDK's virtio-user play —
//! with its own shared memory: a sealed memfd, mapped shared and handed to the backend in
//! `SET_MEM_TABLE`. In it lie two split virtqueues (receive = queue 0, transmit = queue 1)
//! and their buffers. The protocol messages are the rust-vmm `vhost` crate's
//! [`Frontend`](vhost::vhost_user::Frontend); the rings are driven by hand (`ring.rs` says
//! why); memory is accessed only through `vm-memory`, so the crate has no `unsafe`.
//!
//! The API is netmap-like, in batches:
//!
//! - [`WeftClient::send_batch`]: many frames, one index update, at most one kick (none
//!   when the backend suppresses it with `EVENT_IDX` / `NO_NOTIFY`). It queues what fits
//!   and returns how many; [`WeftClient::wait_tx_space`] waits for room (backpressure).
//! - [`WeftClient::recv_batch`] / [`WeftClient::recv_wait`]: up to `max` frames copied into
//!   a reusable [`RecvBatch`], their buffers posted again in one go.
//! - Waiting: [`WaitMode::BusyPoll`] (spin on the used index), [`WaitMode::Block`] (sleep
//!   on the backend's call eventfd, armed through the used-event index) or
//!   [`WaitMode::Adaptive`] (spin a while, then sleep). Or wait in your own event loop on
//!   [`WeftClient::rx_call_fd`] after [`WeftClient::arm_rx_notification`].
//! - Offloads: frames above the MTU go as TCP or UDP super-frames with an [`OffloadInfo`]
//!   (`gso`, `gso_size`, `hdr_len`, `needs_csum` with `csum_start`/`csum_offset`) when
//!   `HOST_TSO4/6` or `HOST_USO` were negotiated; received frames carry theirs in
//!   [`RxFrame::offload`].
//!
//! Features accepted (only when offered and enabled in [`ClientConfig`]): `VERSION_1`
//! (required), `MRG_RXBUF`, `CSUM`, `GUEST_CSUM`, `HOST_TSO4/6`, `GUEST_TSO4/6`,
//! `HOST_USO`, `GUEST_USO4/6`, `EVENT_IDX`; vhost-user protocol feature `REPLY_ACK`. Nothing else: a driver must not
//! accept what it does not implement.
//!
//! The backend is not trusted: used-ring ids out of range or not in flight, lengths beyond
//! a buffer, a used index running ahead, bad virtio-net headers and unnegotiated offloads
//! are counted by [`RingFault`] in [`WeftClient::stats`], never a panic.
//!
//! ```no_run
//! use std::time::Duration;
//! use weft_client::{ClientConfig, RecvBatch, TxFrame, WaitMode, WeftClient};
//!
//! # fn main() -> Result<(), weft_client::ClientError> {
//! let mut client = WeftClient::connect("/run/weft/vhost/br0-app.sock", ClientConfig::default())?;
//! let frame = [0u8; 60]; // an Ethernet frame
//! let sent = client.send_batch(&[TxFrame::plain(&frame); 32])?;
//! let mut batch = RecvBatch::new();
//! let n = client.recv_wait(&mut batch, 64, Duration::from_millis(100), WaitMode::Block)?;
//! for f in batch.iter() {
//!     println!("{} bytes, gso {:?}", f.bytes.len(), f.offload.gso);
//! }
//! # let _ = (sent, n);
//! # Ok(()) }
//! ```
//!
//! A complete program: `examples/pingpong.rs` (two clients through a weft switch).
#![deny(missing_docs)]

mod client;
mod config;
mod error;
mod memory;
mod notify;
mod ring;
mod rx;
mod stats;
mod tx;

pub use client::{WaitMode, WeftClient};
pub use config::{ClientConfig, Negotiated, HEADER_LEN, MAX_FRAME_LEN};
pub use error::{ClientError, FrameError};
pub use rx::{RecvBatch, RxFrame};
pub use stats::{ClientStats, RingFault, RingStats};
pub use tx::TxFrame;
pub use weft_packet::{GsoKind, OffloadInfo};
