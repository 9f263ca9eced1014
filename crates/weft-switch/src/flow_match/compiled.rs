//! The scan-friendly form of keys and matches: a [`FlowKey`] packed into fixed 64-bit
//! words, and a [`FlowMatch`] compiled to a (mask, value) pair over those words, so that
//! matching a rule is seven AND/XOR/OR steps and one compare, without branches.

use core::net::IpAddr;

use super::{FlowMatch, IpPrefix, MacMatch};
use crate::flow_key::FlowKey;

const WORDS: usize = 7;

// Word 0: small fields side by side.
const IN_PORT_SHIFT: u32 = 0; // 16 bits
const VLAN_SHIFT: u32 = 16; // 16 bits
const ETHERTYPE_SHIFT: u32 = 32; // 16 bits
const IP_PROTO_SHIFT: u32 = 48; // 8 bits
const SRC_FAMILY_SHIFT: u32 = 56; // 2 bits
const DST_FAMILY_SHIFT: u32 = 58; // 2 bits
                                  // Words 1 and 2: a MAC in the low 48 bits, an L4 field in the high 16.
const DST_MAC_WORD: usize = 1;
const SRC_MAC_WORD: usize = 2;
const L4_SRC_WORD: usize = DST_MAC_WORD;
const L4_DST_WORD: usize = SRC_MAC_WORD;
const L4_SHIFT: u32 = 48;
// Words 3-4 and 5-6: the addresses, left-aligned in 128 bits (IPv4 in the top 32 bits)
// so that a prefix of either family is the top `len` bits.
const IP_SRC_WORD: usize = 3;
const IP_DST_WORD: usize = 5;

/// The address family tag, stored beside the address so that equal bits of different
/// families never compare equal.
const FAMILY_MASK: u64 = 0b11;
const FAMILY_V4: u64 = 1;
const FAMILY_V6: u64 = 2;

const MAC_MASK: u64 = (1 << 48) - 1;
const U16_MASK: u64 = 0xffff;

/// A [`FlowKey`] as fixed words, without loss: two keys are equal exactly when their packed
/// words are (what `FlowKey`'s `Eq` and `Hash` use).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedKey([u64; WORDS]);

/// Whether two arrays of words are equal, their XORs folded: `==` on arrays is a `memcmp`
/// call, which the per-packet comparisons cannot afford.
#[inline(always)]
fn words_equal<const N: usize>(a: &[u64; N], b: &[u64; N]) -> bool {
    a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A [`FlowMatch`] as a (mask, value) pair: a packed key `k` matches when
/// `k[i] & mask[i] == value[i]` for every word.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompiledMatch {
    mask: [u64; WORDS],
    value: [u64; WORDS],
}

/// Splits a u128 into its (high, low) 64-bit halves.
#[allow(clippy::cast_possible_truncation)] // each half is exactly 64 bits wide
const fn split_u128(x: u128) -> (u64, u64) {
    ((x >> 64) as u64, x as u64)
}

/// The address left-aligned in 128 bits, and its family tag.
fn left_aligned(addr: IpAddr) -> (u128, u64) {
    match addr {
        IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, FAMILY_V4),
        IpAddr::V6(a) => (u128::from(a), FAMILY_V6),
    }
}

impl PackedKey {
    pub(crate) fn new(key: &FlowKey) -> Self {
        let mut w = [0u64; WORDS];
        let (src, src_family) = key.ip_src.map_or((0, 0), left_aligned);
        let (dst, dst_family) = key.ip_dst.map_or((0, 0), left_aligned);
        w[0] = u64::from(key.in_port.0) << IN_PORT_SHIFT
            | u64::from(key.vlan) << VLAN_SHIFT
            | u64::from(key.ethertype) << ETHERTYPE_SHIFT
            | u64::from(key.ip_proto) << IP_PROTO_SHIFT
            | src_family << SRC_FAMILY_SHIFT
            | dst_family << DST_FAMILY_SHIFT;
        w[DST_MAC_WORD] = key.dst_mac.to_u64();
        w[SRC_MAC_WORD] = key.src_mac.to_u64();
        w[L4_SRC_WORD] |= u64::from(key.l4_src) << L4_SHIFT;
        w[L4_DST_WORD] |= u64::from(key.l4_dst) << L4_SHIFT;
        (w[IP_SRC_WORD], w[IP_SRC_WORD + 1]) = split_u128(src);
        (w[IP_DST_WORD], w[IP_DST_WORD + 1]) = split_u128(dst);
        PackedKey(w)
    }

