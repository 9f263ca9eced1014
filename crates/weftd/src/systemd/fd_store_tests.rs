//! The store against a stand-in for systemd's end of the notification socket, which keeps
//! descriptors by name as systemd does (`FDSTORE=1` adds, `FDSTOREREMOVE=1` drops every
//! descriptor of a name), and records read back as untrusted.

use std::io::{IoSliceMut, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

use super::*;

/// systemd's side: a thread reading datagrams as they come (a sender blocks once a few
/// are queued, as with the real one), applying them to a list of (name, descriptor).
struct StandIn {
    _dir: tempfile::TempDir,
    shared: Arc<Mutex<Applied>>,
}

#[derive(Default)]
struct Applied {
    store: Vec<(String, OwnedFd)>,
    messages: usize,
}

impl StandIn {
    fn new() -> (StandIn, NotifySocket) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        let notify = NotifySocket::at(path.as_os_str()).unwrap();
        let shared = Arc::new(Mutex::new(Applied::default()));
        let applied = Arc::clone(&shared);
        // Ends when the socket file's directory goes and the test process exits; it only
        // ever blocks in recvmsg.
        std::thread::spawn(move || loop {
            let Some((text, fds)) = receive(&socket) else {
                return;
            };
            apply(&mut applied.lock().unwrap(), &text, fds);
        });
        (StandIn { _dir: dir, shared }, notify)
    }

    /// Waits until every datagram sent so far is applied (sends are synchronous: they
    /// are queued once `send` returns; the thread takes a moment to apply them).
    fn apply(&mut self) {
        let mut last = usize::MAX;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(30));
            let now = self.shared.lock().unwrap().messages;
            if now == last {
                return;
            }
            last = now;
        }
    }

    fn messages(&self) -> usize {
        self.shared.lock().unwrap().messages
    }

    /// What a restarted weftd would be passed.
    fn pass(&mut self) -> Vec<(String, OwnedFd)> {
        self.shared
            .lock()
            .unwrap()
            .store
            .iter()
            .map(|(n, fd)| (n.clone(), fd.try_clone().unwrap()))
            .collect()
    }

    fn names(&self) -> Vec<String> {
        let applied = self.shared.lock().unwrap();
        applied.store.iter().map(|(n, _)| n.clone()).collect()
    }

    /// A descriptor put into the store by someone else.
    fn add(&mut self, name: &str, fd: OwnedFd) {
        self.shared.lock().unwrap().store.push((name.into(), fd));
    }
}

/// One datagram and its descriptors.
fn receive(socket: &UnixDatagram) -> Option<(String, Vec<OwnedFd>)> {
    let mut buf = [0u8; 512];
    let mut space = nix::cmsg_space!([RawFd; 8]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .ok()?;
    let fds: Vec<OwnedFd> = msg
        .cmsgs()
        .ok()?
        .flat_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds,
            _ => Vec::new(),
        })
        // SAFETY: SCM_RIGHTS just gave this process these descriptors.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    let len = msg.bytes;
    Some((String::from_utf8(buf[..len].to_vec()).ok()?, fds))
}

/// What systemd does with a notification about its store.
fn apply(applied: &mut Applied, text: &str, fds: Vec<OwnedFd>) {
    applied.messages += 1;
    let lines: Vec<&str> = text.lines().collect();
    let name = lines
        .iter()
        .find_map(|l| l.strip_prefix("FDNAME="))
        .unwrap_or_default()
        .to_string();
    if lines.contains(&"FDSTORE=1") {
        assert!(lines.contains(&"FDPOLL=0"), "{text}");
        for fd in fds {
            applied.store.push((name.clone(), fd));
        }
    } else if lines.contains(&"FDSTOREREMOVE=1") {
        applied.store.retain(|(n, _)| *n != name);
    }
}

fn tap(ifname: &str) -> Carried {
    Carried::Tap {
        ifname: ifname.into(),
        queues: 1,
        mtu: 1500,
        csum: true,
        tso: true,
        uso: false,
        owned: true,
    }
}

fn device_fd() -> OwnedFd {
    tempfile::tempfile().unwrap().into()
}

fn port(switch: &str, port: &str, device: usize, fds: usize) -> PortNow {
    PortNow {
        key: (switch.into(), port.into()),
        device,
        record: Some((tap(port), (0..fds).map(|_| device_fd()).collect())),
    }
}

#[test]
fn record_names_are_valid_fdnames_for_the_longest_names() {
    let name = record_name(&"s".repeat(32), &"p:é".repeat(21));
    assert!(name.len() <= 255, "{}", name.len());
    assert!(name.bytes().all(|b| b.is_ascii_graphic() && b != b':'));
    assert_ne!(record_name("a-b", "c"), record_name("a", "b-c"));
}

#[test]
fn a_record_read_back_gives_the_port_its_description_and_descriptors() {
    let (mut systemd, notify) = StandIn::new();
    let mut store = FdStore::new(notify, 64);
    store.sync(vec![port("br0", "t1", 7, 1), port("br0", "vx", 8, 3)]);
    systemd.apply();
    assert_eq!(systemd.names().len(), 2 + 4, "{:?}", systemd.names());
    let passed = decode(systemd.pass());
    assert!(passed.errors.is_empty(), "{:?}", passed.errors);
    assert!(passed.orphans.is_empty());
    let (carried, fds) = &passed.records[&("br0".to_string(), "vx".to_string())];
    assert_eq!(*carried, tap("vx"));
    assert_eq!(fds.len(), 3);
    assert_eq!(passed.held[&("br0".to_string(), "t1".to_string())].len(), 2);
}

