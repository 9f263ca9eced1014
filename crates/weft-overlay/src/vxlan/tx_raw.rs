//! The plain path: frames laid out as `sendmmsg` messages on the raw UDP socket, each an
//! iovec of [UDP + VXLAN header in a 16-byte per-frame buffer, the frame's rewritten head, the
//! frame's body where it lies], one message per remote (replicas share the frame's header
//! and iovecs), up to `MAX_MSGS` per call (a frame flooded to more remotes than that goes in
//! a chunk of its own, sent in as many calls as it takes). Without a raw socket (no
//! `CAP_NET_RAW`) the same messages leave without their UDP header through the bound UDP
//! socket whose port is the flow's source port: one `sendmmsg` per run of messages on the
//! same socket.

use std::net::SocketAddr;
use std::os::fd::AsFd;

use weft_switch::TxFrame;
use weft_sys::{IoVec, Iovecs, MmsgBatch};

use crate::vxlan::encap::{write_header, ENCAP_LEN};
use crate::vxlan::sys::SockAddr;
use crate::vxlan::tx::{answer_too_big, VxlanTx, MAX_MSGS};
use crate::vxlan::tx_burst::{Burst, DATAGRAM_IOVECS};
use crate::vxlan::tx_small_gso::Route;
use crate::vxlan::udp_offload::socket_full;

/// What the messages of a chunk are made of, rebuilt for every chunk (capacity kept).
pub(crate) struct TxScratch {
    /// Messages there is room for without growing.
    room: usize,
    /// One UDP + VXLAN header per frame carried.
    headers: Vec<[u8; ENCAP_LEN]>,
    /// One destination per message.
    addrs: Vec<SockAddr>,
    /// For each message, the index (in the burst) of the frame it carries.
    msg_frame: Vec<usize>,
    /// For each message, the bound socket it leaves through (without a raw socket).
    msg_socket: Vec<usize>,
    /// The `sendmmsg` headers and iovecs.
    batch: MmsgBatch,
}

impl TxScratch {
    pub(crate) fn new() -> TxScratch {
        TxScratch {
            room: MAX_MSGS,
            headers: Vec::with_capacity(MAX_MSGS),
            addrs: Vec::with_capacity(MAX_MSGS),
            msg_frame: Vec::with_capacity(MAX_MSGS),
            msg_socket: Vec::with_capacity(MAX_MSGS),
            batch: MmsgBatch::new(MAX_MSGS, MAX_MSGS * DATAGRAM_IOVECS),
        }
    }

    /// Makes room for a chunk of `messages` (a frame flooded to that many remotes), so that
    /// no burst grows the storage. Called when the flood list changes.
    pub(crate) fn fit(&mut self, messages: usize) {
        if messages <= self.room {
            return;
        }
        self.room = messages;
        for v in [&mut self.msg_frame, &mut self.msg_socket] {
            v.clear();
            v.reserve(messages);
        }
        self.addrs.clear();
        self.addrs.reserve(messages);
        // A frame's replicas share its iovecs: only the messages grow.
        self.batch = MmsgBatch::new(messages, MAX_MSGS * DATAGRAM_IOVECS);
    }
}

/// How many frames the messages carry (each frame's messages are contiguous).
fn distinct_frames(msg_frame: &[usize]) -> usize {
    let mut n = 0;
    let mut last = None;
    for &f in msg_frame {
        if last != Some(f) {
            n += 1;
            last = Some(f);
        }
    }
    n
}

