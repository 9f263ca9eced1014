//! IEEE 802.1Q (C-tag) and 802.1ad (S-tag, QinQ) VLAN tags.
//!
//! A tag is four bytes between the source MAC address and the EtherType: a TPID (which takes
//! the EtherType's place) and the TCI (PCP, DEI, VID). [`VlanHeader`] is the view over what
//! follows a TPID (the TCI and the next EtherType), like smoltcp's `ieee8021q`;
//! [`VlanStack::parse`] reads the whole tag stack of a frame.

use crate::error::{ParseError, Result};
use crate::ethernet::HEADER_LEN as ETHERNET_HEADER_LEN;

/// Tag protocol identifiers.
pub mod tpid {
    /// IEEE 802.1Q customer tag (C-tag).
    pub const CTAG: u16 = 0x8100;
    /// IEEE 802.1ad service tag (S-tag), the standard outer tag of QinQ.
    pub const STAG: u16 = 0x88a8;
    /// The pre-802.1ad QinQ outer tag some equipment still sends; accepted as an outer tag.
    pub const QINQ_LEGACY: u16 = 0x9100;
}

/// True when `ethertype` announces a VLAN tag that may come first (outermost) in a frame.
pub const fn is_outer_tpid(ethertype: u16) -> bool {
    matches!(ethertype, tpid::CTAG | tpid::STAG | tpid::QINQ_LEGACY)
}

/// Length of one tag (TPID + TCI).
pub const TAG_LEN: usize = 4;

/// The tags a frame may carry; a third one is [`ParseError::Unsupported`].
pub const MAX_TAGS: usize = 2;

/// A tag control information word: priority (PCP), drop eligibility (DEI) and VLAN ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTci(u16);

impl VlanTci {
    /// Largest VLAN ID value (4095 is reserved by the standard, but representable).
    pub const MAX_VID: u16 = 0x0fff;
    /// Largest priority code point.
    pub const MAX_PCP: u8 = 7;

    /// Builds a TCI; `None` when `pcp > 7` or `vid > 4095`.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> Option<Self> {
        if pcp > Self::MAX_PCP || vid > Self::MAX_VID {
            return None;
        }
        let dei_bit: u16 = if dei { 0x1000 } else { 0 };
        Some(VlanTci(((pcp as u16) << 13) | dei_bit | vid))
    }
    /// Wraps the 16-bit TCI exactly as it is on the wire.
    pub const fn from_bits(bits: u16) -> Self {
        VlanTci(bits)
    }
    /// The 16-bit TCI as it is on the wire.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
    /// Priority code point (802.1p class of service), 0..=7.
    pub const fn pcp(self) -> u8 {
        self.0.to_be_bytes()[0] >> 5
    }
    /// Drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.0 & 0x1000 != 0
    }
    /// VLAN identifier, 0..=4095 (0: priority-tagged frame, no VLAN).
    pub const fn vid(self) -> u16 {
        self.0 & Self::MAX_VID
    }
    /// The same TCI with another VLAN ID; `None` when `vid > 4095`.
    pub const fn with_vid(self, vid: u16) -> Option<Self> {
        if vid > Self::MAX_VID {
            return None;
        }
        Some(VlanTci((self.0 & !Self::MAX_VID) | vid))
    }
}

/// One tag as read from (or to be written to) a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// The tag protocol identifier (see [`tpid`]).
    pub tpid: u16,
    /// The tag control information.
    pub tci: VlanTci,
}

impl VlanTag {
    /// The four wire bytes: TPID then TCI, big-endian.
    pub const fn to_bytes(self) -> [u8; TAG_LEN] {
        let t = self.tpid.to_be_bytes();
        let c = self.tci.0.to_be_bytes();
        [t[0], t[1], c[0], c[1]]
    }
}

/// Writes a four-byte tag (TPID, TCI) at the start of `buf`.
///
/// To tag a frame, move its addresses 4 bytes towards the front and write the tag at
/// offset 12, where the EtherType was.
pub fn write_tag(buf: &mut [u8], tag: VlanTag) -> Result<()> {
    let available = buf.len();
    let dst = buf
        .get_mut(..TAG_LEN)
        .ok_or(ParseError::truncated(TAG_LEN, available))?;
    dst.copy_from_slice(&tag.to_bytes());
    Ok(())
}

