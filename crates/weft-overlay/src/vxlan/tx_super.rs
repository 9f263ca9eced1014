//! TCP and UDP super-frames (TSO, USO) on transmit. VXLAN over UDP is not what `UDP_SEGMENT`
//! segments by itself (it cuts a payload into equal pieces; it knows nothing of the inner
//! headers), so the port segments the inner frame in software (`weft_packet::gso::Segmenter`:
//! MTU-sized inner TCP segments, or the sender's UDP datagrams, never cut; checksums
//! complete). Only the headers are written: each segment's VXLAN
//! header and Ethernet/IP/TCP headers go into one header buffer, and its payload stays where
//! it lies in the super-frame. One `sendmsg` with `UDP_SEGMENT` gathers
//! `[headers 0, payload 0, headers 1, payload 1, ...]` (all datagrams the same length but the
//! last) on a UDP socket whose bound port is the flow's source port: the kernel copies the
//! frame once, builds every outer datagram in one pass through its stack, and a peer with
//! `UDP_GRO` receives them as one buffer again.

use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};

use weft_packet::gso::{GsoError, Segmenter};
use weft_packet::vxlan::{self, HEADER_LEN as VXLAN_HEADER_LEN};
use weft_packet::{MacAddr, OffloadInfo, Vni};
use weft_switch::TxFrame;
use weft_sys::IoVec;

use crate::vxlan::encap::{flow_hash, HASH_PREFIX};
use crate::vxlan::remote_fdb::RemoteFdb;
use crate::vxlan::sys::SockAddr;
use crate::vxlan::too_big::l3_offset;
use crate::vxlan::tx::{pick_source_port, VxlanTx};
use crate::vxlan::udp_offload::{send_segmented, socket_full};

/// Most datagrams per `UDP_SEGMENT` send (the kernel's `UDP_MAX_SEGMENTS` is 64 on older
/// kernels, 128 on newer ones).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Most payload bytes per `UDP_SEGMENT` send: the largest UDP payload over IPv4.
pub const MAX_GSO_PAYLOAD: usize = 65_507;

/// Why a super-frame could not be encapsulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuperFrameError {
    /// The inner frame could not be segmented.
    #[error("segmentation: {0}")]
    Segment(#[from] GsoError),
    /// The header buffer is too small for every segment's headers.
    #[error("header buffer too small")]
    NoRoom,
    /// The segments are not all the same length but the last (`UDP_SEGMENT` needs that).
    #[error("segments of unequal length")]
    Uneven,
}

/// A super-frame laid out as VXLAN datagrams for gathered `UDP_SEGMENT` sends: datagram `i`
/// is its header block (`stride` bytes at `i * stride` of the header buffer: VXLAN header and
/// the segment's own headers) followed by its piece of the frame's payload, not copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    /// Bytes of each header block.
    pub stride: usize,
    /// How many datagrams.
    pub count: usize,
    /// Where the payload starts in the frame.
    payload_start: usize,
    /// The frame's length.
    frame_len: usize,
    /// Payload bytes of every datagram but the last.
    piece: usize,
}

impl Gathered {
    /// Length of every datagram but the last (the `UDP_SEGMENT` size).
    pub fn segment(&self) -> usize {
        self.stride + self.piece
    }

    /// Datagram `i`'s header block in the header buffer `headers`.
    pub fn header_block<'h>(&self, headers: &'h [u8], i: usize) -> &'h [u8] {
        headers
            .get(i * self.stride..(i + 1) * self.stride)
            .unwrap_or_default()
    }

    /// Datagram `i`'s payload in `frame`.
    pub fn payload_of<'f>(&self, frame: &'f [u8], i: usize) -> &'f [u8] {
        let start = self.payload_start + i * self.piece;
        let end = (start + self.piece).min(self.frame_len);
        frame.get(start..end).unwrap_or_default()
    }

    /// The datagrams to hand to one send each: at most [`MAX_GSO_SEGMENTS`] datagrams and
    /// [`MAX_GSO_PAYLOAD`] bytes.
    pub fn sends(&self) -> impl Iterator<Item = Range<usize>> {
        let per_send = (MAX_GSO_PAYLOAD / self.segment().max(1)).clamp(1, MAX_GSO_SEGMENTS);
        let count = self.count;
        (0..count)
            .step_by(per_send)
            .map(move |s| s..(s + per_send).min(count))
    }
}

