//! What the port needs to know of the interface before it attaches anything.

use std::os::unix::fs::MetadataExt;

use weft_sys::ifreq::{ioctl_ifreq, is_valid_ifname, IfReq, IfReqRequest, MAX_IFNAME};

use crate::error::XdpError;

/// An interface of the current network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interface {
    pub(crate) ifindex: u32,
    pub(crate) mtu: u32,
    /// Its receive queues, when sysfs shows this namespace's interfaces.
    pub(crate) rx_queues: Option<u32>,
    /// The current network namespace's identity (its inode).
    pub(crate) netns: u64,
}

pub(crate) fn check_name(name: &str) -> Result<(), XdpError> {
    if is_valid_ifname(name) {
        Ok(())
    } else {
        Err(XdpError::BadOption(format!(
            "interface name {name:?}: use 1 to {MAX_IFNAME} bytes without '/', ':' or spaces"
        )))
    }
}

/// Looks `name` up in the current network namespace.
pub(crate) fn lookup(name: &str) -> Result<Interface, XdpError> {
    check_name(name)?;
    let fd = weft_sys::socket::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
        .map_err(|e| XdpError::socket("socket(AF_INET)", name, e))?;
    let missing = || XdpError::NoInterface {
        ifname: name.to_string(),
    };
    let mut req = IfReq::new(name);
    ioctl_ifreq(&fd, IfReqRequest::GetIndex, &mut req).map_err(|_| missing())?;
    let ifindex = u32::try_from(req.ifindex()).map_err(|_| missing())?;
    let mut req = IfReq::new(name);
    ioctl_ifreq(&fd, IfReqRequest::GetMtu, &mut req).map_err(|_| missing())?;
    let mtu = u32::try_from(req.mtu()).map_err(|_| missing())?;
    let netns = std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0);
    Ok(Interface {
        ifindex,
        mtu,
        rx_queues: rx_queues(name, ifindex),
        netns,
    })
}

/// Counts `rx-N` under `/sys/class/net/<name>/queues`, if sysfs shows this very interface
/// (a sysfs mounted for another namespace may show another interface of that name).
fn rx_queues(name: &str, ifindex: u32) -> Option<u32> {
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let shown: u32 = std::fs::read_to_string(dir.join("ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if shown != ifindex {
        return None;
    }
    let count = std::fs::read_dir(dir.join("queues"))
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    u32::try_from(count).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_a_missing_interface_is_named_in_the_error() {
        let lo = lookup("lo").unwrap();
        assert!(lo.ifindex > 0 && lo.mtu > 0);
        let e = lookup("weftnosuch0").unwrap_err();
        assert!(e.to_string().contains("no interface weftnosuch0"), "{e}");
        assert!(lookup("bad/name").is_err());
        assert!(lookup("").is_err());
        assert!(lookup("sixteen-bytes-xx").is_err());
    }
}
