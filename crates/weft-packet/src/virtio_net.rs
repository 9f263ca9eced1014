//! The virtio-net header (`struct virtio_net_hdr`, virtio 1.x §5.1.6) that precedes every frame
//! on a virtio-net queue, a vhost-user port or a TAP with `IFF_VNET_HDR`.
//!
//! All fields are little-endian. Virtio 1.x headers are 12 bytes (with `num_buffers`); the
//! legacy header without `num_buffers` is 10 bytes and is what a TAP uses by default. The view
//! accepts both: [`VirtioNetHeader::num_buffers`] is `None` on a legacy header.
//!
//! A header from a guest is hostile input: [`VirtioNetHeader::to_offload_info`] checks every
//! field against the frame it came with and names what is wrong, so that the switch can count
//! drops by reason.

use crate::error::{ParseError, Result};
use crate::ethernet;
use crate::gso::MAX_SEGMENTS;
use crate::offload::{GsoKind, OffloadInfo};

/// Length of the virtio 1.x header (with `num_buffers`).
pub const HEADER_LEN: usize = 12;
/// Length of the legacy header (without `num_buffers`), the TAP default.
pub const LEGACY_HEADER_LEN: usize = 10;
/// Largest `gso_size` accepted: the payload of one UDP/IPv4 datagram without options
/// (65535 - 20 - 8). Anything larger cannot be one segment of any IP packet.
pub const MAX_GSO_SIZE: u16 = 65_507;

/// Bits of the `flags` field.
pub mod flags {
    /// The L4 checksum is partial: sum from `csum_start`, store at `csum_start + csum_offset`.
    pub const NEEDS_CSUM: u8 = 1;
    /// The checksum has been validated (device to driver).
    pub const DATA_VALID: u8 = 2;
    /// `csum_start`/`csum_offset` hold receive-coalescing counters (device to driver only).
    pub const RSC_INFO: u8 = 4;
    /// Every bit defined above.
    pub const ALL: u8 = NEEDS_CSUM | DATA_VALID | RSC_INFO;
}

/// The virtio-net feature bits the offload rules below depend on (virtio 1.x §5.1.3).
pub mod feature {
    /// The device takes frames with a partial checksum (`VIRTIO_NET_F_CSUM`).
    pub const CSUM: u32 = 0;
    /// The device takes TCP-over-IPv4 super-frames (`VIRTIO_NET_F_HOST_TSO4`).
    pub const HOST_TSO4: u32 = 11;
    /// The device takes TCP-over-IPv6 super-frames (`VIRTIO_NET_F_HOST_TSO6`).
    pub const HOST_TSO6: u32 = 12;
    /// The driver takes UDP-over-IPv4 super-frames (`VIRTIO_NET_F_GUEST_USO4`).
    pub const GUEST_USO4: u32 = 54;
    /// The driver takes UDP-over-IPv6 super-frames (`VIRTIO_NET_F_GUEST_USO6`).
    pub const GUEST_USO6: u32 = 55;
    /// The device takes UDP super-frames, IPv4 or IPv6 (`VIRTIO_NET_F_HOST_USO`).
    pub const HOST_USO: u32 = 56;
}

/// True when a driver that negotiated `features` may hand the device a frame with this
/// offload state (§5.1.6.2: a driver must not use what it did not negotiate): a partial
/// checksum needs `CSUM`, TCP segmentation `HOST_TSO4` / `HOST_TSO6`, UDP segmentation
/// `HOST_USO`. The one rule for both sides: weft's vhost backend checks what a guest sends
/// with it, weft-client what it may send.
pub fn driver_may_send(features: u64, info: &OffloadInfo) -> bool {
    let has = |bit: u32| features & (1u64 << bit) != 0;
    if info.needs_csum && !has(feature::CSUM) {
        return false;
    }
    match info.gso {
        GsoKind::None => true,
        GsoKind::TcpV4 => has(feature::HOST_TSO4),
        GsoKind::TcpV6 => has(feature::HOST_TSO6),
        GsoKind::UdpL4 => has(feature::HOST_USO),
    }
}

