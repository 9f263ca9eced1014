//! `vxlan` ports: a tunnel endpoint joining the switch to remote VTEPs (weft-overlay).

use std::net::SocketAddr;

use std::os::fd::OwnedFd;
use weft_control::state::PortKind;

use weft_overlay::{VxlanConfig, VxlanHandover, VxlanPort};

use super::{Keep, OpenError, Opened};

/// Opens the VXLAN port `kind` describes.
pub(super) fn open(kind: &PortKind) -> Result<Opened, OpenError> {
    let config = vxlan_config(kind)?;
    Ok(opened(VxlanPort::open(&config)?))
}

/// Takes over the VXLAN port another weftd handed over.
pub(super) fn adopt(
    kind: &PortKind,
    handover: VxlanHandover,
    fds: Vec<OwnedFd>,
) -> Result<Opened, OpenError> {
    let config = vxlan_config(kind)?;
    Ok(opened(VxlanPort::adopt(&config, handover, fds)?))
}

fn opened(port: VxlanPort) -> Opened {
    let remote_fdb = port.remote_fdb();
    let keep = Keep::Vxlan(port.handover_source());
    Opened {
        remote_fdb: Some(remote_fdb),
        keep,
        ..Opened::plain(weft_overlay::vxlan_device(port))
    }
}

/// The VXLAN configuration a `vxlan` port kind describes.
fn vxlan_config(kind: &PortKind) -> Result<VxlanConfig, OpenError> {
    let PortKind::Vxlan {
        local,
        vni,
        remotes,
        netns,
        learning,
        port,
        remote_macs,
        remote_ageing,
        directory: _,
    } = kind
    else {
        return Err(OpenError::Settings("not a VXLAN port".into()));
    };
    let mut config = VxlanConfig::new(SocketAddr::new(*local, port.unwrap_or(0)), *vni);
    if let Some(p) = port {
        config.remote_port = *p;
    }
    for r in remotes {
        config = config.remote(*r);
    }
    config.learning = *learning;
    config.remote_ageing = std::time::Duration::from_secs(u64::from(*remote_ageing));
    for entry in remote_macs {
        config = config.static_mac(entry.mac, entry.remote);
    }
    if let Some(ns) = netns {
        config = config.netns(weft_tap::netns::named(ns));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::IpAddr;
    use std::path::PathBuf;

    #[test]
    fn vxlan_settings_become_its_configuration() {
        let kind = PortKind::Vxlan {
            local: "192.0.2.1".parse().unwrap(),
            vni: weft_control::Vni::new(9).unwrap(),
            remotes: vec!["192.0.2.2".parse().unwrap()],
            netns: Some("under".into()),
            learning: true,
            port: Some(4790),
            remote_macs: vec![weft_control::state::RemoteMac {
                mac: "02:00:00:00:00:07".parse().unwrap(),
                remote: "192.0.2.2".parse().unwrap(),
            }],
            remote_ageing: 45,
            directory: false,
        };
        let c = vxlan_config(&kind).unwrap();
        assert_eq!(c.remote_ageing, std::time::Duration::from_secs(45));
        assert_eq!(c.local, "192.0.2.1:4790".parse().unwrap());
        assert_eq!(c.remote_port, 4790);
        assert_eq!(c.vni.get(), 9);
        assert_eq!(c.remotes, ["192.0.2.2".parse::<IpAddr>().unwrap()]);
        assert!(c.learning);
        assert_eq!(
            c.static_fdb,
            [(
                "02:00:00:00:00:07".parse().unwrap(),
                "192.0.2.2".parse::<IpAddr>().unwrap()
            )]
        );
        assert_eq!(c.netns, Some(PathBuf::from("/run/netns/under")));
    }
}
