//! VXLAN header (RFC 7348): 8 bytes between the outer UDP header and the inner Ethernet frame.
//!
//! ```text
//!  0               1               2               3
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//!
//! The I flag must be set; every other bit is reserved: zero on send, ignored on receive
//! (RFC 7348 §5). The view reports reserved bits through
//! [`VxlanHeader::has_reserved_bits`] and leaves the decision to the decapsulator.

use crate::error::{ParseError, Result};

/// UDP destination port assigned to VXLAN by IANA.
pub const VXLAN_PORT: u16 = 4789;
/// Length of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// Bytes VXLAN adds around an inner frame over IPv4: outer Ethernet (14) + IPv4 (20) + UDP (8)
/// + VXLAN (8).
pub const OVERHEAD_IPV4: usize = 50;
/// Bytes VXLAN adds around an inner frame over IPv6: outer Ethernet (14) + IPv6 (40) + UDP (8)
/// + VXLAN (8).
pub const OVERHEAD_IPV6: usize = 70;
/// The "VNI is valid" flag (RFC 7348 calls it I).
pub const FLAG_I: u8 = 0x08;

mod field {
    use core::ops::Range;
    pub(super) const FLAGS: usize = 0;
    pub(super) const RESERVED1: Range<usize> = 1..4;
    pub(super) const VNI: Range<usize> = 4..7;
    pub(super) const RESERVED2: usize = 7;
    pub(super) const PAYLOAD: usize = 8;
}

/// A 24-bit VXLAN Network Identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Vni(u32);

/// A value does not fit in the 24 bits of a VNI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("VNI {0} does not fit in 24 bits")]
pub struct VniOutOfRange(pub u32);

impl Vni {
    /// The largest VNI, 2^24 - 1.
    pub const MAX: Vni = Vni(0x00ff_ffff);

    /// A VNI from a number below 2^24.
    pub const fn new(value: u32) -> core::result::Result<Vni, VniOutOfRange> {
        if value > Self::MAX.0 {
            Err(VniOutOfRange(value))
        } else {
            Ok(Vni(value))
        }
    }

    /// The VNI as a number (always below 2^24).
    pub const fn get(self) -> u32 {
        self.0
    }

    const fn to_bytes(self) -> [u8; 3] {
        let b = self.0.to_be_bytes();
        [b[1], b[2], b[3]]
    }
}

impl TryFrom<u32> for Vni {
    type Error = VniOutOfRange;
    fn try_from(value: u32) -> core::result::Result<Self, Self::Error> {
        Vni::new(value)
    }
}

impl core::fmt::Display for Vni {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// A view over a VXLAN header and the inner frame behind it.
#[derive(Debug, Clone)]
pub struct VxlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanHeader<T> {
    /// Wraps a buffer without checks: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        VxlanHeader { buffer }
    }

