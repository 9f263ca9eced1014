//! The directory client against a real etcd: hosts find each other's endpoints and MACs,
//! a moved MAC is won by its new host, nothing is flushed while etcd is away, and what
//! changed meanwhile is written once it is back; bad entries are counted and skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_directory::{Desired, Directory, DirectoryConfig, HostId, Sink, TlsFiles, VtepRecord};
use weft_packet::{MacAddr, Vni};
use weft_testlab::etcd::{self, Etcd};

/// What a sink was told, per VNI.
#[derive(Default, Debug)]
struct Told {
    remotes: BTreeMap<Vni, Vec<IpAddr>>,
    macs: BTreeMap<Vni, BTreeMap<MacAddr, IpAddr>>,
    replaced: usize,
}

#[derive(Default)]
struct Recorder(Mutex<Told>);

impl Sink for Recorder {
    fn replace(&self, vni: Vni, remotes: &[VtepRecord], macs: &[(MacAddr, IpAddr)]) {
        let mut t = self.0.lock().unwrap();
        t.replaced += 1;
        t.remotes
            .insert(vni, remotes.iter().map(|r| r.addr).collect());
        t.macs.insert(vni, macs.iter().copied().collect());
    }

    fn remotes(&self, vni: Vni, remotes: &[VtepRecord]) {
        let mut t = self.0.lock().unwrap();
        t.remotes
            .insert(vni, remotes.iter().map(|r| r.addr).collect());
    }

    fn macs(&self, vni: Vni, changes: &[(MacAddr, Option<IpAddr>)]) {
        let mut t = self.0.lock().unwrap();
        let macs = t.macs.entry(vni).or_default();
        for (mac, to) in changes {
            match to {
                Some(ip) => macs.insert(*mac, *ip),
                None => macs.remove(mac),
            };
        }
    }
}

impl Recorder {
    fn owner(&self, vni: Vni, mac: MacAddr) -> Option<IpAddr> {
        self.0.lock().unwrap().macs.get(&vni)?.get(&mac).copied()
    }

    fn remotes(&self, vni: Vni) -> Vec<IpAddr> {
        self.0
            .lock()
            .unwrap()
            .remotes
            .get(&vni)
            .cloned()
            .unwrap_or_default()
    }
}

const VNI: u32 = 100;

fn vni() -> Vni {
    Vni::new(VNI).unwrap()
}

fn mac(n: u8) -> MacAddr {
    MacAddr::from_bytes(&[0x52, 0x54, 0, 0, 1, n]).unwrap()
}

fn addr(n: u8) -> IpAddr {
    IpAddr::from([192, 0, 2, n])
}

/// A host of the test: a directory client and what its sink heard.
struct Host {
    directory: Directory,
    sink: Arc<Recorder>,
    vtep: IpAddr,
}

impl Host {
    fn start(etcd: &Etcd, name: &str, n: u8) -> Host {
        Self::start_with(etcd, name, n, |_| {})
    }

    /// A host whose settings `adjust` changes (TLS, a user).
    fn start_with(
        etcd: &Etcd,
        name: &str,
        n: u8,
        adjust: impl FnOnce(&mut DirectoryConfig),
    ) -> Host {
        let mut config = DirectoryConfig::new(vec![etcd.url()], HostId::new(name).unwrap());
        config.lease_ttl = Duration::from_secs(4);
        config.publish_interval = Duration::from_millis(50);
        config.request_timeout = Duration::from_secs(2);
        adjust(&mut config);
        let sink = Arc::new(Recorder::default());
        let directory = Directory::start(config, sink.clone()).unwrap();
        Host {
            directory,
            sink,
            vtep: addr(n),
        }
    }

    fn has(&self, macs: &[u8]) {
        self.directory.set_desired(Desired {
            vteps: BTreeMap::from([(
                vni(),
                VtepRecord {
                    addr: self.vtep,
                    port: 4789,
                },
            )]),
            macs: BTreeMap::from([(vni(), macs.iter().map(|m| mac(*m)).collect::<BTreeSet<_>>())]),
        });
    }
}

fn within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

fn skip() -> bool {
    if let Some(why) = etcd::missing() {
        println!("SKIP: {why}");
        return true;
    }
    false
}

