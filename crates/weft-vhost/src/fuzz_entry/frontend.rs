//! The `vhost_frontend` fuzz target's body: a frontend sending anything on the socket.
//!
//! The input decodes into up to 64 records, each a vhost-user message — mostly real requests
//! with often well-formed bodies (features, ring sizes, ring addresses inside a memory table
//! of memfds sent with it, kick and call eventfds), sometimes perturbed, with a wrong size or
//! stray descriptors, or garbage — or a whole ring's setup. All are written to one end of a
//! socket pair, shut for writing (a truncated message ends in end-of-file, not a wait); the
//! other end goes where `server/serve.rs` sends a connection: the requests the `vhost` crate
//! does not dispatch (`server/side_requests.rs`), then the crate's handler over the port's
//! `Device`. Rings that then run serve once (the guest maybe having posted a buffer
//! on each); the device is reset as at a disconnection, and the halves look once more.
//!
//! Checks: nothing panics or hangs; replies are whole and answer requests sent; frames are
//! at most [`MAX_FRAME_LEN`]; nothing serves after the reset; and then, with the port's state
//! and halves alive as when it waits for the next frontend, no memfd or eventfd this frontend
//! sent is open (but its own copies) or mapped: one kept leaks anew at every reconnection.

use std::io::Read;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use vhost::vhost_user::{BackendReqHandler, Error as VhostUserError};
use virtio_queue::desc::split::Descriptor;
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::config::{VhostPortConfig, MAX_FRAME_LEN};
use crate::control::Device;
use crate::device::{DeviceShared, LaneShare};
use crate::rx::VhostPortRx;
use crate::server::{serve_side_request, Side};
use crate::tx::VhostPortTx;
use crate::vring::is_guest_tx;

use super::Input;
use hostile::{Frontend, REPLY, VERSION};

mod hostile;

/// Input looked at: all it decodes into must fit the socket's buffer, unread.
const MAX_INPUT: usize = 16 << 10;
/// Records decoded: a message each, or four for a whole ring.
const MAX_RECORDS: usize = 64;
/// The largest body vhost-user allows.
const MAX_MSG_SIZE: usize = 0x1000;

/// What the switch sends the guest and the guest the switch.
const FRAME: [u8; 64] = {
    let mut f = [0u8; 64];
    (f[0], f[5], f[6], f[11], f[12], f[13]) = (2, 1, 2, 2, 0x88, 0xb5);
    f
};

/// What one run got through (for the tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    sent: usize,
    handled: usize,
    replies: usize,
    serving: usize,
    received: usize,
    delivered: usize,
}

/// The guest makes a buffer available on every serving ring, as a driver would: a frame on
/// its transmit queues, room for one on its receive queues; both just past the used ring.
fn post_buffers(shared: &DeviceShared) {
    for (index, vring) in shared.vrings.iter().enumerate() {
        let st = vring.lock();
        let Some(mem) = st.mem.as_ref().filter(|_| st.serving()) else {
            continue;
        };
        let q = &st.queue;
        let (size, next) = (q.size(), q.next_avail());
        let slot = next.checked_rem(size).unwrap_or(0);
        let at = |base: u64, off: u64| base.checked_add(off).map(GuestAddress);
        let (Some(buf), Some(desc), Some(entry), Some(idx)) = (
            at(q.used_ring(), 6 + 8 * u64::from(size) + 63).map(|a| a.0 & !63),
            at(q.desc_table(), 16 * u64::from(slot)),
            at(q.avail_ring(), 4 + 2 * u64::from(slot)),
            at(q.avail_ring(), 2),
        ) else {
            continue;
        };
        let (len, flags) = if is_guest_tx(index) {
            let mut bytes = vec![0u8; st.features.header_len()];
            bytes.extend_from_slice(&FRAME);
            let _ = mem.write_slice(&bytes, GuestAddress(buf));
            (u32::try_from(bytes.len()).unwrap_or(0), 0)
        } else {
            (2048, 2) // VRING_DESC_F_WRITE
        };
        let _ = mem.write_obj(Descriptor::new(buf, len, flags, 0), desc);
        let _ = mem.write_obj(slot.to_le(), entry);
        let _ = mem.write_obj(next.wrapping_add(1).to_le(), idx);
    }
}

/// The worker's look at the port: one receive (frames checked), one frame transmitted.
fn serve_once(rx: &mut VhostPortRx, tx: &mut VhostPortTx, out: &mut Outcome) {
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    for d in batch.descs() {
        let len = rx.frame(d.handle).len();
        assert!(len <= MAX_FRAME_LEN, "a {len} B frame handed to the switch");
    }
    out.received += batch.len();
    rx.finish();
    let sent = tx.transmit(&[TxFrame::whole(&FRAME, OffloadInfo::default())]);
    assert!(sent <= 1, "one frame transmitted {sent} times");
    out.delivered += sent;
}

