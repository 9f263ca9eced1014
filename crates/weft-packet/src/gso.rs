//! Software segmentation of TSO/USO super-frames and completion of partial checksums, for
//! destinations that cannot take a frame as its sender offloaded it.
//!
//! Nothing here allocates: [`Segmenter::next_segment`] writes one complete Ethernet frame per
//! call into a buffer the caller owns. Super-frames come from guests and are hostile input:
//! every header is parsed and every length cross-checked before a byte is written, and each
//! refusal is a distinct [`GsoError`].

mod layout;

use core::net::Ipv6Addr;

use crate::checksum;
use crate::error::ParseError;
use crate::ipv4::Ipv4Packet;
use crate::offload::{GsoKind, OffloadInfo};
use crate::tcp::{self, TcpPacket};
use crate::udp::UdpPacket;
use layout::{Family, Layout, Transport};

/// Most segments one super-frame may be split into. A 64 KiB frame at an MSS of 128 needs 512;
/// anything beyond is a hostile or broken sender, not a real workload.
pub const MAX_SEGMENTS: usize = 512;

/// Why a frame could not be segmented or have its checksum completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GsoError {
    /// A header (Ethernet, VLAN, IP, TCP, UDP) is truncated or malformed.
    #[error("bad header: {0}")]
    Header(#[from] ParseError),
    /// The EtherType after the VLAN tags is neither IPv4 nor IPv6.
    #[error("not an IP frame (EtherType {ethertype:#06x})")]
    NotIp {
        /// The EtherType found.
        ethertype: u16,
    },
    /// The IP payload is neither TCP nor UDP.
    #[error("not a TCP or UDP frame (protocol {protocol})")]
    NotTcpOrUdp {
        /// The IP protocol / next header found.
        protocol: u8,
    },
    /// The headers are not what the GSO type segments (TCPv4 segmentation of an IPv6 frame...).
    #[error("headers do not match GSO type {gso:?}")]
    KindMismatch {
        /// The GSO type asked for.
        gso: GsoKind,
    },
    /// An IP fragment cannot be segmented.
    #[error("IP fragment")]
    IpFragment,
    /// An IPv6 extension header other than Hop-by-Hop or Destination Options before L4.
    #[error("IPv6 extension header {next_header} not supported for segmentation")]
    UnsupportedExtensionHeader {
        /// Its next-header value.
        next_header: u8,
    },
    /// The IP (or UDP) length field disagrees with the length of the frame.
    #[error("IP/UDP length field disagrees with the frame length")]
    LengthMismatch,
    /// SYN or RST on a TCP super-frame: such segments are never offloaded.
    #[error("TCP flags {flags:#04x} forbid segmentation")]
    TcpFlagsForbidSegmentation {
        /// The TCP flags byte.
        flags: u8,
    },
    /// Segmentation asked for with a segment size of zero.
    #[error("gso_size is 0")]
    GsoSizeZero,
    /// `max_frame_len` leaves no room for payload after the headers.
    #[error("max frame length {max_frame_len} leaves no room after {header_len} header bytes")]
    MaxFrameTooSmall {
        /// The limit given.
        max_frame_len: usize,
        /// Length of the headers every segment repeats.
        header_len: usize,
    },
    /// The frame would split into more than [`MAX_SEGMENTS`] segments.
    #[error("{segments} segments needed, more than {MAX_SEGMENTS}")]
    TooManySegments {
        /// Segments the frame would need.
        segments: usize,
    },
    /// A UDP super-frame's datagrams (`gso_size` bytes of payload each) do not fit
    /// `max_frame_len`. A datagram is the sender's unit: it is never cut smaller (the
    /// receiver would get pieces that are each a valid datagram, and wrong).
    #[error("{datagram}-byte UDP datagrams do not fit in {room} bytes after the headers")]
    DatagramTooLarge {
        /// Payload bytes of the largest datagram.
        datagram: usize,
        /// Payload bytes `max_frame_len` leaves after the headers.
        room: usize,
    },
    /// A frame without GSO is longer than `max_frame_len`.
    #[error("{len}-byte frame longer than the maximum {max_frame_len}")]
    FrameTooLarge {
        /// Length of the frame.
        len: usize,
        /// The limit given.
        max_frame_len: usize,
    },
    /// The output buffer cannot hold the segment.
    #[error("segment of {needed} bytes does not fit a {available}-byte buffer")]
    SegmentTooLarge {
        /// Length of the segment.
        needed: usize,
        /// Length of the output buffer.
        available: usize,
    },
    /// The checksum field (`csum_start + csum_offset`, two bytes) is not inside the frame.
    #[error("checksum field at {csum_start}+{csum_offset} outside a {frame_len}-byte frame")]
    CsumOutOfFrame {
        /// Start of checksumming.
        csum_start: u16,
        /// Offset of the checksum field.
        csum_offset: u16,
        /// Length of the frame.
        frame_len: usize,
    },
}

