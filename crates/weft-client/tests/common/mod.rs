//! A weft switch with vhost-user ports, run by a weft worker thread as weftd would, for
//! weft-client's end-to-end test and examples.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use weft_runtime::{spawn_worker, WorkerConfig, WorkerHandle};
use weft_switch::{PortOptions, SwitchConfig};
use weft_vhost::{VhostPortConfig, VhostUserPort};

/// The switch's worker, its ports and their sockets.
pub(crate) struct Rig {
    pub(crate) worker: WorkerHandle,
    pub(crate) ports: Vec<VhostUserPort>,
    pub(crate) sockets: Vec<PathBuf>,
    dir: PathBuf,
}

impl Rig {
    /// Switch `br0` with `n` vhost-user ports `p0`.. on a worker (pinned to `cpu`).
    pub(crate) fn new(tag: &str, n: usize, config: VhostPortConfig, worker: WorkerConfig) -> Rig {
        Rig::with_modes(tag, &vec![false; n], config, worker)
    }

    /// The same with a port per entry of `client_mode`: `true` makes a port in client mode,
    /// which connects to its socket (the test listens there) instead of listening.
    pub(crate) fn with_modes(
        tag: &str,
        client_mode: &[bool],
        config: VhostPortConfig,
        worker: WorkerConfig,
    ) -> Rig {
        let dir = std::env::temp_dir().join(format!("weft-client-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let worker = spawn_worker(worker).unwrap();
        worker
            .exec(|reg, _| {
                reg.create("br0", SwitchConfig::default()).unwrap();
            })
            .unwrap();
        let mut ports = Vec::new();
        let mut sockets = Vec::new();
        for (i, &client) in client_mode.iter().enumerate() {
            let path = dir.join(format!("p{i}.sock"));
            let mut port = if client {
                VhostUserPort::connect(&path, config).unwrap()
            } else {
                VhostUserPort::listen(&path, config).unwrap()
            };
            let (rx, tx) = port.take_halves().unwrap();
            let name = format!("br0:p{i}");
            worker
                .exec(move |reg, _| {
                    reg.add_port(
                        &name,
                        Some(Box::new(rx)),
                        Box::new(tx),
                        PortOptions::default(),
                    )
                    .unwrap();
                })
                .unwrap();
            ports.push(port);
            sockets.push(path);
        }
        Rig {
            worker,
            ports,
            sockets,
            dir,
        }
    }

    /// Waits until every port's rings run.
    pub(crate) fn wait_running(&self) {
        for p in &self.ports {
            assert!(
                p.wait_running(Duration::from_secs(10)),
                "a port's rings never started"
            );
        }
    }

    /// The switch's drops, summed over reasons.
    pub(crate) fn switch_drops(&self) -> u64 {
        self.worker
            .exec(|reg, _| reg.get("br0").unwrap().drops().total())
            .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
