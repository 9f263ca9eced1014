//! systemd's file descriptor store (`FDSTORE=1`): what of each port outlives a crash of
//! weftd, so that the weftd systemd restarts carries on with the same devices.
//!
//! One record per port: a sealed memfd named `weft-<hex switch>-<hex port>` holding
//! [`Record`] as JSON — the port, its [`Carried`] description and how many descriptors it
//! names — and the device's own descriptors (`Keep::record`: a TAP queue, a vhost-user
//! or memif listener, VXLAN sockets, a TCP link's listener), descriptor `i` named `<record>.<i>`.
//! (FDNAME: printable, no ':', ≤ 255 bytes; hex keeps every name valid and one-to-one.
//! One name per descriptor, because systemd does not promise the order of descriptors
//! that share a name.) A record is replaced (`FDSTOREREMOVE`, then `FDSTORE`) whenever
//! the port's device is, and removed with the port. `FDPOLL=0`: systemd must not drop one
//! descriptor of a record on its own.
//!
//! The store is used when systemd says it has one: `$NOTIFY_SOCKET` set and `$FDSTORE`
//! (its size, set by systemd ≥ 254 from `FileDescriptorStoreMax=`, or by the unit's
//! `Environment=` on older ones) above zero. A restarted weftd receives the records as
//! `$LISTEN_FDS` ([`super::listen_fds`]) and decodes them with [`decode`]: each is
//! checked as untrusted, like a takeover's offer.

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use serde::{Deserialize, Serialize};

use super::notify::{NotifyError, NotifySocket};
use crate::devices::Carried;

/// The version of [`Record`] this binary writes and reads.
pub const RECORD_VERSION: u32 = 1;

/// The longest record description read back.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// What the memfd of a record says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// The port's switch.
    pub switch: String,
    /// The port.
    pub port: String,
    /// Its device, descriptors named by index among those after the memfd.
    pub carried: Carried,
    /// How many descriptors follow the memfd.
    pub fds: usize,
}

/// Why a record cannot be stored or read back.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The notification failed.
    #[error(transparent)]
    Notify(#[from] NotifyError),
    /// Writing or reading the record's memfd failed.
    #[error("the record's memory file: {0}")]
    Memfd(String),
    /// The store would hold more descriptors than systemd allows.
    #[error("{wanted} descriptors would exceed the store's {capacity} (FileDescriptorStoreMax=)")]
    Full {
        /// Descriptors the store would hold.
        wanted: usize,
        /// `$FDSTORE`.
        capacity: usize,
    },
    /// A record read back is not one this binary wrote.
    #[error("record {name:?}: {why}")]
    Bad {
        /// Its FDNAME.
        name: String,
        /// What is wrong.
        why: String,
    },
}

/// A port: its switch and its name.
pub type PortKey = (String, String);

/// A device's description and its descriptors.
pub type Kept = (Carried, Vec<OwnedFd>);

/// A port as it is now, for [`FdStore::sync`].
pub struct PortNow {
    /// The port.
    pub key: PortKey,
    /// Its device's identity (what changes when the device is replaced).
    pub device: usize,
    /// What of its device to keep, when it is a device the store has no record of
    /// (built only then), and anything is worth keeping.
    pub record: Option<Kept>,
}

/// The FDNAME of a port's record.
pub fn record_name(switch: &str, port: &str) -> String {
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    format!("weft-{}-{}", hex(switch), hex(port))
}

/// The records weftd keeps in systemd's store, by port.
#[derive(Debug)]
pub struct FdStore {
    notify: NotifySocket,
    capacity: usize,
    /// Per port: the identity of the device its record is of (0: a record from before
    /// this process), and the names its descriptors are stored under.
    stored: BTreeMap<PortKey, (usize, Vec<String>)>,
    /// Names held from before that belong to no usable record: removed at the next sync.
    orphans: Vec<String>,
}

impl FdStore {
    /// The store, when systemd gave this service one (see the module docs).
    pub fn from_env() -> Option<FdStore> {
        let capacity = std::env::var("FDSTORE")
            .ok()?
            .trim()
            .parse::<usize>()
            .ok()?;
        if capacity == 0 {
            return None;
        }
        match NotifySocket::from_env()? {
            Ok(notify) => Some(FdStore::new(notify, capacity)),
            Err(e) => {
                tracing::warn!(error = %e, "no file descriptor store");
                None
            }
        }
    }

    /// A store reached through `notify`, holding at most `capacity` descriptors.
    pub fn new(notify: NotifySocket, capacity: usize) -> FdStore {
        FdStore {
            notify,
            capacity,
            stored: BTreeMap::new(),
            orphans: Vec::new(),
        }
    }

