//! `tap` ports: a TAP device weftd creates (in the port's network namespace when it names
//! one) or attaches to.
//!
//! A TAP weft creates is made persistent (`IFF_PERSIST`) and marked as weft's
//! ([`TapMarks`]): if weftd dies, the device stays with its addresses and routes, and the
//! weftd that starts next attaches to it again. It goes when its port is deleted or weftd
//! stops cleanly ([`TapKeep`]'s drop). A TAP someone else made persistent is never made
//! otherwise.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use weft_tap::tap::{device_info, set_persistent, DEFAULT_RX_FRAMES};
use weft_tap::{Offloads, Tap, TapOptions, TapQueue};

use super::carry::{Carried, CarryError, Keep};
use super::{OpenError, Opened};

/// What a `tap` port names.
pub(super) struct TapSettings<'a> {
    pub(super) ifname: Option<&'a str>,
    pub(super) netns: Option<&'a str>,
    pub(super) queues: u16,
    pub(super) mtu: u32,
    pub(super) offloads: bool,
}

/// Which TAP devices weft created, remembered across a crash: one empty file per device in
/// a directory only root reaches (`<runtime-dir>/taps`), named by the device's namespace
/// and name (hex, so no name can make a path of it).
#[derive(Debug, Clone)]
pub struct TapMarks {
    dir: Option<PathBuf>,
}

impl TapMarks {
    /// No marks: every TAP weft creates is its own until it stops (tests).
    pub const fn none() -> TapMarks {
        TapMarks { dir: None }
    }

    /// Marks kept in `dir` (which must exist, owner-only).
    pub fn in_dir(dir: PathBuf) -> TapMarks {
        TapMarks { dir: Some(dir) }
    }

    fn path(&self, netns: Option<&str>, ifname: &str) -> Option<PathBuf> {
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        self.dir
            .as_ref()
            .map(|d| d.join(format!("tap-{}-{}", hex(netns.unwrap_or("")), hex(ifname))))
    }

    fn is_marked(&self, netns: Option<&str>, ifname: &str) -> bool {
        self.path(netns, ifname).is_some_and(|p| p.exists())
    }

    /// Marks the device as weft's; the mark to remove when it is released.
    fn mark(&self, netns: Option<&str>, ifname: &str) -> Option<PathBuf> {
        let path = self.path(netns, ifname)?;
        match std::fs::write(&path, b"") {
            Ok(()) => Some(path),
            Err(e) => {
                tracing::warn!(ifname, error = %e, "cannot mark the TAP as weft's: after a crash it will be attached to but never removed");
                None
            }
        }
    }
}

/// A TAP port's device as the control plane keeps it: a duplicate of each of its queues (for
/// a takeover), what it was opened with, and whether weft owns it.
#[derive(Debug)]
pub struct TapKeep {
    /// At least one.
    queues: Vec<OwnedFd>,
    ifname: String,
    mtu: u32,
    offloads: Offloads,
    /// weft created it and made it persistent: released (no longer persistent, mark gone)
    /// when this is dropped.
    owned: bool,
    mark: Option<PathBuf>,
}

impl TapKeep {
    /// Duplicates of its queues, in order.
    pub(super) fn queue_fds(&self) -> std::io::Result<Vec<OwnedFd>> {
        self.queues.iter().map(OwnedFd::try_clone).collect()
    }

    pub(super) fn carried(&self) -> Carried {
        Carried::Tap {
            ifname: self.ifname.clone(),
            queues: u16::try_from(self.queues.len()).unwrap_or(u16::MAX),
            mtu: self.mtu,
            csum: self.offloads.csum,
            tso: self.offloads.tso,
            uso: self.offloads.uso,
            owned: self.owned,
        }
    }
}

impl Drop for TapKeep {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // The device goes once the last queue closes (the halves', then these).
        let Some(queue) = self.queues.first() else {
            return;
        };
        if let Err(e) = set_persistent(queue.as_fd(), false) {
            tracing::warn!(ifname = %self.ifname, error = %e, "cannot release the TAP: it stays");
        }
        if let Some(mark) = &self.mark {
            let _ = std::fs::remove_file(mark);
        }
    }
}