/// True when a driver that negotiated `features` may ask the device for any offload on
/// transmit (`CSUM`, `HOST_TSO4`, `HOST_TSO6` or `HOST_USO`). Without one, the only header it may
/// write says "no offload" (§5.1.6.2.1: `flags` zero, `gso_type` NONE), so a device need
/// not read the header at all — as DPDK's vhost library does not
/// (`virtio_net_with_host_offload`). Never false where [`driver_may_send`] allows an offload.
pub const fn driver_may_ask_offloads(features: u64) -> bool {
    const ASKING: u64 = (1 << feature::CSUM)
        | (1 << feature::HOST_TSO4)
        | (1 << feature::HOST_TSO6)
        | (1 << feature::HOST_USO);
    features & ASKING != 0
}

/// Values of the `gso_type` field.
pub mod gso_type {
    /// Not a GSO frame.
    pub const NONE: u8 = 0;
    /// TCP over IPv4.
    pub const TCPV4: u8 = 1;
    /// UDP fragmentation offload (UFO): deprecated, not supported.
    pub const UDP: u8 = 3;
    /// TCP over IPv6.
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (USO), IPv4 or IPv6.
    pub const UDP_L4: u8 = 5;
    /// Flag bit: the TCP super-frame has CWR set and ECN applies (CWR on the first segment only).
    pub const ECN: u8 = 0x80;
}

/// Where the L4 checksum sits in a TCP header.
const TCP_CSUM_OFFSET: u16 = 16;
/// Where the L4 checksum sits in a UDP header.
const UDP_CSUM_OFFSET: u16 = 6;
/// Smallest TCP header.
const TCP_MIN_HEADER: usize = 20;
/// UDP header.
const UDP_HEADER: usize = 8;

mod field {
    use core::ops::Range;
    pub(super) const FLAGS: usize = 0;
    pub(super) const GSO_TYPE: usize = 1;
    pub(super) const HDR_LEN: Range<usize> = 2..4;
    pub(super) const GSO_SIZE: Range<usize> = 4..6;
    pub(super) const CSUM_START: Range<usize> = 6..8;
    pub(super) const CSUM_OFFSET: Range<usize> = 8..10;
    pub(super) const NUM_BUFFERS: Range<usize> = 10..12;
}

/// Why a virtio-net header was refused. One variant per reason, so drops can be counted by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum VirtioNetHeaderError {
    /// Flag bits outside NEEDS_CSUM, DATA_VALID and RSC_INFO.
    #[error("unknown virtio-net header flags {0:#04x}")]
    UnknownFlags(u8),
    /// RSC_INFO is only meaningful from a device to a driver; no sender may set it.
    #[error("RSC_INFO set on a frame to forward")]
    RscInfo,
    /// A `gso_type` value virtio does not define.
    #[error("unknown GSO type {0:#04x}")]
    UnknownGsoType(u8),
    /// UDP fragmentation offload (gso_type 3) is deprecated and not supported.
    #[error("UFO (GSO type UDP) is not supported")]
    UfoUnsupported,
    /// The ECN bit on anything but TCP segmentation.
    #[error("ECN bit set without TCP segmentation")]
    EcnWithoutTcpGso,
    /// Segmentation asked for without a partial checksum to complete per segment.
    #[error("GSO frame without NEEDS_CSUM")]
    GsoWithoutNeedsCsum,
    /// Segmentation asked for with a segment size of zero.
    #[error("GSO frame with gso_size 0")]
    GsoSizeZero,
    /// A segment size no IP packet can carry.
    #[error("gso_size {0} above the maximum {MAX_GSO_SIZE}")]
    GsoSizeTooLarge(u16),
    /// The super-frame would split into more segments than the switch will produce.
    #[error("GSO frame would need {segments} segments, more than {MAX_SEGMENTS}")]
    TooManySegments {
        /// Segments the frame would need.
        segments: usize,
    },
    /// The checksum field (`csum_start + csum_offset`, two bytes) is not inside the frame.
    #[error("checksum field at {csum_start}+{csum_offset} outside a {frame_len}-byte frame")]
    CsumOutOfFrame {
        /// Claimed start of checksumming.
        csum_start: u16,
        /// Claimed offset of the checksum field.
        csum_offset: u16,
        /// Length of the frame.
        frame_len: usize,
    },
    /// Checksumming starts inside the Ethernet header, where no L4 header can be; completing
    /// the checksum could then rewrite MAC addresses after the switch forwarded on them.
    #[error("csum_start {csum_start} inside the Ethernet header")]
    CsumStartInEthernetHeader {
        /// Claimed start of checksumming.
        csum_start: u16,
    },
    /// `csum_offset` does not point at the checksum of the L4 header the GSO type names.
    #[error("csum_offset {csum_offset} is not the L4 checksum offset for this GSO type")]
    BadGsoCsumOffset {
        /// The offset given.
        csum_offset: u16,
    },
    /// `hdr_len` claims more header than the frame holds.
    #[error("hdr_len {hdr_len} larger than the {frame_len}-byte frame")]
    HdrLenTooLarge {
        /// The header length given.
        hdr_len: u16,
        /// Length of the frame.
        frame_len: usize,
    },
}

