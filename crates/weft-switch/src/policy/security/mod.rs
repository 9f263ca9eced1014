//! Port security (anti-spoofing): the source MACs and IP addresses a port may send from,
//! and whether it may act as a DHCP server or an IPv6 router. See `check.rs` for what each
//! frame is checked against.

use weft_packet::MacAddr;

use crate::flow_match::IpPrefix;

mod check;
#[cfg(test)]
mod tests;

/// Most allowed source MACs per port.
pub const MAX_ALLOWED_MACS: usize = 64;
/// Most allowed IP prefixes per port.
pub const MAX_ALLOWED_IPS: usize = 256;

/// What a port may send. Off (everything passes, as on a plain port) while both lists are
/// empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortSecurity {
    /// Source MACs the port may use; empty: any.
    pub allowed_macs: Vec<MacAddr>,
    /// IPv4 and IPv6 source addresses (as prefixes) the port may use; empty: any. When set,
    /// it covers both families: a port given only IPv4 prefixes sends IPv6 only from its
    /// link-local address.
    pub allowed_ips: Vec<IpPrefix>,
    /// The port may send DHCP and DHCPv6 server messages.
    pub allow_dhcp_server: bool,
    /// The port may send IPv6 router advertisements.
    pub allow_router_advertisements: bool,
}

/// A port security setting the switch cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityConfigError {
    /// Too many MACs.
    #[error("{0} allowed MACs are too many: at most {MAX_ALLOWED_MACS}")]
    TooManyMacs(usize),
    /// Too many prefixes.
    #[error("{0} allowed IP prefixes are too many: at most {MAX_ALLOWED_IPS}")]
    TooManyIps(usize),
    /// A multicast, broadcast or zero MAC.
    #[error("allowed MAC {0} is not a station address (multicast, broadcast or zero)")]
    NotUnicast(MacAddr),
    /// A prefix longer than its family allows, or with host bits set.
    #[error("allowed IP {addr}/{len} is not a prefix: use an address with a length of at most 32 (IPv4) or 128 (IPv6) and no bits set after it")]
    BadPrefix {
        /// The address given.
        addr: core::net::IpAddr,
        /// The length given.
        len: u8,
    },
}

impl PortSecurity {
    /// Whether any frame is checked at all.
    pub fn is_enabled(&self) -> bool {
        !self.allowed_macs.is_empty() || !self.allowed_ips.is_empty()
    }

    /// Checks the bounds and that every entry is usable.
    pub fn validate(&self) -> Result<(), SecurityConfigError> {
        if self.allowed_macs.len() > MAX_ALLOWED_MACS {
            return Err(SecurityConfigError::TooManyMacs(self.allowed_macs.len()));
        }
        if self.allowed_ips.len() > MAX_ALLOWED_IPS {
            return Err(SecurityConfigError::TooManyIps(self.allowed_ips.len()));
        }
        if let Some(mac) = self.allowed_macs.iter().find(|m| !m.is_unicast()) {
            return Err(SecurityConfigError::NotUnicast(*mac));
        }
        if let Some(p) = self.allowed_ips.iter().find(|p| !p.is_canonical()) {
            return Err(SecurityConfigError::BadPrefix {
                addr: p.addr,
                len: p.len,
            });
        }
        Ok(())
    }
}
