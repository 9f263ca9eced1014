//! Ethernet II frames and MAC addresses.
//!
//! The pattern every view in this crate follows (after smoltcp's `wire`): field offsets are
//! declared once as ranges in a private `field` module; `new_unchecked` wraps any buffer,
//! `check_len` verifies that every accessor is in bounds, and `new_checked` does both. After a
//! successful `check_len` no accessor panics.

use core::fmt;

use crate::error::{ParseError, Result};

/// A 48-bit IEEE 802 MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Builds an address from the first six bytes of `bytes`, if there are six.
    pub fn from_bytes(bytes: &[u8]) -> Option<MacAddr> {
        bytes.get(..6).and_then(|b| b.try_into().ok()).map(MacAddr)
    }
    /// The six bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }
    /// Group bit set: multicast or broadcast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
    /// Neither multicast nor broadcast nor all zero: a valid source address.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && *self != Self::ZERO
    }
    /// The address as a u64 (upper 16 bits zero), handy as a hash key.
    pub fn to_u64(&self) -> u64 {
        let [a, b, c, d, e, f] = self.0;
        // Two loads and swaps, not six byte moves: this keys every FDB lookup.
        (u64::from(u32::from_be_bytes([a, b, c, d])) << 16) | u64::from(u16::from_be_bytes([e, f]))
    }
    /// The inverse of [`MacAddr::to_u64`] (upper 16 bits ignored).
    pub fn from_u64(v: u64) -> MacAddr {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error from parsing a MAC address written as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}: expected six hex pairs like 52:54:00:12:34:56")]
pub struct MacParseError(pub String);

impl core::str::FromStr for MacAddr {
    type Err = MacParseError;
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        let err = || MacParseError(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(err)?;
            if part.len() != 2 {
                return Err(err());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

/// Well-known EtherType values.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP (RFC 903), what hypervisors announce a moved guest with.
    pub const RARP: u16 = 0x8035;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    use core::ops::Range;
    pub(super) const DESTINATION: Range<usize> = 0..6;
    pub(super) const SOURCE: Range<usize> = 6..12;
    pub(super) const ETHERTYPE: Range<usize> = 12..14;
    pub(super) const PAYLOAD: usize = 14;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view over an Ethernet II frame (without FCS).
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer and checks that the header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
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

    /// Destination MAC address.
    pub fn dst_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        MacAddr(a)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        MacAddr(a)
    }

    /// The EtherType (or the TPID of the first VLAN tag).
    pub fn ethertype(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }
    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }
    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, value: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.to_be_bytes());
    }
    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_buffer_is_truncated_error() {
        for len in 0..HEADER_LEN {
            let buf = vec![0u8; len];
            assert_eq!(
                EthernetFrame::new_checked(&buf[..]).unwrap_err(),
                ParseError::truncated(HEADER_LEN, len)
            );
        }
    }

    #[test]
    fn fields_read_and_write_back() {
        let mut buf = [0u8; 60];
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        let dst: MacAddr = "52:54:00:aa:bb:cc".parse().unwrap();
        f.set_dst_addr(dst);
        f.set_src_addr(MacAddr([2, 0, 0, 0, 0, 1]));
        f.set_ethertype(ethertype::IPV4);
        assert_eq!(f.dst_addr(), dst);
        assert_eq!(f.src_addr().to_string(), "02:00:00:00:00:01");
        assert_eq!(f.ethertype(), 0x0800);
        assert_eq!(f.payload().len(), 46);
    }

    #[test]
    fn mac_text_round_trips_and_rejects_garbage() {
        let m: MacAddr = "02-00-5e-10-00-ff".parse().unwrap();
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
        for bad in [
            "",
            "02:00",
            "02:00:5e:10:00:ff:11",
            "zz:00:00:00:00:00",
            "2:0:0:0:0:0",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        assert!(!MacAddr::ZERO.is_unicast());
    }
}
