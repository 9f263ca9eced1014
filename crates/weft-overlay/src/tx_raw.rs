//! The raw path: frames laid out as `sendmmsg` messages on the raw UDP socket, each an iovec
//! of [UDP + VXLAN header in a 16-byte per-frame buffer, the frame's rewritten head, the
//! frame's body where it lies], one message per remote (replicas share the frame's header
//! and iovecs), up to `MAX_MSGS` per call.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use weft_switch::TxFrame;

use crate::encap::{write_header, ENCAP_LEN};
use crate::sys::{self, RawAddr};
use crate::tx::{answer_too_big, VxlanTx, MAX_MSGS};
use crate::tx_burst::Burst;
use crate::tx_small_gso::Route;
use crate::udp_offload::socket_full;

/// Headers for `sendmmsg`, rebuilt on every call.
pub(crate) struct TxScratch {
    headers: Vec<[u8; ENCAP_LEN]>,
    iovecs: Vec<[libc::iovec; 3]>,
    addrs: Vec<RawAddr>,
    msgs: Vec<libc::mmsghdr>,
    /// For each message, the index (in the burst) of the frame it carries.
    msg_frame: Vec<usize>,
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
        let mut consumed = 0;
        for (i, (frame, route)) in frames.iter().zip(routes).enumerate() {
            let (unicast_to, src_port) = match *route {
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
                    remote, src_port, ..
                } => (Some(remote), src_port),
                Route::Flood { src_port } => (None, src_port),
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
                    s.addrs.push(RawAddr::new(SocketAddr::new(ip, 0)));
                    s.msg_frame.push(i);
                }
                None => {
                    for ip in &self.remotes {
                        s.addrs.push(RawAddr::new(SocketAddr::new(*ip, 0)));
                        s.msg_frame.push(i);
                    }
                }
            }
        }
        consumed
    }

    /// Points the message headers at the scratch buffers (after they stopped growing).
    pub(crate) fn link(&mut self) {
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
            iov[0].iov_base = header.as_mut_ptr().cast();
            let mut m = sys::empty_mmsghdr();
            m.msg_hdr.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
            m.msg_hdr.msg_namelen = addr.len;
            m.msg_hdr.msg_iov = iov.as_mut_ptr();
            m.msg_hdr.msg_iovlen = 3;
            s.msgs.push(m);
        }
    }
    /// Sends the built messages in `sendmmsg` calls. `Err(frame)`: the socket buffer is
    /// full, and the frames from `frame` (in the built chunk) on were not accepted.
    pub(crate) fn send_built(&mut self) -> Result<(), usize> {
        let fd = self.socket.as_raw_fd();
        let total = self.scratch.msgs.len();
        let mut sent = 0;
        let mut errors = 0;
        while sent < total {
            self.stats.tx_raw_send();
            // SAFETY: each header points at a scratch address and iovec array, whose
            // entries point at a scratch header and at the frames' head and body, all
            // alive and unmodified for the call.
            match unsafe { sys::sendmmsg(fd, &mut self.scratch.msgs[sent..]) } {
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