    /// Wraps a buffer, checks that the header fits and that the I flag is set.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        header.check_flags()?;
        Ok(header)
    }

    /// Ensures every accessor is in bounds.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(ParseError::truncated(HEADER_LEN, len));
        }
        Ok(())
    }

    /// Ensures the I flag is set: without it the VNI means nothing. Call after `check_len`.
    pub fn check_flags(&self) -> Result<()> {
        if self.flags() & FLAG_I == 0 {
            return Err(ParseError::Malformed);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The flags byte (I is 0x08).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// True when any bit the RFC reserves is set (flags other than I, or a reserved field).
    /// Senders must clear them; receivers should ignore them, but a strict decapsulator may drop.
    pub fn has_reserved_bits(&self) -> bool {
        let d = self.buffer.as_ref();
        d[field::FLAGS] & !FLAG_I != 0
            || d[field::RESERVED1].iter().any(|&b| b != 0)
            || d[field::RESERVED2] != 0
    }

    /// The VXLAN Network Identifier.
    pub fn vni(&self) -> Vni {
        let d = &self.buffer.as_ref()[field::VNI];
        Vni(u32::from_be_bytes([0, d[0], d[1], d[2]]))
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanHeader<T> {
    /// Sets the flags byte.
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    /// Sets the VNI.
    pub fn set_vni(&mut self, vni: Vni) {
        self.buffer.as_mut()[field::VNI].copy_from_slice(&vni.to_bytes());
    }

    /// Clears every reserved bit and field, keeping the I flag as it is.
    pub fn clear_reserved(&mut self) {
        let d = self.buffer.as_mut();
        d[field::FLAGS] &= FLAG_I;
        d[field::RESERVED1].fill(0);
        d[field::RESERVED2] = 0;
    }

    /// Mutable access to the inner frame.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// Writes a VXLAN header for `vni` (I flag set, reserved bits zero) at the start of `buf` and
/// returns its length, [`HEADER_LEN`].
pub fn emit(vni: Vni, buf: &mut [u8]) -> Result<usize> {
    let available = buf.len();
    let header = buf
        .get_mut(..HEADER_LEN)
        .ok_or(ParseError::truncated(HEADER_LEN, available))?;
    header.fill(0);
    let mut view = VxlanHeader::new_unchecked(header);
    view.set_flags(FLAG_I);
    view.set_vni(vni);
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_buffer_is_truncated_error() {
        for len in 0..HEADER_LEN {
            let buf = vec![FLAG_I; len];
            assert_eq!(
                VxlanHeader::new_checked(&buf[..]).unwrap_err(),
                ParseError::truncated(HEADER_LEN, len)
            );
        }
    }

    #[test]
    fn missing_i_flag_is_malformed() {
        let buf = [0u8, 0, 0, 0, 0, 0, 42, 0];
        assert_eq!(
            VxlanHeader::new_checked(&buf[..]).unwrap_err(),
            ParseError::Malformed
        );
    }

    #[test]
    fn emitted_header_matches_rfc_layout() {
        let mut buf = [0xffu8; 12];
        let vni = Vni::new(0x12_3456).unwrap();
        assert_eq!(emit(vni, &mut buf).unwrap(), HEADER_LEN);
        assert_eq!(&buf[..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let view = VxlanHeader::new_checked(&buf[..]).unwrap();
        assert_eq!(view.vni(), vni);
        assert!(!view.has_reserved_bits());
        assert_eq!(view.payload(), &[0xff; 4]);
    }

    #[test]
    fn emit_into_short_buffer_is_truncated_error() {
        let mut buf = [0u8; 7];
        assert_eq!(
            emit(Vni::MAX, &mut buf).unwrap_err(),
            ParseError::truncated(8, 7)
        );
    }

    #[test]
    fn reserved_bits_are_reported_not_rejected() {
        for (index, value) in [(0, 0x88u8), (1, 1), (2, 0x80), (3, 1), (7, 1)] {
            let mut buf = [0x08u8, 0, 0, 0, 0, 0, 1, 0];
            buf[index] = value;
            let mut view = VxlanHeader::new_checked(&mut buf[..]).unwrap();
            assert!(view.has_reserved_bits(), "byte {index}");
            assert_eq!(view.vni().get(), 1);
            view.clear_reserved();
            assert!(!view.has_reserved_bits());
            assert_eq!(view.flags(), FLAG_I);
        }
    }

    #[test]
    fn vni_above_24_bits_is_rejected() {
        assert_eq!(Vni::new(1 << 24), Err(VniOutOfRange(1 << 24)));
        assert_eq!(Vni::try_from(0xff_ffff).unwrap(), Vni::MAX);
    }

    #[test]
    fn overhead_constants_add_up() {
        assert_eq!(OVERHEAD_IPV4, 14 + 20 + 8 + HEADER_LEN);
        assert_eq!(OVERHEAD_IPV6, 14 + 40 + 8 + HEADER_LEN);
    }

    proptest! {
        #[test]
        fn vni_round_trips(value in 0u32..=0xff_ffff) {
            let mut buf = [0u8; HEADER_LEN];
            emit(Vni::new(value).unwrap(), &mut buf).unwrap();
            prop_assert_eq!(VxlanHeader::new_checked(&buf[..]).unwrap().vni().get(), value);
        }

        #[test]
        fn checked_view_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok(view) = VxlanHeader::new_checked(&bytes[..]) {
                let _ = (view.flags(), view.vni(), view.has_reserved_bits(), view.payload());
            }
        }
    }
}
