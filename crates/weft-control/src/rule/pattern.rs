//! The address matches of a rule, typed: a MAC or `MAC/MASK`, an IP address or
//! `ADDR/LEN`. Each is written back as it was given (a plain address stays plain), in the
//! canonical spelling of its parts.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Serialize, Serializer};
use weft_packet::MacAddr;

/// A MAC match: one address, or an address and a mask (bits set in the mask must equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacPattern {
    /// The address.
    pub addr: MacAddr,
    /// The mask; none: all 48 bits.
    pub mask: Option<MacAddr>,
}

/// An IP match: one address, or a prefix of `len` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPattern {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length (at most 32 or 128); none: a plain address (a host).
    pub len: Option<u8>,
}

/// A rule's address match that does not parse; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(String);

impl FromStr for MacPattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mac = |t: &str| {
            t.parse::<MacAddr>()
                .map_err(|e| PatternError(e.to_string()))
        };
        Ok(match s.split_once('/') {
            None => MacPattern {
                addr: mac(s)?,
                mask: None,
            },
            Some((addr, mask)) => MacPattern {
                addr: mac(addr)?,
                mask: Some(mac(mask)?),
            },
        })
    }
}

impl FromStr for IpPattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            PatternError(format!(
                "invalid IP prefix {s:?}: {why}; expected e.g. 10.0.0.0/8, 2001:db8::/32 or \
                 192.0.2.1"
            ))
        };
        let (addr, len) = match s.split_once('/') {
            None => (s, None),
            Some((a, l)) => (a, Some(l)),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad("not an address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => None,
            Some(l) => Some(
                l.parse::<u8>()
                    .map_err(|_| bad("the length is not a number"))?,
            ),
        };
        if len.is_some_and(|l| l > max) {
            return Err(bad(&format!("the length is above {max}")));
        }
        Ok(IpPattern { addr, len })
    }
}

impl fmt::Display for MacPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mask {
            None => write!(f, "{}", self.addr),
            Some(mask) => write!(f, "{}/{mask}", self.addr),
        }
    }
}

impl fmt::Display for IpPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.len {
            None => write!(f, "{}", self.addr),
            Some(len) => write!(f, "{}/{len}", self.addr),
        }
    }
}

impl Serialize for MacPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl Serialize for IpPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