/// Segments `frame` (a super-frame described by `offload`) into inner frames whose L3 packet
/// is at most `mtu` bytes, each behind a VXLAN header for `vni`: writes every datagram's
/// headers into `headers` and leaves the payload where it lies.
pub fn gather_super_frame(
    frame: &[u8],
    offload: &OffloadInfo,
    mtu: usize,
    vni: Vni,
    headers: &mut [u8],
) -> Result<Gathered, SuperFrameError> {
    let mut segmenter = Segmenter::new(frame, offload, l3_offset(frame) + mtu)?;
    let count = segmenter.segment_count();
    let header_len = segmenter.header_len();
    let stride = VXLAN_HEADER_LEN + header_len;
    let room = headers
        .get_mut(..count * stride)
        .ok_or(SuperFrameError::NoRoom)?;
    let mut piece = 0;
    for (index, block) in room.chunks_exact_mut(stride).enumerate() {
        let (vxlan_header, inner) = block.split_at_mut(VXLAN_HEADER_LEN);
        vxlan::emit(vni, vxlan_header).map_err(|_| SuperFrameError::NoRoom)?;
        let written = match segmenter.next_segment_headers(inner) {
            Some(Ok(h)) => h,
            Some(Err(e)) => return Err(e.into()),
            None => return Err(SuperFrameError::Uneven),
        };
        let len = written.payload.len();
        if index == 0 {
            piece = len;
        } else if len > piece || (len != piece && index + 1 < count) {
            return Err(SuperFrameError::Uneven);
        }
    }
    Ok(Gathered {
        stride,
        count,
        payload_start: header_len,
        frame_len: frame.len(),
        piece,
    })
}

/// Two iovecs per datagram, for one send's datagrams.
type SendIovecs<'a> = [IoVec<'a>; 2 * MAX_GSO_SEGMENTS];

/// Fills `iov` with datagrams `range` of `plan` (header block, then payload); how many
/// iovecs it used.
fn fill_iovecs<'a>(
    iov: &mut [IoVec<'a>],
    plan: &Gathered,
    headers: &'a [u8],
    frame: &'a [u8],
    range: Range<usize>,
) -> usize {
    let mut n = 0;
    for i in range {
        for piece in [plan.header_block(headers, i), plan.payload_of(frame, i)] {
            if piece.is_empty() || n == iov.len() {
                continue;
            }
            iov[n] = IoVec::new(piece);
            n += 1;
        }
    }
    n
}

/// A destination of the super-frame path.
fn destination(ip: std::net::IpAddr, port: u16) -> SockAddr {
    SockAddr::new(SocketAddr::new(ip, port))
}

