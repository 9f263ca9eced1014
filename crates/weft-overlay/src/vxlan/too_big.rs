//! Frames too big for the overlay: instead of a silent drop, the port answers the sender with
//! ICMP "fragmentation needed" (IPv4 with DF) or ICMPv6 "packet too big", announcing the
//! inner MTU, so that its path MTU discovery adapts.
//!
//! The answer is an Ethernet frame addressed like one coming back from the destination: its
//! source MAC and IP are the oversize frame's destination MAC and IP, its destination the
//! sender's (what the Linux kernel's vxlan PMTU discovery in bridged setups and Open vSwitch
//! do): the sender's stack accepts it from its "neighbour", with no address of the host
//! leaking into the overlay. The switch hands the transmit half the frames its MTU refuses
//! (`PortTx::too_big`); the transmit half builds the answer and queues it in a small bounded
//! [`TooBigQueue`]; the receive half hands it to the switch with the next receive, as if it
//! came from the overlay, so it is switched back to the sender's port. It is handed over as
//! the port's own frame (`RxBatch::push_own`): the switch does not learn its source, an
//! address the sender chose, as a station behind the overlay. Answers are rate
//! limited (a token bucket), and never sent about ICMP errors, fragments, non-DF IPv4,
//! VLAN-tagged frames or multicast / unspecified senders.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use weft_packet::checksum;
use weft_packet::icmp::{emit_frag_needed_v4, emit_packet_too_big_v6};

/// Largest answer: Ethernet + IPv6 + an ICMPv6 message of at most 1240 bytes.
pub const MAX_ANSWER: usize = 14 + 1280;
/// Answers waiting for the receive half.
pub const QUEUE_LEN: usize = 8;
/// Bytes of the oversize frame an answer quotes at most (IPv6's quote is the larger).
pub const QUOTE_PREFIX: usize = 14 + 1240;

/// Writes the answer to the oversize frame `frame` (a prefix of at least its headers is
/// enough) announcing `mtu` into `out`; `None` when no answer is due.
pub fn answer(frame: &[u8], mtu: usize, out: &mut [u8; MAX_ANSWER]) -> Option<usize> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let (dst_mac, src_mac) = (frame.get(0..6)?, frame.get(6..12)?);
    if src_mac[0] & 1 != 0 || dst_mac[0] & 1 != 0 {
        return None;
    }
    let ip = frame.get(14..)?;
    out[0..6].copy_from_slice(src_mac);
    out[6..12].copy_from_slice(dst_mac);
    out[12..14].copy_from_slice(&ethertype.to_be_bytes());
    let len = match ethertype {
        0x0800 => answer_v4(ip, mtu, &mut out[14..])?,
        0x86dd => answer_v6(ip, mtu, &mut out[14..])?,
        _ => return None,
    };
    Some(14 + len)
}