#[test]
fn hosts_find_each_others_endpoints_and_macs_through_etcd() {
    if skip() {
        return;
    }
    let etcd = Etcd::start();
    let a = Host::start(&etcd, "host-a", 1);
    let b = Host::start(&etcd, "host-b", 2);
    a.has(&[1, 2]);
    b.has(&[3]);
    within(Duration::from_secs(10), "a learns b", || {
        a.sink.remotes(vni()) == vec![b.vtep] && a.sink.owner(vni(), mac(3)) == Some(b.vtep)
    });
    within(Duration::from_secs(10), "b learns a", || {
        b.sink.remotes(vni()) == vec![a.vtep]
            && b.sink.owner(vni(), mac(1)) == Some(a.vtep)
            && b.sink.owner(vni(), mac(2)) == Some(a.vtep)
    });
    // A host never hears of itself.
    assert_eq!(a.sink.owner(vni(), mac(1)), None);
    let keys = etcd.keys("/weft/");
    assert!(
        keys.contains(&"/weft/vni/100/vtep/host-a".to_string()),
        "{keys:?}"
    );
    assert!(keys.contains(&"/weft/vni/100/mac/52:54:00:00:01:03/host-b".to_string()));
    let status = a.directory.status();
    assert!(status.connected, "{status:?}");
    assert_eq!(status.published, 2);
    assert_eq!(status.last_error, None);

    // b goes away cleanly: its lease is revoked and a forgets it at once.
    drop(b);
    within(Duration::from_secs(3), "a forgets b", || {
        a.sink.remotes(vni()).is_empty() && a.sink.owner(vni(), mac(3)).is_none()
    });
}

