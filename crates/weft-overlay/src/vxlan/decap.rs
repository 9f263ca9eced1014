//! Decapsulation: from a received UDP payload to the inner Ethernet frame, or a drop reason.
//! Pure (no I/O) so that every hostile case is testable and fuzzable.

use std::net::IpAddr;
use std::ops::Range;

use weft_packet::vxlan::{VxlanHeader, HEADER_LEN};
use weft_packet::{MacAddr, Vni};

use crate::vxlan::stats::DecapDrop;

/// What a decapsulator checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecapRules {
    /// The port's VNI.
    pub vni: Vni,
    /// Drop datagrams with reserved bits set (RFC 7348 says ignore them: off by default).
    pub strict_reserved: bool,
    /// Largest inner frame, Ethernet header and two VLAN tags included (MTU + 22).
    pub max_frame_len: usize,
}

/// The Ethernet header the inner frame must at least hold.
pub const MIN_INNER_LEN: usize = 14;

/// A datagram that passed the checks: where the inner frame lies in it, and its source MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decapsulated {
    /// The inner frame's byte range in the datagram.
    pub inner: Range<usize>,
    /// The inner frame's source MAC (always unicast).
    pub inner_src: MacAddr,
}

/// Checks a UDP payload (VXLAN header + inner frame). `truncated`: the kernel cut the
/// datagram because it exceeded the receive buffer (then the inner frame is too big).
pub fn decapsulate(
    datagram: &[u8],
    truncated: bool,
    rules: &DecapRules,
) -> Result<Decapsulated, DecapDrop> {
    let header = VxlanHeader::new_checked(datagram).map_err(|_| {
        if datagram.len() < HEADER_LEN {
            DecapDrop::Truncated
        } else {
            DecapDrop::BadFlags
        }
    })?;
    if rules.strict_reserved && header.has_reserved_bits() {
        return Err(DecapDrop::ReservedBits);
    }
    if header.vni() != rules.vni {
        return Err(DecapDrop::UnknownVni);
    }
    let inner = header.payload();
    if truncated || inner.len() > rules.max_frame_len {
        return Err(DecapDrop::InnerTooBig);
    }
    if inner.len() < MIN_INNER_LEN {
        return Err(DecapDrop::InnerTooShort);
    }
    let inner_src = MacAddr::from_bytes(&inner[6..12]).ok_or(DecapDrop::InnerTooShort)?;
    if !inner_src.is_unicast() {
        return Err(DecapDrop::InnerBadSource);
    }
    Ok(Decapsulated {
        inner: HEADER_LEN..datagram.len(),
        inner_src,
    })
}

/// Whether a datagram from `source` is taken: remotes on the flood list (`remotes`, sorted:
/// configured ones and the directory's VTEPs) always, others only when the port learns
/// (RFC 7348 §7: learning from anyone lets a rogue endpoint hijack MACs, so both are off by
/// default).
pub fn remote_allowed(source: IpAddr, remotes: &[IpAddr], learning: bool) -> bool {
    learning || remotes.binary_search(&source).is_ok()
}
