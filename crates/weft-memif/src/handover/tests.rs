//! A description another process sent is untrusted: each way it can be wrong is refused
//! with its reason, before anything is served.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::{MemifConfig, MemifError, MemifPort, SocketDir};

struct Fixture {
    path: PathBuf,
    dir: Arc<SocketDir>,
    _ports: (MemifPort, MemifPort),
    described: MemifHandover,
    fds: Vec<OwnedFd>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A server port with a client connected, described (and resumed).
fn fixture(tag: &str) -> Fixture {
    let path = std::env::temp_dir().join(format!("weft-memif-ho-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).unwrap();
    let dir = Arc::new(SocketDir::open(&path).unwrap());
    let server =
        MemifPort::open(Arc::clone(&dir), "m.sock".as_ref(), MemifConfig::default()).unwrap();
    let client = MemifPort::open(
        Arc::clone(&dir),
        "m.sock".as_ref(),
        MemifConfig {
            role: Role::Client,
            ..MemifConfig::default()
        },
    )
    .unwrap();
    assert!(server.wait_connected(Duration::from_secs(5)));
    let (parked, (described, fds)) = server
        .handover_source()
        .suspend(Duration::from_secs(2))
        .unwrap();
    drop(parked);
    Fixture {
        path,
        dir,
        _ports: (server, client),
        described,
        fds,
    }
}

impl Fixture {
    /// Adopts `described` with fresh duplicates of `fds` (each adoption takes its own).
    fn adopt_with(
        &self,
        config: MemifConfig,
        described: MemifHandover,
        fds: Vec<OwnedFd>,
    ) -> Result<MemifPort, MemifError> {
        MemifPort::adopt(
            Arc::clone(&self.dir),
            "m.sock".as_ref(),
            config,
            described,
            fds,
        )
    }

    fn fds(&self) -> Vec<OwnedFd> {
        self.fds
            .iter()
            .map(|f| f.as_fd().try_clone_to_owned().unwrap())
            .collect()
    }

    /// Adopts a changed description with the port's own config, expecting a refusal
    /// whose message contains `why`.
    fn refused(&self, why: &str, change: impl FnOnce(&mut MemifHandover)) {
        let mut d = self.described.clone();
        change(&mut d);
        self.refused_with(why, MemifConfig::default(), d, self.fds());
    }

    fn refused_with(
        &self,
        why: &str,
        config: MemifConfig,
        described: MemifHandover,
        fds: Vec<OwnedFd>,
    ) {
        match self.adopt_with(config, described, fds) {
            Ok(port) => panic!("adopted: {port:?}"),
            Err(e) => assert!(e.to_string().contains(why), "{e} (expected: {why})"),
        }
    }
}

fn conn(d: &mut MemifHandover) -> &mut ConnectionHandover {
    d.connection.as_mut().unwrap()
}

#[test]
fn a_description_as_written_is_adopted_connected() {
    let f = fixture("ok");
    let port = f
        .adopt_with(MemifConfig::default(), f.described.clone(), f.fds())
        .unwrap();
    assert!(port.is_connected());
    // Not dropped: that would tell the (shared) client goodbye on the fixture's socket.
    std::mem::forget(port);
}

#[test]
fn another_version_role_or_id_is_refused() {
    let f = fixture("who");
    f.refused("version 2", |d| d.version = 2);
    f.refused("a client with id 0", |d| d.role = Role::Client);
    f.refused("a server with id 7", |d| d.id = 7);
    f.refused("a server comes with its listener", |d| d.listener = None);
}

#[test]
fn descriptor_indexes_out_of_range_named_twice_or_unnamed_are_refused() {
    let f = fixture("idx");
    f.refused("descriptor index 99", |d| conn(d).socket = 99);
    f.refused("named twice", |d| {
        let c = conn(d);
        c.rx[0].interrupt = c.tx[0].interrupt;
    });
    let mut extra = f.fds();
    extra.push(f.fds.first().unwrap().as_fd().try_clone_to_owned().unwrap());
    f.refused_with(
        "does not name it",
        MemifConfig::default(),
        f.described.clone(),
        extra,
    );
}

#[test]
fn a_descriptor_of_the_wrong_kind_is_refused() {
    let f = fixture("kind");
    // The connection and a region's file swapped.
    f.refused("is a regular file, not a connected seqpacket socket", |d| {
        let c = conn(d);
        std::mem::swap(&mut c.socket, &mut c.regions[0].fd);
    });
    // An interrupt that is a pipe.
    let mut fds = f.fds();
    let index = f.described.connection.as_ref().unwrap().rx[0].interrupt;
    fds[index] = nix::unistd::pipe().unwrap().0;
    f.refused_with(
        "for the interrupt is a pipe, not an eventfd",
        MemifConfig::default(),
        f.described.clone(),
        fds,
    );
}

#[test]
fn rings_memory_and_sizes_that_do_not_hold_together_are_refused() {
    let f = fixture("rings");
    f.refused("lies outside its region", |d| {
        conn(d).rx[0].offset = conn(d).regions[0].size
    });
    f.refused("buffers of 4096 bytes", |d| conn(d).buffer_size = 4096);
    f.refused("only a client's receive rings", |d| {
        conn(d).rx[0].offered = Some(3)
    });
    f.refused("a server's connection has a client layout", |d| {
        conn(d).layout = Some(crate::layout::ClientLayout {
            c2s: 1,
            s2c: 1,
            log2: 10,
            buffer_size: 2048,
        })
    });
    // A second receive ring (with an interrupt of its own) on a port of one queue pair.
    let mut two = f.described.clone();
    let mut fds = f.fds();
    let first = conn(&mut two).rx[0];
    fds.push(fds[first.interrupt].as_fd().try_clone_to_owned().unwrap());
    conn(&mut two).rx.push(RingHandover {
        interrupt: fds.len() - 1,
        ..first
    });
    f.refused_with(
        "2 receive and 1 transmit rings",
        MemifConfig::default(),
        two,
        fds,
    );
    f.refused("a ring of 2^20 slots", |d| conn(d).tx[0].log2 = 20);
    // A region longer than its file.
    f.refused("has", |d| conn(d).regions[0].size *= 2);
    // Over the port's limit.
    let small = MemifConfig {
        max_region_bytes: 4096,
        ..MemifConfig::default()
    };
    f.refused_with("over the port's limit", small, f.described.clone(), f.fds());
}