/// Reads every reply (the backend's end is closed by now: nothing is waited for), checks
/// each is whole and answers a request sent; returns how many.
fn check_replies(sock: &mut UnixStream, codes: &[u64], handled: usize) -> usize {
    let mut bytes = Vec::new();
    let _ = sock
        .set_nonblocking(true)
        .and_then(|()| sock.read_to_end(&mut bytes));
    let mut replies = Input(&bytes);
    let mut count = 0;
    while !replies.0.is_empty() {
        assert!(replies.0.len() >= 12, "a truncated reply header");
        let (code, flags, size) = (replies.num(4), replies.num(4), replies.num(4));
        let reply = flags & REPLY != 0 && flags & 3 == VERSION;
        assert!(reply, "reply flags {flags:#x}");
        assert!(codes.contains(&code), "a reply to {code}, never sent");
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let whole = size <= MAX_MSG_SIZE && replies.0.len() >= size;
        assert!(whole, "a truncated reply");
        replies.take(size);
        count += 1;
    }
    // One reply per request at most; a refused one that asked for a reply ends it all.
    assert!(count <= handled + 1, "{count} replies, {handled} requests");
    count
}

/// Runs the input as a frontend on a port's socket (see the module documentation).
pub fn frontend_messages(data: &[u8]) {
    run(data);
}

fn run(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let mut input = Input(data.get(..MAX_INPUT).unwrap_or(data));
    let options = input.u8();
    let config = VhostPortConfig {
        queue_pairs: 1 + u16::from(options & 1),
        offloads: options & 4 == 0,
        mergeable_rx_buffers: options & 8 == 0,
        event_idx: options & 16 == 0,
        lend_guest_memory: options & 32 == 0,
        bounce_limit: 1 << 20,
        ..VhostPortConfig::default()
    };
    let (Ok(shared), Ok((front, back))) = (DeviceShared::new(config), UnixStream::pair()) else {
        return out;
    };
    // The backend's timeout is a guard only: the stream ends before.
    let timeout = back.set_read_timeout(Some(Duration::from_secs(1)));
    if front.set_nonblocking(true).and(timeout).is_err() {
        return out;
    }
    let mut fe = Frontend::new(front, config);
    let mut records = 0..MAX_RECORDS;
    while !input.0.is_empty() && records.next().is_some() && fe.message(&mut input) {}
    out.sent = fe.codes.len();
    if fe.sock.shutdown(Shutdown::Write).is_err() {
        return out;
    }
    // As `serve` does. A request that does not end the connection takes 12 bytes at least.
    let device = Arc::new(Mutex::new(Device::new(Arc::clone(&shared))));
    let Ok(peek) = back.try_clone() else {
        return out;
    };
    let mut handler = BackendReqHandler::from_stream(back, Arc::clone(&device));
    let stopped = (0..MAX_INPUT).any(|_| {
        match serve_side_request(&peek, &device) {
            Side::Served => {
                out.handled += 1;
                return false;
            }
            Side::Refused => return true,
            Side::NotMine => {}
        }
        match handler.handle_request() {
            Ok(()) => {
                out.handled += 1;
                false
            }
            Err(VhostUserError::InactiveFeature(_)) => false,
            Err(_) => true,
        }
    });
    assert!(stopped, "the handler never saw the stream end");
    out.serving = shared.vrings.iter().filter(|v| v.lock().serving()).count();
    let mut halves = (out.serving > 0)
        .then(|| VhostPortRx::new(Arc::clone(&shared), LaneShare::WHOLE).ok())
        .flatten()
        .map(|rx| (rx, VhostPortTx::new(Arc::clone(&shared), LaneShare::WHOLE)));
    if let Some((rx, tx)) = halves.as_mut() {
        if options & 2 != 0 {
            post_buffers(&shared);
        }
        serve_once(rx, tx, &mut out);
    }
    let mut reset = device.lock().unwrap_or_else(PoisonError::into_inner);
    reset.reset();
    drop(reset);
    drop((handler, device, peek));
    if let Some((rx, tx)) = halves.as_mut() {
        let before = out;
        serve_once(rx, tx, &mut out);
        assert_eq!(out, before, "a ring served after the reset");
    }
    out.replies = check_replies(&mut fe.sock, &fe.codes, out.handled);
    let (open, mapped) = fe.leftovers();
    assert_eq!(
        open, 0,
        "descriptors the frontend sent stay open after it left"
    );
    assert_eq!(
        mapped, 0,
        "memory the frontend sent stays mapped after it left"
    );
    out
}

#[cfg(test)]
mod tests;