/// Completes the L4 checksum of a NEEDS_CSUM frame: sums from `csum_start` to the end of the
/// frame (the checksum field already holds the pseudo-header sum, as virtio and Linux put it)
/// and stores the complement there. A zero result is stored as 0xffff (both mean zero in one's
/// complement; UDP reserves 0 for "no checksum"), as Linux does.
///
/// Does nothing when `info.needs_csum` is false.
pub fn complete_checksum(frame: &mut [u8], info: &OffloadInfo) -> Result<(), GsoError> {
    if !info.needs_csum {
        return Ok(());
    }
    let field = checksum_field(frame.len(), info)?;
    let value = checksum::finish(checksum::sum(&frame[usize::from(info.csum_start)..]));
    let value = if value == 0 { 0xffff } else { value };
    frame[field..field + 2].copy_from_slice(&value.to_be_bytes());
    Ok(())
}

/// Offset of the checksum field that `info` names, if it lies inside a `frame_len`-byte frame.
fn checksum_field(frame_len: usize, info: &OffloadInfo) -> Result<usize, GsoError> {
    let field = usize::from(info.csum_start) + usize::from(info.csum_offset);
    if field + 2 > frame_len {
        return Err(GsoError::CsumOutOfFrame {
            csum_start: info.csum_start,
            csum_offset: info.csum_offset,
            frame_len,
        });
    }
    Ok(field)
}

/// What the segmenter does with the frame.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Copy it as it is, completing its checksum if `info` asks.
    PassThrough(OffloadInfo),
    /// Cut the payload into `segment_payload`-byte pieces behind copies of the headers.
    Segment {
        layout: Layout,
        segment_payload: usize,
    },
}

/// One segment's headers, as [`Segmenter::next_segment_headers`] wrote them, and the payload
/// that follows them in that segment, where it lies in the super-frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeaders<'a> {
    /// Header bytes written at the start of the caller's buffer.
    pub len: usize,
    /// The segment's payload: a piece of the super-frame, not copied.
    pub payload: &'a [u8],
}

/// Cuts one frame into wire-ready frames, one per [`next_segment`](Self::next_segment) call.
///
/// TCP segments get their sequence number advanced, FIN and PSH on the last segment only, CWR
/// on the first only; UDP segments their own length. Every segment gets its IPv4 total length,
/// identification (+1 per segment) and header checksum, or IPv6 payload length, and a full L4
/// checksum (the pseudo-header sum a sender left in the super-frame is not trusted).
///
/// [`next_segment_headers`](Self::next_segment_headers) writes only a segment's headers and
/// points at its payload, for a caller that gathers the two (a `sendmsg` iovec) instead of
/// copying the payload.
#[derive(Debug, Clone)]
pub struct Segmenter<'a> {
    frame: &'a [u8],
    plan: Plan,
    count: usize,
    next: usize,
}