    /// The words.
    #[inline(always)]
    pub(crate) fn words(&self) -> [u64; WORDS] {
        self.0
    }

    /// Whether `other` packs the same key.
    #[inline(always)]
    pub(crate) fn same_as(&self, other: &PackedKey) -> bool {
        words_equal(&self.0, &other.0)
    }
}

impl CompiledMatch {
    /// Compiles a match. Values are masked here, so even an unvalidated match compiles to
    /// something consistent; the table only compiles validated ones.
    pub(crate) fn new(m: &FlowMatch) -> Self {
        let mut c = CompiledMatch {
            mask: [0; WORDS],
            value: [0; WORDS],
        };
        if let Some(port) = m.in_port {
            c.set(
                0,
                U16_MASK << IN_PORT_SHIFT,
                u64::from(port.0) << IN_PORT_SHIFT,
            );
        }
        if let Some(vlan) = m.vlan {
            c.set(0, U16_MASK << VLAN_SHIFT, u64::from(vlan) << VLAN_SHIFT);
        }
        if let Some(et) = m.ethertype {
            let shifted = u64::from(et) << ETHERTYPE_SHIFT;
            c.set(0, U16_MASK << ETHERTYPE_SHIFT, shifted);
        }
        if let Some(proto) = m.ip_proto {
            let shifted = u64::from(proto) << IP_PROTO_SHIFT;
            c.set(0, 0xff << IP_PROTO_SHIFT, shifted);
        }
        if let Some(mac) = &m.dst_mac {
            c.set_mac(DST_MAC_WORD, mac);
        }
        if let Some(mac) = &m.src_mac {
            c.set_mac(SRC_MAC_WORD, mac);
        }
        if let Some(port) = m.l4_src {
            c.set(
                L4_SRC_WORD,
                U16_MASK << L4_SHIFT,
                u64::from(port) << L4_SHIFT,
            );
        }
        if let Some(port) = m.l4_dst {
            c.set(
                L4_DST_WORD,
                U16_MASK << L4_SHIFT,
                u64::from(port) << L4_SHIFT,
            );
        }
        if let Some(prefix) = &m.ip_src {
            c.set_prefix(IP_SRC_WORD, SRC_FAMILY_SHIFT, prefix);
        }
        if let Some(prefix) = &m.ip_dst {
            c.set_prefix(IP_DST_WORD, DST_FAMILY_SHIFT, prefix);
        }
        c
    }

    fn set(&mut self, word: usize, mask: u64, value: u64) {
        self.mask[word] |= mask;
        self.value[word] |= value & mask;
    }

    fn set_mac(&mut self, word: usize, mac: &MacMatch) {
        let mask = mac.mask.to_u64() & MAC_MASK;
        self.set(word, mask, mac.addr.to_u64());
    }

    fn set_prefix(&mut self, word: usize, family_shift: u32, prefix: &IpPrefix) {
        let (addr, family) = left_aligned(prefix.addr);
        let len = u32::from(prefix.len.min(prefix.max_len()));
        // A /0 has an empty address mask but still pins the family.
        let mask = (!0u128).checked_shl(128 - len).unwrap_or(0);
        let (mask_hi, mask_lo) = split_u128(mask);
        let (addr_hi, addr_lo) = split_u128(addr);
        self.set(0, FAMILY_MASK << family_shift, family << family_shift);
        self.set(word, mask_hi, addr_hi);
        self.set(word + 1, mask_lo, addr_lo);
    }

    /// Whether the packed key matches.
    #[inline]
    pub(crate) fn matches(&self, key: &PackedKey) -> bool {
        let mut diff = 0;
        for ((k, m), v) in key.0.iter().zip(&self.mask).zip(&self.value) {
            diff |= (k & m) ^ v;
        }
        diff == 0
    }
}
