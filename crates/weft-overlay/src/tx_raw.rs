//! The plain path: frames laid out as `sendmmsg` messages on the raw UDP socket, each an
//! iovec of [UDP + VXLAN header in a 16-byte per-frame buffer, the frame's rewritten head, the
//! frame's body where it lies], one message per remote (replicas share the frame's header
//! and iovecs), up to `MAX_MSGS` per call. Without a raw socket (no `CAP_NET_RAW`) the same
//! messages leave without their UDP header through the bound UDP socket whose port is the
//! flow's source port: one `sendmmsg` per run of messages on the same socket.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use weft_switch::TxFrame;

use crate::encap::{write_header, ENCAP_LEN};
use crate::sys::{self, RawAddr};
use crate::tx::{answer_too_big, VxlanTx, MAX_MSGS};
use crate::tx_burst::{Burst, DATAGRAM_IOVECS};
use crate::tx_small_gso::Route;
use crate::udp_offload::socket_full;

/// Headers for `sendmmsg`, rebuilt on every call.
pub(crate) struct TxScratch {
    headers: Vec<[u8; ENCAP_LEN]>,
    iovecs: Vec<[libc::iovec; DATAGRAM_IOVECS]>,
    addrs: Vec<RawAddr>,
    msgs: Vec<libc::mmsghdr>,
    /// For each message, the index (in the burst) of the frame it carries.
    msg_frame: Vec<usize>,
    /// For each message, the bound socket it leaves through (without a raw socket).
    msg_socket: Vec<usize>,
}

// SAFETY: the raw pointers in the scratch headers point into buffers that live only for one
// `transmit` call (the frames) or are owned by the scratch itself; they are rewritten before
// every system call and never read otherwise.
unsafe impl Send for TxScratch {}

impl TxScratch {
    pub(crate) fn new() -> TxScratch {
        TxScratch {
            headers: Vec::with_capacity(MAX_MSGS),
            iovecs: Vec::with_capacity(MAX_MSGS),
            addrs: Vec::with_capacity(MAX_MSGS),
            msgs: Vec::with_capacity(MAX_MSGS),
            msg_frame: Vec::with_capacity(MAX_MSGS),
            msg_socket: Vec::with_capacity(MAX_MSGS),
        }
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
        s.iovecs.clear();
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
                self.remotes.len()
            };
            if s.addrs.len() + copies > MAX_MSGS {
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
            s.iovecs
                .push(burst.iovecs(first + i, frame, std::ptr::null_mut(), ENCAP_LEN));
            match unicast_to {
                Some(ip) => {
                    s.addrs.push(RawAddr::new(SocketAddr::new(ip, to_port)));
                    s.msg_frame.push(i);
                    s.msg_socket.push(socket);
                }
                None => {
                    for ip in &self.remotes {
                        s.addrs.push(RawAddr::new(SocketAddr::new(*ip, to_port)));
                        s.msg_frame.push(i);
                        s.msg_socket.push(socket);
                    }
                }
            }
        }
        consumed
    }

    /// Points the message headers at the scratch buffers (after they stopped growing).
    pub(crate) fn link(&mut self) {
        // Through a UDP socket the kernel writes the UDP header: only the VXLAN one is ours.
        let skip = if self.raw.is_some() { 0 } else { 8 };
        let s = &mut self.scratch;
        s.msgs.clear();
        let mut iov_index = 0;
        let mut last_frame = None;
        for (k, addr) in s.addrs.iter_mut().enumerate() {
            let frame = s.msg_frame[k];
            if last_frame.is_some_and(|f| f != frame) {
                iov_index += 1;
            }
            last_frame = Some(frame);
            let header = &mut s.headers[iov_index];
            let iov = &mut s.iovecs[iov_index];
            iov[0].iov_base = header[skip..].as_mut_ptr().cast();
            iov[0].iov_len = ENCAP_LEN - skip;
            let mut m = sys::empty_mmsghdr();
            m.msg_hdr.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
            m.msg_hdr.msg_namelen = addr.len;
            m.msg_hdr.msg_iov = iov.as_mut_ptr();
            m.msg_hdr.msg_iovlen = DATAGRAM_IOVECS;
            s.msgs.push(m);
        }
    }
    /// Sends the built messages in `sendmmsg` calls. `Err(frame)`: the socket buffer is
    /// full, and the frames from `frame` (in the built chunk) on were not accepted.
    pub(crate) fn send_built(&mut self) -> Result<(), usize> {
        let total = self.scratch.msgs.len();
        let mut sent = 0;
        let mut errors = 0;
        while sent < total {
            // The raw socket takes every message; a bound socket the run that is its own.
            let (fd, end) = match &self.raw {
                Some(raw) => (Some(raw.as_raw_fd()), total),
                None => {
                    let socket = self.scratch.msg_socket[sent];
                    let run = self.scratch.msg_socket[sent..]
                        .iter()
                        .take_while(|s| **s == socket)
                        .count();
                    (self.gso.get(socket).map(|g| g.0.as_raw_fd()), sent + run)
                }
            };
            let Some(fd) = fd else {
                // No socket to send with (cannot happen: the port opens one at least).
                errors += u64::try_from(end - sent).unwrap_or(u64::MAX);
                sent = end;
                continue;
            };
            self.stats.tx_raw_send();
            // SAFETY: each header points at a scratch address and iovec array, whose
            // entries point at a scratch header and at the frames' head and body, all
            // alive and unmodified for the call.
            match unsafe { sys::sendmmsg(fd, &mut self.scratch.msgs[sent..end]) } {
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
            let frame = self.scratch.msg_frame[sent];
            let whole = distinct_frames(&self.scratch.msg_frame[..sent])
                - usize::from(sent > 0 && self.scratch.msg_frame[sent - 1] == frame);
            self.stats
                .tx(u64::try_from(whole).unwrap_or(u64::MAX), datagrams);
            return Err(frame);
        }
        let frames_sent = distinct_frames(&self.scratch.msg_frame);
        self.stats
            .tx(u64::try_from(frames_sent).unwrap_or(u64::MAX), datagrams);
        Ok(())
    }
}