/// A view over a virtio-net header (12-byte virtio 1.x or 10-byte legacy).
#[derive(Debug, Clone)]
pub struct VirtioNetHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VirtioNetHeader<T> {
    /// Wraps a buffer without checks: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        VirtioNetHeader { buffer }
    }

    /// Wraps a buffer and checks that at least the legacy header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// Ensures every accessor is in bounds (at least [`LEGACY_HEADER_LEN`] bytes).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < LEGACY_HEADER_LEN {
            return Err(ParseError::truncated(LEGACY_HEADER_LEN, len));
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn read_u16(&self, range: core::ops::Range<usize>) -> u16 {
        let d = &self.buffer.as_ref()[range];
        u16::from_le_bytes([d[0], d[1]])
    }

    /// The flags byte (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// The `gso_type` byte, ECN bit included (see [`gso_type`]).
    pub fn gso_type(&self) -> u8 {
        self.buffer.as_ref()[field::GSO_TYPE]
    }
    /// True when the ECN bit of `gso_type` is set.
    pub fn gso_ecn(&self) -> bool {
        self.gso_type() & gso_type::ECN != 0
    }
    /// Length of the headers (Ethernet to L4), a hint for GSO frames.
    pub fn hdr_len(&self) -> u16 {
        self.read_u16(field::HDR_LEN)
    }
    /// Payload bytes per segment.
    pub fn gso_size(&self) -> u16 {
        self.read_u16(field::GSO_SIZE)
    }
    /// Where checksumming starts, from the start of the frame.
    pub fn csum_start(&self) -> u16 {
        self.read_u16(field::CSUM_START)
    }
    /// Where the checksum is stored, relative to `csum_start`.
    pub fn csum_offset(&self) -> u16 {
        self.read_u16(field::CSUM_OFFSET)
    }
    /// Number of receive buffers merged into this frame; `None` on a legacy header.
    pub fn num_buffers(&self) -> Option<u16> {
        let d = self.buffer.as_ref().get(field::NUM_BUFFERS)?;
        Some(u16::from_le_bytes([d[0], d[1]]))
    }

    /// Validates the header against the `frame_len`-byte Ethernet frame that follows it and
    /// translates it.
    ///
    /// Fields that mean nothing for this frame are ignored and come out as zero, as Linux does:
    /// `csum_start`/`csum_offset` without NEEDS_CSUM, `gso_size`/`hdr_len` without GSO.
    /// DATA_VALID is passed through; the ECN bit is accepted on TCP segmentation only and not
    /// carried (the segmenter always puts CWR on the first segment only, which is what it asks).
    pub fn to_offload_info(
        &self,
        frame_len: usize,
    ) -> core::result::Result<OffloadInfo, VirtioNetHeaderError> {
        use VirtioNetHeaderError as E;
        let flag_bits = self.flags();
        if flag_bits == 0 && self.gso_type() == 0 {
            // The common frame asks for nothing; every other field then means nothing.
            return Ok(OffloadInfo::default());
        }
        if flag_bits & !flags::ALL != 0 {
            return Err(E::UnknownFlags(flag_bits));
        }
        if flag_bits & flags::RSC_INFO != 0 {
            return Err(E::RscInfo);
        }
        let needs_csum = flag_bits & flags::NEEDS_CSUM != 0;
        let ecn = self.gso_ecn();
        let (gso, csum_offset_required, l4_min_header) = match self.gso_type() & !gso_type::ECN {
            gso_type::NONE if ecn => return Err(E::EcnWithoutTcpGso),
            gso_type::NONE => (GsoKind::None, None, 0),
            gso_type::TCPV4 => (GsoKind::TcpV4, Some(TCP_CSUM_OFFSET), TCP_MIN_HEADER),
            gso_type::TCPV6 => (GsoKind::TcpV6, Some(TCP_CSUM_OFFSET), TCP_MIN_HEADER),
            gso_type::UDP => return Err(E::UfoUnsupported),
            gso_type::UDP_L4 if ecn => return Err(E::EcnWithoutTcpGso),
            gso_type::UDP_L4 => (GsoKind::UdpL4, Some(UDP_CSUM_OFFSET), UDP_HEADER),
            _ => return Err(E::UnknownGsoType(self.gso_type())),
        };

        let mut info = OffloadInfo {
            needs_csum,
            data_valid: flag_bits & flags::DATA_VALID != 0,
            gso,
            ..OffloadInfo::default()
        };

        if needs_csum {
            let (csum_start, csum_offset) = (self.csum_start(), self.csum_offset());
            let field_start = usize::from(csum_start) + usize::from(csum_offset);
            if field_start + 2 > frame_len {
                return Err(E::CsumOutOfFrame {
                    csum_start,
                    csum_offset,
                    frame_len,
                });
            }
            if usize::from(csum_start) < ethernet::HEADER_LEN {
                return Err(E::CsumStartInEthernetHeader { csum_start });
            }
            info.csum_start = csum_start;
            info.csum_offset = csum_offset;
        }

        let Some(csum_offset_required) = csum_offset_required else {
            return Ok(info);
        };
        if !needs_csum {
            return Err(E::GsoWithoutNeedsCsum);
        }
        if info.csum_offset != csum_offset_required {
            return Err(E::BadGsoCsumOffset {
                csum_offset: info.csum_offset,
            });
        }
        let gso_size = self.gso_size();
        if gso_size == 0 {
            return Err(E::GsoSizeZero);
        }
        if gso_size > MAX_GSO_SIZE {
            return Err(E::GsoSizeTooLarge(gso_size));
        }
        let hdr_len = self.hdr_len();
        if usize::from(hdr_len) > frame_len {
            return Err(E::HdrLenTooLarge { hdr_len, frame_len });
        }
        // hdr_len is only a hint (it may be 0); the L4 header starts at csum_start for GSO
        // frames, so the headers are at least that long.
        let headers = usize::from(hdr_len).max(usize::from(info.csum_start) + l4_min_header);
        let segments = frame_len
            .saturating_sub(headers)
            .div_ceil(usize::from(gso_size));
        if segments > MAX_SEGMENTS {
            return Err(E::TooManySegments { segments });
        }
        info.gso_size = gso_size;
        info.hdr_len = hdr_len;
        Ok(info)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VirtioNetHeader<T> {
    fn write_u16(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_le_bytes());
    }

    /// Sets the flags byte.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }
    /// Sets the `gso_type` byte (ECN bit included).
    pub fn set_gso_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::GSO_TYPE] = value;
    }
    /// Sets or clears the ECN bit of `gso_type`.
    pub fn set_gso_ecn(&mut self, ecn: bool) {
        let value = if ecn {
            self.gso_type() | gso_type::ECN
        } else {
            self.gso_type() & !gso_type::ECN
        };
        self.set_gso_type(value);
    }
    /// Sets `hdr_len`.
    pub fn set_hdr_len(&mut self, value: u16) {
        self.write_u16(field::HDR_LEN, value);
    }
    /// Sets `gso_size`.
    pub fn set_gso_size(&mut self, value: u16) {
        self.write_u16(field::GSO_SIZE, value);
    }
    /// Sets `csum_start`.
    pub fn set_csum_start(&mut self, value: u16) {
        self.write_u16(field::CSUM_START, value);
    }
    /// Sets `csum_offset`.
    pub fn set_csum_offset(&mut self, value: u16) {
        self.write_u16(field::CSUM_OFFSET, value);
    }
    /// Sets `num_buffers`; a legacy (10-byte) header has no room for it.
    pub fn set_num_buffers(&mut self, value: u16) -> Result<()> {
        let available = self.buffer.as_ref().len();
        let d = self
            .buffer
            .as_mut()
            .get_mut(field::NUM_BUFFERS)
            .ok_or(ParseError::truncated(HEADER_LEN, available))?;
        d.copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Writes every field but `num_buffers` from `info` (the ECN bit is cleared; set it with
    /// [`set_gso_ecn`](Self::set_gso_ecn) if the frame needs it).
    pub fn set_offload_info(&mut self, info: &OffloadInfo) {
        self.set_flags(flag_bits_of(info));
        self.set_gso_type(gso_type_of(info.gso));
        self.set_hdr_len(info.hdr_len);
        self.set_gso_size(info.gso_size);
        self.set_csum_start(info.csum_start);
        self.set_csum_offset(info.csum_offset);
    }
}

/// The header's flags for `info`.
fn flag_bits_of(info: &OffloadInfo) -> u8 {
    let mut flag_bits = 0;
    if info.needs_csum {
        flag_bits |= flags::NEEDS_CSUM;
    }
    if info.data_valid {
        flag_bits |= flags::DATA_VALID;
    }
    flag_bits
}

/// The header's `gso_type` for `kind`.
fn gso_type_of(kind: GsoKind) -> u8 {
    match kind {
        GsoKind::None => gso_type::NONE,
        GsoKind::TcpV4 => gso_type::TCPV4,
        GsoKind::TcpV6 => gso_type::TCPV6,
        GsoKind::UdpL4 => gso_type::UDP_L4,
    }
}

/// The 12-byte header describing `info` with `num_buffers`, as the little-endian words of
/// its bytes 0..8 and 8..12: what a device stores into guest memory with two integer
/// stores. (Assembling the bytes in memory and reading them back as words makes the CPU
/// wait for every earlier store to drain, the frame's own stores into guest memory
/// included.)
#[inline]
pub fn header_words(info: &OffloadInfo, num_buffers: u16) -> (u64, u32) {
    let low = u64::from(flag_bits_of(info))
        | u64::from(gso_type_of(info.gso)) << 8
        | u64::from(info.hdr_len) << 16
        | u64::from(info.gso_size) << 32
        | u64::from(info.csum_start) << 48;
    let high = u32::from(info.csum_offset) | u32::from(num_buffers) << 16;
    (low, high)
}

/// [`header_words`] for a frame that asks for neither a checksum nor segmentation (every
/// field but `data_valid` zero): the usual frame's header, without building it field by
/// field.
#[inline]
pub fn plain_header_words(data_valid: bool, num_buffers: u16) -> (u64, u32) {
    let flag_bits = if data_valid { flags::DATA_VALID } else { 0 };
    (u64::from(flag_bits), u32::from(num_buffers) << 16)
}

impl VirtioNetHeader<[u8; HEADER_LEN]> {
    /// A 12-byte header describing `info`, with `num_buffers` 0.
    pub fn from_offload_info(info: &OffloadInfo) -> Self {
        let mut header = VirtioNetHeader::new_unchecked([0u8; HEADER_LEN]);
        header.set_offload_info(info);
        header
    }
}

#[cfg(test)]
mod tests;
