//! The directory's key schema. Under a prefix `P` (default `/weft/`), everything about one
//! VNI sits under `P vni/<vni>/`, so that one range read and one watch cover a VNI:
//!
//! - `P vni/<vni>/vtep/<host>`: the host's tunnel endpoint for the VNI ([`crate::VtepRecord`]);
//! - `P vni/<vni>/mac/<mac>/<host>`: the host's claim that the MAC lives behind it
//!   ([`crate::MacClaim`]). Each host writes only its own keys; who wins a MAC that several
//!   claim is decided by every reader the same way ([`crate::view`]).
//!
//! Keys are written by other hosts and by anyone with access to the store: a key that does
//! not parse is refused with a reason, never trusted in part.

use std::fmt;

use weft_packet::{MacAddr, Vni};

use crate::error::Refusal;

/// Longest host name (the characters `[A-Za-z0-9._-]`).
pub const MAX_HOST_LEN: usize = 64;

/// Longest key the directory reads; anything longer is refused before it is parsed.
pub const MAX_KEY_LEN: usize = 512;

/// A host's name in the directory: 1 to [`MAX_HOST_LEN`] of `[A-Za-z0-9._-]`, not `.` or
/// `..` (it is one path segment of a key).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(String);

impl HostId {
    /// Checks `name`.
    pub fn new(name: &str) -> Result<HostId, Refusal> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty()
            || name.len() > MAX_HOST_LEN
            || name == "."
            || name == ".."
            || !name.chars().all(ok_char)
        {
            return Err(Refusal::MalformedKey);
        }
        Ok(HostId(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a key names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// `vni/<vni>/vtep/<host>`.
    Vtep {
        /// The VNI.
        vni: Vni,
        /// The host whose endpoint it is.
        host: HostId,
    },
    /// `vni/<vni>/mac/<mac>/<host>`.
    Mac {
        /// The VNI.
        vni: Vni,
        /// The MAC claimed.
        mac: MacAddr,
        /// The host that claims it.
        host: HostId,
    },
}

impl Key {
    /// The key's VNI.
    pub fn vni(&self) -> Vni {
        match self {
            Key::Vtep { vni, .. } | Key::Mac { vni, .. } => *vni,
        }
    }

    /// The host that wrote it (each host writes only its own keys).
    pub fn host(&self) -> &HostId {
        match self {
            Key::Vtep { host, .. } | Key::Mac { host, .. } => host,
        }
    }

    /// The full key under `prefix`.
    pub fn render(&self, prefix: &str) -> String {
        match self {
            Key::Vtep { vni, host } => format!("{prefix}vni/{}/vtep/{host}", vni.get()),
            Key::Mac { vni, mac, host } => {
                format!("{prefix}vni/{}/mac/{}/{host}", vni.get(), mac_text(*mac))
            }
        }
    }

    /// Parses a full key read from the store; `prefix` must start it.
    pub fn parse(prefix: &str, raw: &[u8]) -> Result<Key, Refusal> {
        if raw.len() > MAX_KEY_LEN {
            return Err(Refusal::MalformedKey);
        }
        let text = std::str::from_utf8(raw).map_err(|_| Refusal::MalformedKey)?;
        let rest = text.strip_prefix(prefix).ok_or(Refusal::MalformedKey)?;
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            ["vni", vni, "vtep", host] => Ok(Key::Vtep {
                vni: parse_vni(vni)?,
                host: HostId::new(host)?,
            }),
            ["vni", vni, "mac", mac, host] => Ok(Key::Mac {
                vni: parse_vni(vni)?,
                mac: parse_mac(mac)?,
                host: HostId::new(host)?,
            }),
            _ => Err(Refusal::MalformedKey),
        }
    }
}

/// The prefix of everything about `vni`.
pub fn vni_prefix(prefix: &str, vni: Vni) -> String {
    format!("{prefix}vni/{}/", vni.get())
}

/// The prefix of every VNI.
pub fn all_vnis_prefix(prefix: &str) -> String {
    format!("{prefix}vni/")
}

/// A VNI in canonical decimal: no sign, no leading zero, below 2^24.
fn parse_vni(text: &str) -> Result<Vni, Refusal> {
    let canonical = !text.is_empty()
        && text.len() <= 8
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if !canonical {
        return Err(Refusal::MalformedKey);
    }
    let n: u32 = text.parse().map_err(|_| Refusal::MalformedKey)?;
    Vni::new(n).map_err(|_| Refusal::WrongVni)
}

/// A unicast MAC in lower-case `aa:bb:cc:dd:ee:ff` (the one spelling, so that one MAC
/// is one key).
fn parse_mac(text: &str) -> Result<MacAddr, Refusal> {
    let mac: MacAddr = text.parse().map_err(|_| Refusal::MalformedKey)?;
    if mac_text(mac) != text {
        return Err(Refusal::MalformedKey);
    }
    if !mac.is_unicast() || mac.to_u64() == 0 {
        return Err(Refusal::NotUnicast);
    }
    Ok(mac)
}

/// The key spelling of a MAC.
fn mac_text(mac: MacAddr) -> String {
    let o = mac.octets();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        o[0], o[1], o[2], o[3], o[4], o[5]
    )
}

/// Checks a configured key prefix: starts and ends with `/`, printable ASCII, no `//`.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    if !prefix.starts_with('/') || !prefix.ends_with('/') {
        return Err(format!("key prefix {prefix:?} must start and end with '/'"));
    }
    if prefix.contains("//") || prefix.len() > 128 {
        return Err(format!(
            "key prefix {prefix:?} must not contain '//' and be at most 128 characters"
        ));
    }
    if !prefix.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "key prefix {prefix:?} must be printable ASCII without spaces"
        ));
    }
    Ok(())
}
