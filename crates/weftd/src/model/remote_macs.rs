//! Checks of a VXLAN port's static remote FDB entries (`remote_macs`): each a unicast MAC,
//! once, behind an endpoint the port sends to.

use std::collections::BTreeSet;
use std::net::IpAddr;

use weft_control::state::RemoteMac;
use weft_control::ControlError;

use super::translate;

/// Most static remote entries per VXLAN port (the port's static bound).
pub const MAX_REMOTE_MACS: usize = 4096;

/// Checks `entries` of a port on `local` with `remotes` (already checked) and `learning`.
pub fn check(
    entries: &[RemoteMac],
    local: IpAddr,
    remotes: &[IpAddr],
    learning: bool,
) -> Result<(), ControlError> {
    if entries.len() > MAX_REMOTE_MACS {
        return Err(ControlError::invalid(format!(
            "{} remote MACs: a VXLAN port has at most {MAX_REMOTE_MACS}",
            entries.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for entry in entries {
        let mac = translate::unicast_mac(entry.mac)?;
        if !seen.insert(mac) {
            return Err(ControlError::invalid(format!(
                "remote MAC {mac} is given twice: give each MAC one endpoint"
            )));
        }
        endpoint(entry.remote, local, remotes, learning)?;
    }
    Ok(())
}

/// The endpoint of a remote MAC: an address of the underlay's family, one of the port's
/// remotes unless the port learns (then it accepts any endpoint).
pub fn endpoint(
    ip: IpAddr,
    local: IpAddr,
    remotes: &[IpAddr],
    learning: bool,
) -> Result<IpAddr, ControlError> {
    if ip.is_ipv4() != local.is_ipv4() {
        return Err(ControlError::invalid(format!(
            "remote {ip} is not in the address family of local {local}"
        )));
    }
    if !learning && !remotes.contains(&ip) {
        return Err(ControlError::invalid(format!(
            "remote {ip} is not one of the port's remotes, and the port does not learn: \
             frames sent there would be answered from an endpoint the port drops"
        ))
        .with_hint("add it as a --remote of the port, or give the port --remote-learning"));
    }
    Ok(ip)
}