impl<'a> Segmenter<'a> {
    /// Checks `frame` against `info` and plans segments of at most `max_frame_len` bytes each.
    ///
    /// A frame without GSO is passed through as one segment (if not longer than
    /// `max_frame_len`), with its checksum completed if `info.needs_csum`. A GSO frame is
    /// parsed (Ethernet, up to two VLAN tags, IPv4 with options or IPv6 with Hop-by-Hop and
    /// Destination Options headers, TCP or UDP) and cut into payloads of `gso_size` bytes, or
    /// fewer if `max_frame_len` demands. `info.hdr_len`, `csum_start` and `csum_offset` are
    /// not used for GSO frames: the headers say where everything is.
    pub fn new(
        frame: &'a [u8],
        info: &OffloadInfo,
        max_frame_len: usize,
    ) -> Result<Self, GsoError> {
        if !info.is_gso() {
            if frame.len() > max_frame_len {
                return Err(GsoError::FrameTooLarge {
                    len: frame.len(),
                    max_frame_len,
                });
            }
            if info.needs_csum {
                checksum_field(frame.len(), info)?;
            }
            return Ok(Segmenter {
                frame,
                plan: Plan::PassThrough(*info),
                count: 1,
                next: 0,
            });
        }
        if info.gso_size == 0 {
            return Err(GsoError::GsoSizeZero);
        }
        let layout = Layout::parse(frame, info.gso)?;
        if layout.transport == Transport::Tcp {
            let flags = TcpPacket::new_unchecked(&frame[layout.l4..]).flags();
            if flags & (tcp::flags::SYN | tcp::flags::RST) != 0 {
                return Err(GsoError::TcpFlagsForbidSegmentation { flags });
            }
        }
        let header_len = layout.payload;
        let room = max_frame_len.saturating_sub(header_len);
        if room == 0 {
            return Err(GsoError::MaxFrameTooSmall {
                max_frame_len,
                header_len,
            });
        }
        let payload_len = frame.len() - header_len;
        let datagram = usize::from(info.gso_size).min(payload_len);
        if layout.transport == Transport::Udp && datagram > room {
            // TCP segments may be cut smaller (the byte stream does not change); UDP
            // datagrams may not.
            return Err(GsoError::DatagramTooLarge { datagram, room });
        }
        let segment_payload = usize::from(info.gso_size).min(room);
        let count = payload_len.div_ceil(segment_payload).max(1);
        if count > MAX_SEGMENTS {
            return Err(GsoError::TooManySegments { segments: count });
        }
        Ok(Segmenter {
            frame,
            plan: Plan::Segment {
                layout,
                segment_payload,
            },
            count,
            next: 0,
        })
    }

    /// How many segments the frame yields in all.
    pub fn segment_count(&self) -> usize {
        self.count
    }

    /// Length of the longest segment: an output buffer this long never gets
    /// [`GsoError::SegmentTooLarge`].
    pub fn max_segment_len(&self) -> usize {
        match self.plan {
            Plan::PassThrough(_) => self.frame.len(),
            Plan::Segment {
                layout,
                segment_payload,
            } => layout.payload + segment_payload.min(self.frame.len() - layout.payload),
        }
    }

    /// Length of the headers every segment repeats: what
    /// [`next_segment_headers`](Self::next_segment_headers) writes. A frame passed through
    /// whole is all header.
    pub fn header_len(&self) -> usize {
        match self.plan {
            Plan::PassThrough(_) => self.frame.len(),
            Plan::Segment { layout, .. } => layout.payload,
        }
    }

    /// Writes the next segment, a complete Ethernet frame, at the start of `out` and returns
    /// its length; `None` once every segment has been written. After an error the segmenter
    /// is finished (returns `None`), so that a loop over it always ends.
    pub fn next_segment(&mut self, out: &mut [u8]) -> Option<Result<usize, GsoError>> {
        self.step(|segmenter, index| {
            let headers = segmenter.write_headers(index, out)?;
            let len = headers.len + headers.payload.len();
            let available = out.len();
            out.get_mut(headers.len..len)
                .ok_or(GsoError::SegmentTooLarge {
                    needed: len,
                    available,
                })?
                .copy_from_slice(headers.payload);
            Ok(len)
        })
    }