/// Opens the TAP of port `port` (whose name the device takes when it names none).
pub(super) fn open(port: &str, s: &TapSettings<'_>, marks: &TapMarks) -> Result<Opened, OpenError> {
    let mut options = TapOptions::new(s.ifname.unwrap_or(port))
        .queues(usize::from(s.queues))
        .mtu(s.mtu)
        .offloads(if s.offloads {
            Offloads::ALL
        } else {
            Offloads::NONE
        });
    if let Some(ns) = s.netns {
        options = options.netns(weft_tap::netns::named(ns));
    }
    let tap = Tap::open(&options)?;
    let mtu = u32::try_from(tap.mtu())
        .map_err(|_| OpenError::Settings("the TAP's MTU is out of range".into()))?;
    let offloads = tap.offloads();
    let queues = tap.into_queues();
    let first = queues
        .first()
        .ok_or_else(|| OpenError::Settings("the TAP opened without a queue".into()))?;
    let info = device_info(first.fd())?;
    let was_ours = marks.is_marked(s.netns, &info.name);
    let origin =
        was_ours.then(|| super::Origin::now("re-attached to the TAP a previous weftd left".into()));
    let (owned, mark) = if was_ours {
        tracing::info!(ifname = %info.name, "attached to the TAP a previous weftd left");
        (true, marks.path(s.netns, &info.name))
    } else if info.persistent {
        // Someone else's persistent device: used, never released.
        (false, None)
    } else {
        match set_persistent(first.fd(), true) {
            Ok(()) => (true, marks.mark(s.netns, &info.name)),
            Err(e) => {
                tracing::warn!(ifname = %info.name, error = %e, "cannot make the TAP persistent: it will not survive a crash of weftd");
                (false, None)
            }
        }
    };
    let keep = TapKeep {
        queues: queues
            .iter()
            .map(|q| q.fd().try_clone_to_owned())
            .collect::<Result<_, _>>()
            .map_err(CarryError::Dup)?,
        ifname: info.name,
        mtu,
        offloads,
        owned,
        mark,
    };
    Ok(Opened {
        keep: Keep::Tap(std::sync::Arc::new(keep)),
        origin,
        ..Opened::plain(weft_tap::tap_device(queues, mtu, offloads))
    })
}

/// Takes over the TAP queues another weftd passed: the same device, each queue checked to
/// be of the TAP the description names, as many as it says and the port asks for.
pub(super) fn adopt(
    s: &TapSettings<'_>,
    carried: &Carried,
    fds: Vec<OwnedFd>,
    marks: &TapMarks,
) -> Result<Opened, OpenError> {
    let Carried::Tap {
        ifname,
        queues,
        mtu,
        csum,
        tso,
        uso,
        owned,
    } = carried
    else {
        return Err(CarryError::Mismatch("not a TAP".into()).into());
    };
    if fds.is_empty() || fds.len() != usize::from(*queues) || *queues != s.queues {
        return Err(CarryError::Mismatch(format!(
            "{} descriptors for a TAP of {queues} queues, for a port of {} queues",
            fds.len(),
            s.queues
        ))
        .into());
    }
    if s.ifname.is_some_and(|n| n != ifname) {
        return Err(CarryError::Mismatch(format!("TAP {ifname:?} is not the port's")).into());
    }
    for fd in &fds {
        let info = device_info(fd.as_fd())?;
        if &info.name != ifname || !info.vnet_hdr {
            return Err(CarryError::Mismatch(format!(
                "a descriptor is TAP {:?} (virtio-net headers: {}), not {ifname:?}",
                info.name, info.vnet_hdr
            ))
            .into());
        }
    }
    let offloads = Offloads {
        csum: *csum,
        tso: *tso,
        uso: *uso,
    };
    let caps = offloads
        .caps(usize::try_from(*mtu).map_err(|_| CarryError::Mismatch("MTU out of range".into()))?);
    let keep = TapKeep {
        queues: fds
            .iter()
            .map(OwnedFd::try_clone)
            .collect::<Result<_, _>>()
            .map_err(CarryError::Dup)?,
        ifname: ifname.clone(),
        mtu: *mtu,
        offloads,
        owned: *owned,
        mark: if *owned {
            marks.path(s.netns, ifname)
        } else {
            None
        },
    };
    let queues = fds
        .into_iter()
        .map(|fd| TapQueue::from_fd(fd, caps, DEFAULT_RX_FRAMES))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Opened {
        keep: Keep::Tap(std::sync::Arc::new(keep)),
        ..Opened::plain(weft_tap::tap_device(queues, *mtu, offloads))
    })
}
