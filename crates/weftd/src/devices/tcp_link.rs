//! `tcp_link` ports: frames in a TCP connection to another weftd, optionally authenticated
//! with a pre-shared key (weft-overlay).

use std::os::fd::OwnedFd;
use weft_control::state::PortKind;

use weft_overlay::tcp_link::{LinkKey, TcpLinkConfig, TcpLinkHandover, TcpLinkMode, TcpLinkPort};

use super::{Keep, OpenError, Opened};
use crate::control::client_files::ClientFiles;

/// Opens the TCP link `kind` describes (listening, or connecting in the background).
pub(super) fn open(port: &str, kind: &PortKind, files: &ClientFiles) -> Result<Opened, OpenError> {
    let config = tcp_link_config(kind, files)?;
    if config.key.is_none() {
        tracing::warn!(
            port,
            "tcp link {port} is unauthenticated: anyone who reaches it can send frames into \
             the switch; give both ends the same --key-file"
        );
    }
    let link = TcpLinkPort::open(&config)?;
    opened(&config, link)
}

/// Takes over the TCP link another weftd handed over.
pub(super) fn adopt(
    kind: &PortKind,
    files: &ClientFiles,
    handover: TcpLinkHandover,
    fds: Vec<OwnedFd>,
) -> Result<Opened, OpenError> {
    let config = tcp_link_config(kind, files)?;
    let link = TcpLinkPort::adopt(&config, handover, fds)?;
    opened(&config, link)
}

fn opened(config: &TcpLinkConfig, link: TcpLinkPort) -> Result<Opened, OpenError> {
    let mtu = u32::try_from(config.mtu)
        .map_err(|_| OpenError::Settings("the MTU is out of range".into()))?;
    let keep = Keep::TcpLink(link.handover_source());
    Ok(Opened {
        keep,
        ..Opened::plain(weft_overlay::tcp_link_device(link, mtu, config.offloads))
    })
}

/// The TCP link configuration a `tcp_link` port kind describes.
fn tcp_link_config(kind: &PortKind, files: &ClientFiles) -> Result<TcpLinkConfig, OpenError> {
    let PortKind::TcpLink {
        listen,
        connect,
        netns,
        link_id,
        mtu,
        offloads,
        key_file,
    } = kind
    else {
        return Err(OpenError::Settings("not a TCP link".into()));
    };
    let mode = match (listen, connect) {
        (Some(a), None) => TcpLinkMode::Listen(*a),
        (None, Some(a)) => TcpLinkMode::Connect(*a),
        _ => {
            return Err(OpenError::Settings(
                "give exactly one of listen and connect".into(),
            ))
        }
    };
    let mut config = TcpLinkConfig::new(mode);
    config.link_id = *link_id;
    config.mtu =
        usize::try_from(*mtu).map_err(|_| OpenError::Settings("the MTU is out of range".into()))?;
    config.offloads = *offloads;
    if let Some(ns) = netns {
        config = config.netns(weft_tap::netns::named(ns));
    }
    if let Some(path) = key_file {
        let file = files.key(path)?;
        let key =
            LinkKey::new(file.bytes).map_err(|problem| weft_overlay::tcp_link::KeyFileError {
                path: path.into(),
                problem,
            })?;
        config.key = Some(key);
        if file.others_can_read {
            // A key file others can read is a key others may know: say so (the link still
            // opens).
            tracing::warn!(
                "key file {path} can be read by users other than its owner: chmod 600 {path}"
            );
        }
    }
    Ok(config)
}
