//! The directory's values: small JSON objects, so that an operator can read them with
//! `etcdctl get`. Unknown fields are refused (a value is either exactly understood or
//! ignored), and so is anything larger than [`MAX_VALUE_LEN`].

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::Refusal;

/// Largest value the directory reads.
pub const MAX_VALUE_LEN: usize = 256;

/// A host's tunnel endpoint for one VNI: where to send the VNI's frames for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VtepRecord {
    /// The underlay address.
    pub addr: IpAddr,
    /// The UDP port it receives VXLAN on.
    pub port: u16,
}

/// A host's claim that a MAC lives behind one of its tunnel endpoints, with the sequence
/// number of the MAC's moves (EVPN's MAC mobility, RFC 7432 §15): the highest wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacClaim {
    /// The tunnel endpoint the MAC is behind.
    pub vtep: IpAddr,
    /// How many times the MAC has moved, as far as the claiming host knows.
    pub seq: u32,
}

/// Parses a value of type `T`.
fn parse<'a, T: Deserialize<'a>>(raw: &'a [u8]) -> Result<T, Refusal> {
    if raw.len() > MAX_VALUE_LEN {
        return Err(Refusal::ValueTooLarge);
    }
    serde_json::from_slice(raw).map_err(|_| Refusal::MalformedValue)
}

impl VtepRecord {
    /// Parses a value read from the store; the address must be one a tunnel can reach.
    pub fn parse(raw: &[u8]) -> Result<VtepRecord, Refusal> {
        let r: VtepRecord = parse(raw)?;
        if !usable(r.addr) || r.port == 0 {
            return Err(Refusal::MalformedValue);
        }
        Ok(r)
    }

    /// The value to write.
    pub fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl MacClaim {
    /// Parses a value read from the store.
    pub fn parse(raw: &[u8]) -> Result<MacClaim, Refusal> {
        let c: MacClaim = parse(raw)?;
        if !usable(c.vtep) {
            return Err(Refusal::MalformedValue);
        }
        Ok(c)
    }

    /// The value to write.
    pub fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An address a VXLAN datagram may be sent to: unicast, not unspecified.
fn usable(ip: IpAddr) -> bool {
    !ip.is_unspecified() && !ip.is_multicast() && ip != IpAddr::from([255, 255, 255, 255])
}