/// The tag stack of a frame and the EtherType after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanStack {
    /// The first (outermost) tag, if the frame is tagged.
    pub outer: Option<VlanTag>,
    /// The second tag (QinQ); only present when `outer` is.
    pub inner: Option<VlanTag>,
    /// The EtherType after the tags.
    pub ethertype: u16,
}

/// Big-endian u16 at `at`, or the truncation error for a header ending at `needed`.
#[inline]
fn be16(frame: &[u8], at: usize, needed: usize) -> Result<u16> {
    match frame.get(at..at + 2) {
        Some(&[hi, lo]) => Ok(u16::from_be_bytes([hi, lo])),
        _ => Err(ParseError::truncated(needed, frame.len())),
    }
}

impl VlanStack {
    /// Reads the tags of an Ethernet frame (starting at the destination address).
    ///
    /// The outer tag may use any of the three TPIDs; an inner tag must be a C-tag (0x8100).
    /// Errors: the Ethernet header or a tag is truncated ([`ParseError::Truncated`]); an inner
    /// tag with an S-tag TPID, or a third tag ([`ParseError::Unsupported`]).
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<VlanStack> {
        const OUTER_END: usize = ETHERNET_HEADER_LEN + TAG_LEN;
        const INNER_END: usize = OUTER_END + TAG_LEN;
        let first = be16(frame, 12, ETHERNET_HEADER_LEN)?;
        if !is_outer_tpid(first) {
            return Ok(VlanStack {
                outer: None,
                inner: None,
                ethertype: first,
            });
        }
        let outer = VlanTag {
            tpid: first,
            tci: VlanTci(be16(frame, 14, OUTER_END)?),
        };
        let second = be16(frame, 16, OUTER_END)?;
        if second != tpid::CTAG {
            if is_outer_tpid(second) {
                return Err(ParseError::Unsupported);
            }
            return Ok(VlanStack {
                outer: Some(outer),
                inner: None,
                ethertype: second,
            });
        }
        let inner = VlanTag {
            tpid: second,
            tci: VlanTci(be16(frame, 18, INNER_END)?),
        };
        let ethertype = be16(frame, 20, INNER_END)?;
        if is_outer_tpid(ethertype) {
            return Err(ParseError::Unsupported);
        }
        Ok(VlanStack {
            outer: Some(outer),
            inner: Some(inner),
            ethertype,
        })
    }

    /// How many tags the frame carries (0, 1 or 2).
    pub const fn tag_count(&self) -> usize {
        match (self.outer, self.inner) {
            (None, _) => 0,
            (Some(_), None) => 1,
            (Some(_), Some(_)) => 2,
        }
    }

    /// Offset of the payload (the L3 header) from the start of the frame: 14, 18 or 22.
    pub const fn payload_offset(&self) -> usize {
        ETHERNET_HEADER_LEN + TAG_LEN * self.tag_count()
    }
}

mod field {
    use core::ops::Range;
    pub(super) const TCI: Range<usize> = 0..2;
    pub(super) const ETHERTYPE: Range<usize> = 2..4;
    pub(super) const PAYLOAD: usize = 4;
}

/// Length of what follows a TPID: TCI and EtherType.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view over the bytes that follow a TPID: the TCI, the next EtherType and the payload.
#[derive(Debug, Clone)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wraps a buffer without checking its length: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanHeader { buffer }
    }

    /// Wraps a buffer and checks that the header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
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

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The tag control information.
    pub fn tci(&self) -> VlanTci {
        let d = &self.buffer.as_ref()[field::TCI];
        VlanTci(u16::from_be_bytes([d[0], d[1]]))
    }
    /// Priority code point.
    pub fn pcp(&self) -> u8 {
        self.tci().pcp()
    }
    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci().dei()
    }
    /// VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci().vid()
    }
    /// The EtherType that follows (or the TPID of an inner tag).
    pub fn ethertype(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([d[0], d[1]])
    }
    /// Everything after the TCI and EtherType.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Sets the tag control information.
    pub fn set_tci(&mut self, tci: VlanTci) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.0.to_be_bytes());
    }
    /// Sets the EtherType that follows.
    pub fn set_ethertype(&mut self, value: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.to_be_bytes());
    }
    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests;