    /// Writes the next segment's headers ([`header_len`](Self::header_len) bytes, lengths,
    /// sequence number and checksums final) at the start of `out` and returns them with the
    /// payload that completes the segment, where it lies in the frame. The same segments as
    /// [`next_segment`](Self::next_segment), byte for byte, without copying the payload.
    pub fn next_segment_headers(
        &mut self,
        out: &mut [u8],
    ) -> Option<Result<SegmentHeaders<'a>, GsoError>> {
        self.step(|segmenter, index| segmenter.write_headers(index, out))
    }

    /// Runs `write` for the next segment; after an error, finishes.
    fn step<T>(
        &mut self,
        write: impl FnOnce(&Self, usize) -> Result<T, GsoError>,
    ) -> Option<Result<T, GsoError>> {
        if self.next >= self.count {
            return None;
        }
        let index = self.next;
        let result = write(self, index);
        self.next = if result.is_ok() {
            index + 1
        } else {
            self.count
        };
        Some(result)
    }

    fn write_headers(&self, index: usize, out: &mut [u8]) -> Result<SegmentHeaders<'a>, GsoError> {
        match self.plan {
            Plan::PassThrough(info) => self.pass_through(&info, out),
            Plan::Segment {
                layout,
                segment_payload,
            } => self.segment_headers(&layout, segment_payload, index, out),
        }
    }

    fn pass_through(
        &self,
        info: &OffloadInfo,
        out: &mut [u8],
    ) -> Result<SegmentHeaders<'a>, GsoError> {
        let len = self.frame.len();
        let available = out.len();
        let dst = out.get_mut(..len).ok_or(GsoError::SegmentTooLarge {
            needed: len,
            available,
        })?;
        dst.copy_from_slice(self.frame);
        complete_checksum(dst, info)?;
        Ok(SegmentHeaders { len, payload: &[] })
    }

    /// Segment `index`'s headers into `out`; its L4 checksum sums the headers written and the
    /// payload where it lies.
    fn segment_headers(
        &self,
        layout: &Layout,
        segment_payload: usize,
        index: usize,
        out: &mut [u8],
    ) -> Result<SegmentHeaders<'a>, GsoError> {
        let frame: &'a [u8] = self.frame;
        let header_len = layout.payload;
        let offset = index * segment_payload;
        let piece = frame[header_len..]
            .get(offset..)
            .map(|rest| &rest[..rest.len().min(segment_payload)])
            .unwrap_or_default();
        let available = out.len();
        let out = out.get_mut(..header_len).ok_or(GsoError::SegmentTooLarge {
            needed: header_len + piece.len(),
            available,
        })?;
        out.copy_from_slice(&frame[..header_len]);

        let too_long = |_| GsoError::LengthMismatch;
        // Index < MAX_SEGMENTS, so it fits; IP identifications wrap by design.
        let index16 = u16::try_from(index).map_err(|_| GsoError::TooManySegments {
            segments: self.count,
        })?;
        let (l3, l4) = out.split_at_mut(layout.l4);
        let l3 = &mut l3[layout.l3..];
        let ip_len = l3.len() + l4.len() + piece.len();
        let l4_len = l4.len() + piece.len();
        let protocol = match layout.transport {
            Transport::Tcp => tcp::PROTOCOL,
            Transport::Udp => crate::udp::PROTOCOL,
        };
        let pseudo = match layout.family {
            Family::V4 => {
                let mut ip = Ipv4Packet::new_unchecked(&mut *l3);
                ip.set_total_len(u16::try_from(ip_len).map_err(too_long)?);
                ip.set_ident(ip.ident().wrapping_add(index16));
                ip.fill_checksum();
                let l4_len = u16::try_from(l4_len).map_err(too_long)?;
                checksum::pseudo_header_v4(ip.src_addr(), ip.dst_addr(), protocol, l4_len)
            }
            Family::V6 => {
                let payload_len = u16::try_from(ip_len - 40).map_err(too_long)?;
                l3[4..6].copy_from_slice(&payload_len.to_be_bytes());
                let l4_len = u32::try_from(l4_len).map_err(too_long)?;
                let (src, dst) = (ipv6_addr(&l3[8..24]), ipv6_addr(&l3[24..40]));
                checksum::pseudo_header_v6(src, dst, protocol, l4_len)
            }
        };
        // L4 headers are a whole number of 32-bit words (TCP) or 8 bytes (UDP): the payload's
        // sum adds on without a byte swap.
        let l4_sum = |l4: &[u8]| {
            checksum::combine(
                checksum::combine(pseudo, checksum::sum(l4)),
                checksum::sum(piece),
            )
        };
        match layout.transport {
            Transport::Tcp => {
                let mut tcp = TcpPacket::new_unchecked(&mut *l4);
                let advance = u32::try_from(offset).map_err(too_long)?;
                tcp.set_seq_number(tcp.seq_number().wrapping_add(advance));
                if index + 1 != self.count {
                    tcp.set_fin(false);
                    tcp.set_psh(false);
                }
                if index != 0 {
                    tcp.set_cwr(false);
                }
                tcp.set_checksum(0);
                let value = checksum::finish(l4_sum(l4));
                TcpPacket::new_unchecked(&mut *l4).set_checksum(value);
            }
            Transport::Udp => {
                let mut udp = UdpPacket::new_unchecked(&mut *l4);
                udp.set_len(u16::try_from(l4_len).map_err(too_long)?);
                udp.set_checksum(0);
                // 0 means "no checksum" in UDP: a computed zero goes out as 0xffff.
                let value = checksum::finish(l4_sum(l4));
                let value = if value == 0 { 0xffff } else { value };
                UdpPacket::new_unchecked(&mut *l4).set_checksum(value);
            }
        }
        Ok(SegmentHeaders {
            len: header_len,
            payload: piece,
        })
    }
}

/// An IPv6 address from 16 bytes (callers pass exactly 16).
fn ipv6_addr(bytes: &[u8]) -> Ipv6Addr {
    <[u8; 16]>::try_from(bytes).map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from)
}

#[cfg(test)]
mod tests;
