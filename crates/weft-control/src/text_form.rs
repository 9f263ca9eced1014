//! The text forms of the typed fields: how a MAC, an IP address, an `IP:PORT` and a VNI are
//! written in requests and the state file. Serializing gives exactly what the protocol has
//! always carried (`52:54:00:12:34:56`, `192.0.2.1`, `[2001:db8::1]:7000`, a VNI as a
//! number); deserializing checks the value once, at the edge, and names the field in its
//! error, since serde's own messages ("invalid IP address syntax") do not say which.

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Deserializer, Serializer};
use weft_packet::{MacAddr, Vni};

mod refusal;
pub(crate) use refusal::decode_shape_first;
use refusal::parse_field;

fn not_ip(field: &str, text: &str) -> String {
    format!(
        "{field} {text:?} is not an IP address: give an IPv4 or IPv6 address such as \
         192.0.2.1 or 2001:db8::1"
    )
}

fn not_socket(field: &str, text: &str) -> String {
    format!(
        "{field} {text:?} is not an IP:PORT address: give one such as 192.0.2.1:7000 or \
         [fd00::1]:7000"
    )
}

const ANY_IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// A MAC address, `xx:xx:xx:xx:xx:xx` (read also with `-` and in upper case).
pub mod mac {
    use super::*;

    /// Writes `xx:xx:xx:xx:xx:xx`.
    pub fn serialize<S: Serializer>(mac: &MacAddr, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(mac)
    }

    /// Reads a MAC address.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<MacAddr, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_field(text.parse(), MacAddr::ZERO, |e| e.to_string())
    }
}

/// An optional MAC address, as [`mac`].
pub mod opt_mac {
    use super::*;

    /// Writes `xx:xx:xx:xx:xx:xx` (only called for `Some`: the field is skipped when `None`).
    pub fn serialize<S: Serializer>(
        mac: &Option<MacAddr>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match mac {
            Some(m) => serializer.collect_str(m),
            None => serializer.serialize_none(),
        }
    }

    /// Reads a MAC address.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<MacAddr>, D::Error> {
        super::mac::deserialize(deserializer).map(Some)
    }
}

/// A list of MAC addresses, each as [`mac`]; a refusal names `field` and the value.
pub mod mac_list {
    use super::*;

    /// Writes each as `xx:xx:xx:xx:xx:xx`.
    pub fn serialize<S: Serializer>(macs: &[MacAddr], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(macs.iter().map(ToString::to_string))
    }

    /// Reads MAC addresses.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<MacAddr>, D::Error> {
        Vec::<String>::deserialize(deserializer)?
            .iter()
            .map(|text| {
                parse_field(text.parse(), MacAddr::ZERO, |e| {
                    format!("allowed_macs: {e}")
                })
            })
            .collect()
    }
}

/// A VNI, written as a number (0 to 2^24 - 1).
pub mod vni {
    use super::*;

    /// Writes the number.
    pub fn serialize<S: Serializer>(vni: &Vni, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(vni.get())
    }

    /// Reads a number in range.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vni, D::Error> {
        let value = u32::deserialize(deserializer)?;
        parse_field(Vni::new(value), Vni::default(), |_| {
            format!(
                "vni {value} is out of range: use 0 to {} (24 bits)",
                Vni::MAX.get()
            )
        })
    }
}

fn ip<E: serde::de::Error>(field: &str, text: &str) -> Result<IpAddr, E> {
    parse_field(text.parse(), ANY_IP, |_| not_ip(field, text))
}

fn socket<E: serde::de::Error>(field: &str, text: &str) -> Result<SocketAddr, E> {
    parse_field(text.parse(), SocketAddr::new(ANY_IP, 0), |_| {
        not_socket(field, text)
    })
}

/// The local endpoint of a VXLAN port.
pub(crate) fn local_ip<'de, D: Deserializer<'de>>(deserializer: D) -> Result<IpAddr, D::Error> {
    ip("local", &String::deserialize(deserializer)?)
}

/// A remote endpoint.
pub(crate) fn remote_ip<'de, D: Deserializer<'de>>(deserializer: D) -> Result<IpAddr, D::Error> {
    ip("remote", &String::deserialize(deserializer)?)
}

/// A remote endpoint, when given.
pub(crate) fn remote_ip_opt<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<IpAddr>, D::Error> {
    Option::<String>::deserialize(deserializer)?
        .map(|text| ip("remote", &text))
        .transpose()
}

/// A VXLAN port's remote endpoints.
pub(crate) fn remote_ips<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<IpAddr>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .map(|text| ip("remote", text))
        .collect()
}

/// Where a TCP link listens.
pub(crate) fn listen_addr<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SocketAddr>, D::Error> {
    Option::<String>::deserialize(deserializer)?
        .map(|text| socket("listen", &text))
        .transpose()
}

/// Where a TCP link connects.
pub(crate) fn connect_addr<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SocketAddr>, D::Error> {
    Option::<String>::deserialize(deserializer)?
        .map(|text| socket("connect", &text))
        .transpose()
}

/// A rule's address match, when given; refusals name the field (`match.FIELD`).
fn pattern_opt<'de, D, T>(
    deserializer: D,
    field: &str,
    placeholder: T,
) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = crate::rule::PatternError>,
{
    Option::<String>::deserialize(deserializer)?
        .map(|text| parse_field(text.parse(), placeholder, |e| format!("match.{field}: {e}")))
        .transpose()
}

fn any_mac() -> crate::rule::MacPattern {
    crate::rule::MacPattern {
        addr: MacAddr::ZERO,
        mask: None,
    }
}

fn any_ip() -> crate::rule::IpPattern {
    crate::rule::IpPattern {
        addr: ANY_IP,
        len: None,
    }
}

/// A port's allowed source prefixes (port security).
pub(crate) fn allowed_ips<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<crate::rule::IpPattern>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .map(|text| parse_field(text.parse(), any_ip(), |e| format!("allowed_ips: {e}")))
        .collect()
}

/// A rule's source MAC match.
pub(crate) fn src_mac_pattern<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<crate::rule::MacPattern>, D::Error> {
    pattern_opt(deserializer, "src_mac", any_mac())
}

/// A rule's destination MAC match.
pub(crate) fn dst_mac_pattern<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<crate::rule::MacPattern>, D::Error> {
    pattern_opt(deserializer, "dst_mac", any_mac())
}

/// A rule's source IP match.
pub(crate) fn ip_src_pattern<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<crate::rule::IpPattern>, D::Error> {
    pattern_opt(deserializer, "ip_src", any_ip())
}

/// A rule's destination IP match.
pub(crate) fn ip_dst_pattern<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<crate::rule::IpPattern>, D::Error> {
    pattern_opt(deserializer, "ip_dst", any_ip())
}

#[cfg(test)]
mod tests;