#[test]
fn an_unchanged_device_is_not_stored_again_and_a_replaced_one_replaces_its_record() {
    let (mut systemd, notify) = StandIn::new();
    let mut store = FdStore::new(notify, 64);
    store.sync(vec![port("br0", "t1", 7, 2)]);
    systemd.apply();
    let sent = systemd.messages();
    store.sync(vec![port("br0", "t1", 7, 2)]);
    systemd.apply();
    assert_eq!(systemd.messages(), sent, "nothing changed, nothing sent");
    store.sync(vec![port("br0", "t1", 9, 1)]);
    systemd.apply();
    let mut names = systemd.names();
    names.sort_unstable();
    let base = record_name("br0", "t1");
    assert_eq!(names, [base.clone(), format!("{base}.0")]);
}

#[test]
fn a_port_that_goes_takes_its_record_with_it() {
    let (mut systemd, notify) = StandIn::new();
    let mut store = FdStore::new(notify, 64);
    store.sync(vec![port("br0", "a", 1, 1), port("br0", "b", 2, 1)]);
    store.sync(vec![port("br0", "b", 2, 1)]);
    systemd.apply();
    assert!(systemd
        .names()
        .iter()
        .all(|n| n.starts_with(&record_name("br0", "b"))));
    store.remove("br0", "b");
    systemd.apply();
    assert!(systemd.names().is_empty());
}

#[test]
fn a_port_with_nothing_to_keep_has_no_record() {
    let (mut systemd, notify) = StandIn::new();
    let mut store = FdStore::new(notify, 64);
    store.sync(vec![port("br0", "a", 1, 1)]);
    // The same port, now a device with nothing worth keeping.
    store.sync(vec![PortNow {
        key: ("br0".into(), "a".into()),
        device: 2,
        record: None,
    }]);
    systemd.apply();
    assert!(systemd.names().is_empty());
}

#[test]
fn a_store_too_small_keeps_what_fits_and_stores_nothing_half() {
    let (mut systemd, notify) = StandIn::new();
    let mut store = FdStore::new(notify, 5);
    store.sync(vec![port("br0", "a", 1, 2), port("br0", "b", 2, 2)]);
    systemd.apply();
    // a: 3 descriptors; b would make 6.
    assert_eq!(systemd.names().len(), 3);
    assert!(decode(systemd.pass()).errors.is_empty());
}

#[test]
fn what_a_weftd_before_stored_is_replaced_and_orphans_removed() {
    let (mut systemd, notify) = StandIn::new();
    let mut before = FdStore::new(notify.clone(), 64);
    before.sync(vec![port("br0", "a", 1, 1), port("br0", "gone", 2, 1)]);
    systemd.apply();
    systemd.add("stranger", device_fd());
    let passed = decode(systemd.pass());
    assert_eq!(passed.orphans, ["stranger"]);
    let mut after = FdStore::new(notify, 64);
    after.held(&passed);
    after.sync(vec![port("br0", "a", 5, 1)]);
    systemd.apply();
    let mut names = systemd.names();
    names.sort_unstable();
    let base = record_name("br0", "a");
    assert_eq!(names, [base.clone(), format!("{base}.0")]);
}

/// A record's memfd with `json` in it.
fn memfd_with(json: &[u8]) -> OwnedFd {
    let fd = memfd_create(c"test", MFdFlags::MFD_CLOEXEC).unwrap();
    let mut file = std::fs::File::from(fd);
    file.write_all(json).unwrap();
    file.into()
}

fn record_json(switch: &str, port: &str, fds: usize, version: u32) -> Vec<u8> {
    serde_json::to_vec(&Record {
        version,
        switch: switch.into(),
        port: port.into(),
        carried: tap(port),
        fds,
    })
    .unwrap()
}

#[test]
fn hostile_records_are_closed_and_named() {
    let base = record_name("br0", "p");
    let other = record_name("br0", "q");
    let cases: Vec<(&str, Vec<(String, OwnedFd)>)> = vec![
        ("not weft's", vec![("weft".into(), device_fd())]),
        ("no description", vec![(format!("{base}.0"), device_fd())]),
        (
            "garbage description",
            vec![(base.clone(), memfd_with(b"{not json"))],
        ),
        (
            "oversized description",
            vec![(base.clone(), memfd_with(&vec![b' '; 70_000]))],
        ),
        (
            "another version",
            vec![(base.clone(), memfd_with(&record_json("br0", "p", 0, 99)))],
        ),
        (
            "describes another port",
            vec![(base.clone(), memfd_with(&record_json("br0", "q", 0, 1)))],
        ),
        (
            "a descriptor missing",
            vec![(base.clone(), memfd_with(&record_json("br0", "p", 1, 1)))],
        ),
        (
            "a descriptor too many",
            vec![
                (base.clone(), memfd_with(&record_json("br0", "p", 1, 1))),
                (format!("{base}.0"), device_fd()),
                (format!("{base}.1"), device_fd()),
            ],
        ),
        (
            "an index that is no number",
            vec![(format!("{base}.x"), device_fd())],
        ),
        (
            "a description passed twice",
            vec![
                (other.clone(), memfd_with(&record_json("br0", "q", 0, 1))),
                (other.clone(), memfd_with(&record_json("br0", "q", 0, 1))),
            ],
        ),
    ];
    for (what, named) in cases {
        let passed = decode(named);
        assert!(
            !passed.errors.is_empty() && !passed.orphans.is_empty(),
            "{what}: {passed:?}"
        );
        let usable = passed
            .records
            .keys()
            .all(|(_, p)| p == "q" && what == "a description passed twice");
        assert!(usable, "{what}: {:?}", passed.records.keys());
    }
}