    /// What systemd holds from before (passed at start, [`Passed`]): the next
    /// [`Self::sync`] replaces every record and removes the rest.
    pub fn held(&mut self, passed: &Passed) {
        for (key, names) in &passed.held {
            // Identity 0 is no device's: the next sync replaces the record.
            self.stored.insert(key.clone(), (0, names.clone()));
        }
        self.orphans.extend(passed.orphans.iter().cloned());
    }

    /// Whether the record of `key` is of the device `identity`.
    pub fn holds(&self, key: &PortKey, identity: usize) -> bool {
        self.stored.get(key).is_some_and(|(id, _)| *id == identity)
    }

    /// Brings the store in line with `ports` (switch, port, the device's identity, its
    /// record): a record for each port whose device changed, none for a port that went.
    /// A record that cannot be stored is logged and skipped: the port works, it just
    /// does not outlive a crash.
    pub fn sync(&mut self, ports: Vec<PortNow>) {
        for name in std::mem::take(&mut self.orphans) {
            self.remove_name(&name);
        }
        let present: std::collections::BTreeSet<_> = ports.iter().map(|p| p.key.clone()).collect();
        let gone: Vec<_> = self
            .stored
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for (switch, port) in gone {
            self.remove(&switch, &port);
        }
        for PortNow {
            key,
            device: identity,
            record,
        } in ports
        {
            if self.holds(&key, identity) {
                continue;
            }
            match record {
                Some((carried, fds)) => {
                    if let Err(e) = self.put(&key.0, &key.1, identity, carried, &fds) {
                        tracing::warn!(switch = %key.0, port = %key.1, error = %e, "the port's devices are not kept in systemd's file descriptor store: a crash of weftd will close them");
                    }
                }
                None => {
                    self.remove(&key.0, &key.1);
                    self.stored.insert(key, (identity, Vec::new()));
                }
            }
        }
    }

    /// Replaces the record of `switch`:`port`.
    fn put(
        &mut self,
        switch: &str,
        port: &str,
        identity: usize,
        carried: Carried,
        fds: &[OwnedFd],
    ) -> Result<(), StoreError> {
        let previous = self
            .stored
            .remove(&(switch.into(), port.into()))
            .map(|(_, names)| names)
            .unwrap_or_default();
        let base = record_name(switch, port);
        // Whatever is stored under the old and the new names goes first, each once: also
        // what a weftd this one took over from stored (same names; systemd would keep both).
        let stale: std::collections::BTreeSet<String> = previous
            .into_iter()
            .chain(std::iter::once(base.clone()))
            .chain((0..fds.len()).map(|i| format!("{base}.{i}")))
            .collect();
        for name in &stale {
            self.remove_name(name);
        }
        let held: usize = self.stored.values().map(|(_, names)| names.len()).sum();
        let wanted = held + fds.len() + 1;
        if wanted > self.capacity {
            return Err(StoreError::Full {
                wanted,
                capacity: self.capacity,
            });
        }
        let record = Record {
            version: RECORD_VERSION,
            switch: switch.into(),
            port: port.into(),
            carried,
            fds: fds.len(),
        };
        let memfd = write_memfd(&record)?;
        let mut names = Vec::with_capacity(fds.len() + 1);
        let sent = std::iter::once((base.clone(), memfd.as_fd()))
            .chain(
                fds.iter()
                    .enumerate()
                    .map(|(i, fd)| (format!("{base}.{i}"), fd.as_fd())),
            )
            .try_for_each(|(name, fd)| {
                self.notify
                    .send(&format!("FDSTORE=1\nFDNAME={name}\nFDPOLL=0"), &[fd])?;
                names.push(name);
                Ok::<_, StoreError>(())
            });
        // What was stored is removed with the record, also when the rest failed.
        self.stored
            .insert((switch.into(), port.into()), (identity, names));
        if sent.is_err() {
            self.remove(switch, port);
        }
        sent
    }

    /// Drops the record of `switch`:`port`, if there is one.
    pub fn remove(&mut self, switch: &str, port: &str) {
        if let Some((_, names)) = self.stored.remove(&(switch.into(), port.into())) {
            for name in names {
                self.remove_name(&name);
            }
        }
    }

    fn remove_name(&self, name: &str) {
        if let Err(e) = self
            .notify
            .send(&format!("FDSTOREREMOVE=1\nFDNAME={name}"), &[])
        {
            tracing::warn!(name, error = %e, "cannot remove a descriptor from systemd's file descriptor store");
        }
    }
}

/// The record as a sealed memfd (nobody changes it after this).
fn write_memfd(record: &Record) -> Result<OwnedFd, StoreError> {
    let err = |what: &str, e: &dyn std::fmt::Display| StoreError::Memfd(format!("{what}: {e}"));
    let json = serde_json::to_vec(record).map_err(|e| err("encoding", &e))?;
    let fd = memfd_create(
        c"weft-fd-store-record",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(|e| err("memfd_create", &e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&json).map_err(|e| err("write", &e))?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_SEAL
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_WRITE,
        ),
    )
    .map_err(|e| err("sealing", &e))?;
    Ok(file.into())
}