impl VxlanTx {
    /// Lays out the messages for `frames` (from the start; `routes` are theirs) until
    /// MAX_MSGS or a super-frame; returns how many frames were consumed (sent-to-be, or
    /// dropped and counted).
    pub(crate) fn build(&mut self, frames: &[TxFrame<'_>], burst: &Burst, first: usize) -> usize {
        let routes = burst.routes.get(first..).unwrap_or_default();
        let s = &mut self.scratch;
        s.headers.clear();
        s.addrs.clear();
        s.msg_frame.clear();
        s.msg_socket.clear();
        // The raw socket wants port 0 in the address (the UDP header is ours); a UDP socket
        // the remote's port.
        let to_port = if self.raw.is_some() {
            0
        } else {
            self.remote_port
        };
        let mut consumed = 0;
        for (i, (frame, route)) in frames.iter().zip(routes).enumerate() {
            let (unicast_to, socket, src_port) = match *route {
                Route::Super => break, // Sent on its own (tx_super), in order.
                Route::TooBig => {
                    consumed = i + 1;
                    if let Some(shared) = &self.too_big {
                        answer_too_big(
                            frame,
                            self.inner_mtu,
                            &mut self.too_big_quote,
                            &mut self.too_big_limit,
                            shared,
                            &self.stats,
                        );
                    } else {
                        self.stats.tx_error(1);
                    }
                    continue;
                }
                Route::Malformed => {
                    consumed = i + 1;
                    self.stats.tx_error(1);
                    continue;
                }
                Route::Unicast {
                    remote,
                    socket,
                    src_port,
                    ..
                } => (Some(remote), socket, src_port),
                Route::Flood { socket, src_port } => (None, socket, src_port),
            };
            let copies = if unicast_to.is_some() {
                1
            } else {
                self.flood.remotes().len()
            };
            // A frame with more replicas than a chunk holds goes alone (`send_built` takes
            // it in several calls).
            if !s.addrs.is_empty() && s.addrs.len() + copies > MAX_MSGS {
                break;
            }
            consumed = i + 1;
            if copies == 0 {
                self.stats.tx_no_remote();
                continue;
            }
            let Some(header) = write_header(self.vni, src_port, self.remote_port, frame.len())
            else {
                self.stats.tx_error(1);
                continue;
            };
            s.headers.push(header);
            match unicast_to {
                Some(ip) => {
                    s.addrs.push(SockAddr::new(SocketAddr::new(ip, to_port)));
                    s.msg_frame.push(i);
                    s.msg_socket.push(socket);
                }
                None => {
                    for ip in self.flood.remotes() {
                        s.addrs.push(SockAddr::new(SocketAddr::new(*ip, to_port)));
                        s.msg_frame.push(i);
                        s.msg_socket.push(socket);
                    }
                }
            }
        }
        consumed
    }

    /// Sends the messages `build` laid out for `frames` (the chunk, frame `first` of `burst`
    /// on) in `sendmmsg` calls, each message gathered from its frame's header and pieces (a
    /// frame's replicas share them). `Err(frame)`: the socket buffer is full, and the frames
    /// from `frame` (in the chunk) on were not accepted.
    pub(crate) fn send_built(
        &mut self,
        frames: &[TxFrame<'_>],
        burst: &Burst,
        first: usize,
    ) -> Result<(), usize> {
        // Through a UDP socket the kernel writes the UDP header: only the VXLAN one is ours.
        let skip = if self.raw.is_some() { 0 } else { 8 };
        let s = &mut self.scratch;
        let mut msgs = s.batch.sending();
        let mut header_index = 0;
        let mut last_frame = None;
        let mut iovecs = Iovecs::default();
        for (addr, &frame) in s.addrs.iter().zip(&s.msg_frame) {
            if last_frame != Some(frame) {
                if last_frame.is_some() {
                    header_index += 1;
                }
                last_frame = Some(frame);
                let header = s
                    .headers
                    .get(header_index)
                    .and_then(|h| h.get(skip..))
                    .unwrap_or_default();
                iovecs = match frames.get(frame) {
                    Some(f) => msgs.add_iovecs(&burst.iovecs(first + frame, f, IoVec::new(header))),
                    None => Iovecs::default(),
                };
            }
            msgs.push(iovecs, Some(addr));
        }
        let total = msgs.len();
        let mut sent = 0;
        let mut errors = 0;
        while sent < total {
            // The raw socket takes every message; a bound socket the run that is its own.
            let (fd, end) = match &self.raw {
                Some(raw) => (Some(raw.as_fd()), total),
                None => {
                    let socket = s.msg_socket[sent];
                    let run = s.msg_socket[sent..]
                        .iter()
                        .take_while(|s| **s == socket)
                        .count();
                    (self.gso.get(socket).map(|g| g.0.as_fd()), sent + run)
                }
            };
            let Some(fd) = fd else {
                // No socket to send with (cannot happen: the port opens one at least).
                errors += u64::try_from(end - sent).unwrap_or(u64::MAX);
                sent = end;
                continue;
            };
            self.stats.tx_raw_send();
            match msgs.send(fd, sent..end) {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(e) if socket_full(&e) => break,
                // A datagram the kernel refuses (no route, too big): skip it.
                Err(_) => {
                    errors += 1;
                    sent += 1;
                }
            }
        }
        self.stats.tx_error(errors);
        let datagrams = u64::try_from(sent).unwrap_or(u64::MAX) - errors;
        if sent < total {
            // The socket buffer is full: the frames from the first unsent datagram on
            // are not accepted (a frame's replicas are contiguous, so a frame some of
            // whose replicas went is retried whole by the caller, or dropped).
            let frame = s.msg_frame[sent];
            let whole = distinct_frames(&s.msg_frame[..sent])
                - usize::from(sent > 0 && s.msg_frame[sent - 1] == frame);
            self.stats
                .tx(u64::try_from(whole).unwrap_or(u64::MAX), datagrams);
            return Err(frame);
        }
        let frames_sent = distinct_frames(&s.msg_frame);
        self.stats
            .tx(u64::try_from(frames_sent).unwrap_or(u64::MAX), datagrams);
        Ok(())
    }
}