fn answer_v4(ip: &[u8], mtu: usize, out: &mut [u8]) -> Option<usize> {
    let header_len = usize::from(*ip.first()? & 0x0f) * 4;
    let flags_offset = u16::from_be_bytes(ip.get(6..8)?.try_into().ok()?);
    let dont_fragment = flags_offset & 0x4000 != 0;
    let later_fragment = flags_offset & 0x1fff != 0;
    let protocol = *ip.get(9)?;
    let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
    let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
    let icmp_error = protocol == 1 && !matches!(ip.get(header_len), Some(8));
    let src_ip = Ipv4Addr::from(src);
    if *ip.first()? >> 4 != 4
        || header_len < 20
        || !dont_fragment
        || later_fragment
        || icmp_error
        || src_ip.is_unspecified()
        || src_ip.is_multicast()
        || src_ip.is_broadcast()
    {
        return None;
    }
    let (header, message) = out.split_at_mut_checked(20)?;
    let next_hop = u16::try_from(mtu).unwrap_or(u16::MAX);
    let icmp_len = emit_frag_needed_v4(next_hop, ip, message).ok()?;
    let total = u16::try_from(20 + icmp_len).ok()?;
    header.fill(0);
    header[0] = 0x45;
    header[2..4].copy_from_slice(&total.to_be_bytes());
    header[8] = 64; // TTL
    header[9] = 1; // ICMP
    header[12..16].copy_from_slice(&dst);
    header[16..20].copy_from_slice(&src);
    let sum = checksum::checksum(header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
    Some(20 + icmp_len)
}

fn answer_v6(ip: &[u8], mtu: usize, out: &mut [u8]) -> Option<usize> {
    let next_header = *ip.get(6)?;
    let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
    let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
    let (src_ip, dst_ip) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
    let icmp_error = next_header == 58 && ip.get(40).is_some_and(|t| *t < 128);
    if *ip.first()? >> 4 != 6 || icmp_error || src_ip.is_unspecified() || src_ip.is_multicast() {
        return None;
    }
    let (header, message) = out.split_at_mut_checked(40)?;
    let mtu = u32::try_from(mtu).unwrap_or(u32::MAX);
    let icmp_len = emit_packet_too_big_v6(dst_ip, src_ip, mtu, ip, message).ok()?;
    let payload = u16::try_from(icmp_len).ok()?;
    header.fill(0);
    header[0] = 0x60;
    header[4..6].copy_from_slice(&payload.to_be_bytes());
    header[6] = 58; // ICMPv6
    header[7] = 64; // hop limit
    header[8..24].copy_from_slice(&dst);
    header[24..40].copy_from_slice(&src);
    Some(40 + icmp_len)
}

/// A token bucket: `rate` answers per second, bursts of up to `burst`.
#[derive(Debug)]
pub struct RateLimit {
    rate: u32,
    burst: u32,
    tokens: u32,
    last: Option<Instant>,
}

impl RateLimit {
    /// A full bucket.
    pub fn new(rate: u32, burst: u32) -> RateLimit {
        RateLimit {
            rate,
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Takes a token at `now` if one is left.
    pub fn allow(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let elapsed_ms = now.saturating_duration_since(last).as_millis();
            let earned = elapsed_ms.saturating_mul(u128::from(self.rate)) / 1000;
            if earned > 0 {
                let earned = u32::try_from(earned).unwrap_or(u32::MAX);
                self.tokens = self.tokens.saturating_add(earned).min(self.burst);
                self.last = Some(now);
            }
        } else {
            self.last = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// Answers built by the transmit half, waiting for the receive half (fixed slots, no
/// allocation after creation).
pub struct TooBigQueue {
    slots: Vec<([u8; MAX_ANSWER], usize)>,
    len: usize,
}

impl Default for TooBigQueue {
    fn default() -> Self {
        TooBigQueue {
            slots: vec![([0; MAX_ANSWER], 0); QUEUE_LEN],
            len: 0,
        }
    }
}

impl TooBigQueue {
    /// The next free slot to write an answer into, if any.
    pub fn free_slot(&mut self) -> Option<&mut ([u8; MAX_ANSWER], usize)> {
        self.slots.get_mut(self.len)
    }

    /// Marks the slot [`free_slot`](Self::free_slot) gave as filled.
    pub fn commit(&mut self) {
        self.len = (self.len + 1).min(self.slots.len());
    }

    /// Moves every queued answer to `out` (empties the queue).
    pub fn drain_into(&mut self, out: &mut TooBigQueue) {
        for i in 0..self.len {
            if let (Some(src), Some(dst)) = (self.slots.get(i), out.free_slot()) {
                *dst = *src;
                out.commit();
            }
        }
        self.len = 0;
    }

    /// The queued answers.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> {
        self.slots[..self.len]
            .iter()
            .map(|(b, n)| b.get(..*n).unwrap_or_default())
    }

    /// Empties the queue.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// How many answers are queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The queue between the halves, with a flag the receive half reads without locking.
#[derive(Default)]
pub(crate) struct TooBigShared {
    pub(crate) queue: std::sync::Mutex<TooBigQueue>,
    pub(crate) pending: std::sync::atomic::AtomicBool,
}

/// Where the L3 header starts after up to two VLAN tags (`prefix` holds the frame's start).
pub(crate) fn l3_offset(prefix: &[u8]) -> usize {
    let mut at = 12;
    for _ in 0..2 {
        match prefix.get(at..at + 2) {
            Some([0x81, 0x00] | [0x88, 0xa8]) => at += 4,
            _ => break,
        }
    }
    at + 2
}
