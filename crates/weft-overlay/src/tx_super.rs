//! TCP super-frames (TSO) on transmit. VXLAN over UDP is not what `UDP_SEGMENT` segments by
//! itself (it cuts a payload into equal pieces; it knows nothing of the inner TCP), so the
//! port segments the inner frame in software (`weft_packet::gso::Segmenter`: MTU-sized inner
//! TCP segments, checksums complete), writes each behind its VXLAN header into one buffer —
//! `[VXLAN | segment][VXLAN | segment]...`, all the same length but the last — and hands that
//! buffer to the kernel in one `sendmsg` with `UDP_SEGMENT` = that length, on a UDP socket
//! whose bound port is the flow's source port. The kernel builds every outer datagram in one
//! pass through its stack; a peer with `UDP_GRO` receives them as one buffer again.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use weft_packet::gso::{GsoError, Segmenter};
use weft_packet::vxlan::{self, HEADER_LEN as VXLAN_HEADER_LEN};
use weft_packet::{MacAddr, OffloadInfo, Vni};
use weft_switch::TxFrame;

use crate::encap::{flow_hash, HASH_PREFIX};
use crate::remote_fdb::RemoteFdb;
use crate::sys::RawAddr;
use crate::too_big::l3_offset;
use crate::tx::{pick_source_port, VxlanTx};
use crate::udp_offload::{send_segmented, socket_full};

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
    /// The output buffer is too small for every segment.
    #[error("output buffer too small")]
    NoRoom,
    /// The segments are not all the same length but the last (`UDP_SEGMENT` needs that).
    #[error("segments of unequal length")]
    Uneven,
}

/// A super-frame laid out as VXLAN datagram payloads, ready for `UDP_SEGMENT` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encapsulated {
    /// Bytes written.
    pub len: usize,
    /// Length of every datagram payload but the last (VXLAN header + inner segment).
    pub segment: usize,
    /// How many datagrams.
    pub count: usize,
}

impl Encapsulated {
    /// The byte ranges to hand to one send each: at most [`MAX_GSO_SEGMENTS`] datagrams and
    /// [`MAX_GSO_PAYLOAD`] bytes, cut at datagram boundaries.
    pub fn sends(&self) -> impl Iterator<Item = std::ops::Range<usize>> {
        let per_send = (MAX_GSO_PAYLOAD / self.segment.max(1)).clamp(1, MAX_GSO_SEGMENTS);
        let step = per_send * self.segment.max(1);
        let len = self.len;
        (0..len).step_by(step).map(move |s| s..(s + step).min(len))
    }
}

/// Segments `frame` (a super-frame described by `offload`) into inner frames whose L3 packet
/// is at most `mtu` bytes, each behind a VXLAN header for `vni`, back to back in `out`.
pub fn encapsulate_super_frame(
    frame: &[u8],
    offload: &OffloadInfo,
    mtu: usize,
    vni: Vni,
    out: &mut [u8],
) -> Result<Encapsulated, SuperFrameError> {
    let mut segmenter = Segmenter::new(frame, offload, l3_offset(frame) + mtu)?;
    let count = segmenter.segment_count();
    let mut at = 0;
    let mut segment = 0;
    for index in 0..count {
        let room = out.get_mut(at..).ok_or(SuperFrameError::NoRoom)?;
        if room.len() <= VXLAN_HEADER_LEN {
            return Err(SuperFrameError::NoRoom);
        }
        let (header, inner) = room.split_at_mut(VXLAN_HEADER_LEN);
        vxlan::emit(vni, header).map_err(|_| SuperFrameError::NoRoom)?;
        let written = match segmenter.next_segment(inner) {
            Some(Ok(n)) => n,
            Some(Err(GsoError::SegmentTooLarge { .. })) => return Err(SuperFrameError::NoRoom),
            Some(Err(e)) => return Err(e.into()),
            None => return Err(SuperFrameError::Uneven),
        };
        let len = written + VXLAN_HEADER_LEN;
        if index == 0 {
            segment = len;
        } else if len > segment || (len != segment && index + 1 < count) {
            return Err(SuperFrameError::Uneven);
        }
        at += len;
    }
    Ok(Encapsulated {
        len: at,
        segment,
        count,
    })
}

/// A destination of the super-frame path.
fn destination(ip: std::net::IpAddr, port: u16) -> RawAddr {
    RawAddr::new(SocketAddr::new(ip, port))
}

impl VxlanTx {
    /// Sends one super-frame to its endpoint (or every remote). Returns false when nothing
    /// went because the socket buffer is full (the caller stops the burst there); anything
    /// else is sent or counted.
    pub(crate) fn send_super_frame(&mut self, frame: &TxFrame<'_>, fdb: &RemoteFdb) -> bool {
        // A frame with no rewritten head is segmented where it lies; only one whose head the
        // switch rewrote (a VLAN tag pushed or popped) is made contiguous first.
        let linear: &[u8] = if frame.head().is_empty() {
            frame.body
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
        let Some(fd) = self.gso.get(socket).map(|g| g.0.as_raw_fd()) else {
            self.stats.tx_error(1);
            return true;
        };
        let plan = match encapsulate_super_frame(
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
            self.remotes.len()
        };
        if copies == 0 {
            self.stats.tx_no_remote();
            return true;
        }
        let mut calls = 0;
        let mut datagrams = 0;
        for k in 0..copies {
            // By index, not by borrowing `remotes`: the loop updates `self`.
            let Some(ip) = unicast_to.or_else(|| self.remotes.get(k).copied()) else {
                break;
            };
            let to = destination(ip, self.remote_port);
            for range in plan.sends() {
                let payload = &self.segments[range];
                let result = if self.gso_refused {
                    self.send_one_by_one(fd, &to, payload, plan.segment)
                } else {
                    send_segmented(
                        fd,
                        &to,
                        payload,
                        (payload.len() > plan.segment)
                            .then(|| u16::try_from(plan.segment).unwrap_or(u16::MAX)),
                    )
                    .map(|_| payload.len().div_ceil(plan.segment.max(1)))
                };
                match result {
                    Ok(n) => {
                        calls += 1;
                        datagrams += n;
                    }
                    Err(e) if socket_full(&e) && k == 0 && calls == 0 => return false,
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL))
                            && !self.gso_refused =>
                    {
                        // The route's device cannot take UDP GSO (no checksum offload, or a
                        // segment larger than its MTU): from now on, one datagram per call.
                        self.gso_refused = true;
                        match self.send_one_by_one(fd, &to, payload, plan.segment) {
                            Ok(n) => datagrams += n,
                            Err(_) => self.stats.tx_error(1),
                        }
                    }
                    Err(_) => {
                        self.stats.tx_error(1);
                        break;
                    }
                }
            }
        }
        self.stats
            .tx(1, u64::try_from(datagrams).unwrap_or(u64::MAX));
        self.stats.tx_super_frame(calls);
        true
    }

    /// The slow way: each datagram of `payload` (cut every `segment` bytes) in its own call.
    fn send_one_by_one(
        &self,
        fd: RawFd,
        to: &RawAddr,
        payload: &[u8],
        segment: usize,
    ) -> std::io::Result<usize> {
        let mut sent = 0;
        for datagram in payload.chunks(segment.max(1)) {
            send_segmented(fd, to, datagram, None)?;
            sent += 1;
        }
        Ok(sent)
    }
}