#[test]
fn a_mac_that_moves_is_won_by_its_new_host_everywhere_within_a_second() {
    if skip() {
        return;
    }
    let etcd = Etcd::start();
    let a = Host::start(&etcd, "a", 1);
    let b = Host::start(&etcd, "b", 2);
    let c = Host::start(&etcd, "c", 3);
    a.has(&[7]);
    b.has(&[]);
    c.has(&[]);
    within(
        Duration::from_secs(10),
        "b and c learn the MAC at a",
        || {
            c.sink.owner(vni(), mac(7)) == Some(a.vtep)
                && b.sink.owner(vni(), mac(7)) == Some(a.vtep)
        },
    );
    // The MAC appears at b; a still claims it (it has not noticed yet).
    b.has(&[7]);
    let took = within(Duration::from_secs(1), "c follows the move", || {
        c.sink.owner(vni(), mac(7)) == Some(b.vtep)
    });
    within(Duration::from_secs(1), "a follows the move", || {
        a.sink.owner(vni(), mac(7)) == Some(b.vtep)
    });
    println!("a move reached the third host in {took:?}");
    assert_eq!(
        etcd.get("/weft/vni/100/mac/52:54:00:00:01:07/b").as_deref(),
        Some(r#"{"vtep":"192.0.2.2","seq":1}"#)
    );
    // a writes again (its claim is older): b keeps the MAC.
    a.has(&[7, 8]);
    within(Duration::from_secs(2), "c learns a's other MAC", || {
        c.sink.owner(vni(), mac(8)) == Some(a.vtep)
    });
    assert_eq!(c.sink.owner(vni(), mac(7)), Some(b.vtep));
}

#[test]
fn while_etcd_is_gone_nothing_is_flushed_and_what_changed_is_written_once_it_is_back() {
    if skip() {
        return;
    }
    let mut etcd = Etcd::start();
    let a = Host::start(&etcd, "a", 1);
    let b = Host::start(&etcd, "b", 2);
    a.has(&[1]);
    b.has(&[2]);
    within(Duration::from_secs(10), "both learn", || {
        a.sink.owner(vni(), mac(2)) == Some(b.vtep) && b.sink.owner(vni(), mac(1)) == Some(a.vtep)
    });
    etcd.stop();
    within(Duration::from_secs(10), "a notices", || {
        !a.directory.status().connected
    });
    let status = a.directory.status();
    assert!(status.last_error.is_some(), "{status:?}");
    // Forwarding state stays as it was.
    assert_eq!(a.sink.owner(vni(), mac(2)), Some(b.vtep));
    assert_eq!(a.sink.remotes(vni()), vec![b.vtep]);
    // a learns a MAC while etcd is away.
    a.has(&[1, 3]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(a.sink.owner(vni(), mac(2)), Some(b.vtep));
    etcd.resume();
    within(
        Duration::from_secs(15),
        "b hears of the MAC learned meanwhile",
        || b.sink.owner(vni(), mac(3)) == Some(a.vtep),
    );
    within(Duration::from_secs(5), "a is connected again", || {
        a.directory.status().connected
    });
    assert_eq!(a.sink.owner(vni(), mac(2)), Some(b.vtep));
    assert!(a.directory.status().resyncs >= 2);
}

#[test]
fn malformed_entries_written_into_etcd_are_counted_and_skipped() {
    if skip() {
        return;
    }
    let etcd = Etcd::start();
    let a = Host::start(&etcd, "a", 1);
    a.has(&[1]);
    within(Duration::from_secs(10), "a is up", || {
        a.directory.status().published == 1
    });
    etcd.put(
        "/weft/vni/100/mac/not-a-mac/evil",
        r#"{"vtep":"192.0.2.66","seq":9}"#,
    );
    etcd.put("/weft/vni/100/mac/52:54:00:00:01:09/evil", "garbage");
    etcd.put(
        "/weft/vni/100/mac/ff:ff:ff:ff:ff:ff/evil",
        r#"{"vtep":"192.0.2.66","seq":9}"#,
    );
    etcd.put("/weft/vni/100/vtep/evil", &"x".repeat(4096));
    etcd.put(
        "/weft/vni/100/vtep/ok",
        r#"{"addr":"192.0.2.5","port":4789}"#,
    );
    within(Duration::from_secs(5), "the good entry", || {
        a.sink.remotes(vni()) == vec![addr(5)]
    });
    let refused: BTreeMap<&str, u64> = a.directory.status().refused.into_iter().collect();
    assert_eq!(refused.get("malformed_key"), Some(&1), "{refused:?}");
    assert_eq!(refused.get("malformed_value"), Some(&1), "{refused:?}");
    assert_eq!(refused.get("not_unicast"), Some(&1), "{refused:?}");
    assert_eq!(refused.get("value_too_large"), Some(&1), "{refused:?}");
    assert_eq!(a.sink.owner(vni(), mac(9)), None);
}

#[test]
fn hosts_find_each_other_through_an_etcd_that_takes_only_clients_with_certificates() {
    if skip() {
        return;
    }
    let etcd = Etcd::start_tls();
    let pki = etcd.pki().unwrap().clone();
    let with_cert = TlsFiles {
        ca: Some(pki.ca.clone()),
        cert: Some(pki.client.0.clone()),
        key: Some(pki.client.1.clone()),
    };
    let a = Host::start_with(&etcd, "a", 1, |c| c.tls = Some(with_cert.clone()));
    let b = Host::start_with(&etcd, "b", 2, |c| c.tls = Some(with_cert.clone()));
    a.has(&[1]);
    b.has(&[2]);
    within(
        Duration::from_secs(10),
        "a and b find each other over TLS",
        || {
            a.sink.owner(vni(), mac(2)) == Some(b.vtep)
                && b.sink.owner(vni(), mac(1)) == Some(a.vtep)
        },
    );
    // Without a client certificate etcd refuses the session, and the status says so.
    let no_cert = TlsFiles {
        ca: Some(pki.ca.clone()),
        cert: None,
        key: None,
    };
    let c = Host::start_with(&etcd, "c", 3, |c| c.tls = Some(no_cert));
    c.has(&[3]);
    within(Duration::from_secs(10), "c's failure reported", || {
        c.directory.status().last_error.is_some()
    });
    let status = c.directory.status();
    println!("without a client certificate: {status:?}");
    assert!(!status.connected, "{status:?}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(a.sink.owner(vni(), mac(3)), None);
}

#[test]
fn a_user_with_a_password_reads_and_writes_and_a_wrong_password_is_reported() {
    if skip() {
        return;
    }
    let mut etcd = Etcd::start();
    etcd.enable_auth("weft", "s3cret-pass", "/weft/");
    let user = |password: &str| Some(("weft".to_string(), password.to_string()));
    let a = Host::start_with(&etcd, "a", 1, |c| c.user = user("s3cret-pass"));
    let b = Host::start_with(&etcd, "b", 2, |c| c.user = user("s3cret-pass"));
    a.has(&[1]);
    b.has(&[2]);
    within(
        Duration::from_secs(10),
        "a and b find each other as user weft",
        || {
            a.sink.owner(vni(), mac(2)) == Some(b.vtep)
                && b.sink.owner(vni(), mac(1)) == Some(a.vtep)
        },
    );
    let c = Host::start_with(&etcd, "c", 3, |c| c.user = user("wrong"));
    c.has(&[3]);
    within(Duration::from_secs(10), "c's failure reported", || {
        c.directory.status().last_error.is_some()
    });
    let status = c.directory.status();
    println!("with a wrong password: {status:?}");
    assert!(!status.connected, "{status:?}");
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("authentication failed"), "{error}");
}