/// What systemd passed at start, sorted out: the usable records by port, and the names of
/// everything else (closed; removed from the store at the next sync).
#[derive(Debug, Default)]
pub struct Passed {
    /// Per port: its device's description and descriptors.
    pub records: crate::control::Inherited,
    /// Per port with a record: the names its descriptors are stored under.
    pub held: BTreeMap<PortKey, Vec<String>>,
    /// Names of descriptors that belong to no usable record.
    pub orphans: Vec<String>,
    /// Why they are not usable.
    pub errors: Vec<StoreError>,
}

/// The records among the descriptors systemd passed, each as `(FDNAME, descriptor)`.
/// Every record is checked as untrusted: its memfd's JSON, its version, that its name is
/// its port's, that exactly the descriptors it names came with it.
pub fn decode(named: Vec<(String, OwnedFd)>) -> Passed {
    let mut records: BTreeMap<String, (Option<OwnedFd>, BTreeMap<usize, OwnedFd>)> =
        BTreeMap::new();
    let mut passed = Passed::default();
    for (name, fd) in named {
        let placed = match parse_name(&name) {
            None => Err(fd),
            Some((base, index)) => {
                let (memfd, devices) = records.entry(base.to_string()).or_default();
                match index {
                    None if memfd.is_none() => {
                        *memfd = Some(fd);
                        Ok(())
                    }
                    Some(i) if !devices.contains_key(&i) => {
                        devices.insert(i, fd);
                        Ok(())
                    }
                    _ => Err(fd),
                }
            }
        };
        if let Err(fd) = placed {
            drop(fd);
            passed.errors.push(StoreError::Bad {
                name: name.clone(),
                why: "not a name of weftd's records, or passed twice; closed".into(),
            });
            passed.orphans.push(name);
        }
    }
    for (base, (memfd, devices)) in records {
        let names: Vec<String> = memfd
            .iter()
            .map(|_| base.clone())
            .chain(devices.keys().map(|i| format!("{base}.{i}")))
            .collect();
        match check_record(&base, memfd, devices) {
            Ok((key, kept)) => {
                passed.held.insert(key.clone(), names);
                passed.records.insert(key, kept);
            }
            Err(why) => {
                passed.errors.push(StoreError::Bad { name: base, why });
                passed.orphans.extend(names);
            }
        }
    }
    passed
}

/// A record's name split: the record (`weft-<hex>-<hex>`), and the device descriptor's
/// index when it is one (`<record>.<i>`). `None`: not a name weftd stores under.
fn parse_name(name: &str) -> Option<(&str, Option<usize>)> {
    let (base, index) = match name.split_once('.') {
        None => (name, None),
        Some((base, i)) => {
            let digits = !i.is_empty() && i.len() <= 6 && i.bytes().all(|b| b.is_ascii_digit());
            (base, Some(i.parse::<usize>().ok().filter(|_| digits)?))
        }
    };
    let hex = base.strip_prefix("weft-")?;
    let valid = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    valid.then_some((base, index))
}

/// One record's memfd and device descriptors checked: the port, its description, its
/// descriptors in index order.
fn check_record(
    base: &str,
    memfd: Option<OwnedFd>,
    mut devices: BTreeMap<usize, OwnedFd>,
) -> Result<(PortKey, Kept), String> {
    let memfd = memfd.ok_or("its description is missing")?;
    let record = read_record(memfd)?;
    if record.version != RECORD_VERSION {
        return Err(format!(
            "version {} (this weftd reads {RECORD_VERSION})",
            record.version
        ));
    }
    if record_name(&record.switch, &record.port) != base {
        return Err(format!(
            "it describes {}:{}, whose record has another name",
            record.switch, record.port
        ));
    }
    let came = devices.len();
    let fds: Vec<OwnedFd> = (0..record.fds).filter_map(|i| devices.remove(&i)).collect();
    if fds.len() != record.fds || !devices.is_empty() {
        return Err(format!(
            "{came} descriptors came with it where {} belong",
            record.fds
        ));
    }
    Ok(((record.switch, record.port), (record.carried, fds)))
}

/// A record's memfd read back (at most [`MAX_RECORD_BYTES`]).
fn read_record(memfd: OwnedFd) -> Result<Record, String> {
    let mut file = std::fs::File::from(memfd);
    file.rewind().map_err(|e| format!("the memory file: {e}"))?;
    let mut json = Vec::new();
    (&mut file)
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("the memory file: {e}"))?;
    if json.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!("longer than {MAX_RECORD_BYTES} bytes"));
    }
    serde_json::from_slice(&json).map_err(|e| format!("not a record: {e}"))
}

#[cfg(test)]
#[path = "fd_store_tests.rs"]
mod tests;