impl VxlanTx {
    /// Sends one super-frame to its endpoint (or every remote). Returns false when nothing
    /// went because the socket buffer is full (the caller stops the burst there); anything
    /// else is sent or counted.
    pub(crate) fn send_super_frame(&mut self, frame: &TxFrame<'_>, fdb: &RemoteFdb) -> bool {
        // A frame in one piece is segmented where it lies; one whose head the switch
        // rewrote (a VLAN tag pushed or popped), or whose tail is in a guest's memory (never
        // read in place: the segments' headers are made from it), is made contiguous first.
        let linear: &[u8] = if let Some(bytes) = frame.contiguous() {
            bytes
        } else {
            let Some(len) = frame.copy_to(&mut self.linear) else {
                self.stats.tx_error(1);
                return true;
            };
            &self.linear[..len]
        };
        let len = linear.len();
        let dst = MacAddr::from_bytes(linear.get(..6).unwrap_or_default());
        let unicast_to = dst
            .filter(MacAddr::is_unicast)
            .and_then(|mac| fdb.lookup(mac))
            .map(|e| e.endpoint);
        let prefix = &linear[..len.min(HASH_PREFIX)];
        let (socket, _) = pick_source_port(&self.gso, flow_hash(prefix));
        let fd = self.gso.get(socket).filter(|_| self.offload);
        let Some(fd) = fd.map(|g| g.0.as_fd()) else {
            self.stats.tx_error(1);
            return true;
        };
        let plan = match gather_super_frame(
            linear,
            &frame.offload,
            self.inner_mtu,
            self.vni,
            &mut self.segments,
        ) {
            Ok(plan) => plan,
            Err(_) => {
                self.stats.tx_error(1);
                return true;
            }
        };
        let copies = if unicast_to.is_some() {
            1
        } else {
            self.flood.remotes().len()
        };
        if copies == 0 {
            self.stats.tx_no_remote();
            return true;
        }
        let headers = &self.segments[..];
        let mut iov: SendIovecs<'_> = [IoVec::EMPTY; 2 * MAX_GSO_SEGMENTS];
        let mut gso_sends = 0;
        let mut datagrams = 0;
        for k in 0..copies {
            // By index, not by borrowing the flood list: the loop updates `self`.
            let Some(ip) = unicast_to.or_else(|| self.flood.remotes().get(k).copied()) else {
                break;
            };
            let to = destination(ip, self.remote_port);
            for range in plan.sends() {
                let (sent, error) = if self.gso_refused {
                    send_one_by_one(fd, &to, &plan, headers, linear, range.clone())
                } else {
                    let n = fill_iovecs(&mut iov, &plan, headers, linear, range.clone());
                    let segment = u16::try_from(plan.segment()).unwrap_or(u16::MAX);
                    match send_segmented(fd, &to, &iov[..n], (range.len() > 1).then_some(segment)) {
                        Ok(_) => {
                            gso_sends += 1;
                            (range.len(), None)
                        }
                        // A segmented send is all or nothing.
                        Err(e) => (0, Some(e)),
                    }
                };
                datagrams += sent;
                let Some(e) = error else {
                    continue;
                };
                if socket_full(&e) && k == 0 && datagrams == 0 {
                    // Nothing of the frame went: the switch may offer it again whole.
                    return false;
                }
                if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) && !self.gso_refused {
                    // The route's device cannot take UDP GSO (no checksum offload, or a
                    // segment larger than its MTU): from now on, one datagram per call.
                    self.gso_refused = true;
                    let (sent, error) = send_one_by_one(fd, &to, &plan, headers, linear, range);
                    datagrams += sent;
                    if error.is_some() {
                        self.stats.tx_error(1);
                    }
                    continue;
                }
                // Any other error, or a full socket once part of the frame went: the frame
                // is done as far as it went (TCP repairs the rest) and never offered again,
                // so no datagram goes twice.
                self.stats.tx_error(1);
                break;
            }
        }
        self.stats
            .tx(1, u64::try_from(datagrams).unwrap_or(u64::MAX));
        self.stats.tx_super_frame(gso_sends);
        true
    }
}

/// The slow way: each datagram of `range` in its own call. How many went, and the error that
/// stopped the rest, if one did.
fn send_one_by_one(
    fd: BorrowedFd<'_>,
    to: &SockAddr,
    plan: &Gathered,
    headers: &[u8],
    frame: &[u8],
    range: Range<usize>,
) -> (usize, Option<std::io::Error>) {
    let mut iov = [IoVec::EMPTY; 2];
    let mut sent = 0;
    for i in range {
        let n = fill_iovecs(&mut iov, plan, headers, frame, i..i + 1);
        if let Err(e) = send_segmented(fd, to, &iov[..n], None) {
            return (sent, Some(e));
        }
        sent += 1;
    }
    (sent, None)
}
