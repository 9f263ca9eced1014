//! One switch on a weft-runtime worker (the daemon's own worker, unlike [`crate::runner`]'s
//! test loop), for tests whose ports must be polled the way weftd polls them.

use weft_runtime::{spawn_worker, WorkerConfig, WorkerHandle};
use weft_switch::{PortOptions, PortRx, PortTx, SwitchConfig, SwitchRegistry};

/// A worker owning one switch.
pub struct WorkerSwitch {
    worker: WorkerHandle,
    switch: String,
}

impl WorkerSwitch {
    /// Spawns a worker and creates switch `switch` on it.
    pub fn spawn(switch: &str) -> WorkerSwitch {
        let worker = spawn_worker(WorkerConfig::default()).expect("spawn a worker");
        let name = switch.to_string();
        worker
            .exec(move |reg, _| reg.create(&name, SwitchConfig::default()).map(|_| ()))
            .expect("the worker runs")
            .unwrap_or_else(|e| panic!("create switch {switch}: {e}"));
        WorkerSwitch {
            worker,
            switch: switch.to_string(),
        }
    }

    /// Spawns the switch with these ports (name, halves) already added.
    pub fn with_ports<R, T>(
        switch: &str,
        ports: impl IntoIterator<Item = (&'static str, R, T)>,
    ) -> WorkerSwitch
    where
        R: PortRx + 'static,
        T: PortTx + 'static,
    {
        let worker = WorkerSwitch::spawn(switch);
        for (name, rx, tx) in ports {
            worker.add_port(name, rx, tx);
        }
        worker
    }

    /// Adds a port's halves as `<switch>:<port>`, with default options.
    pub fn add_port(&self, port: &str, rx: impl PortRx + 'static, tx: impl PortTx + 'static) {
        let name = format!("{}:{port}", self.switch);
        let (rx, tx): (Box<dyn PortRx>, Box<dyn PortTx>) = (Box::new(rx), Box::new(tx));
        let added = name.clone();
        self.worker
            .exec(move |reg, _| {
                reg.add_port(&added, Some(rx), tx, PortOptions::default())
                    .map(|_| ())
            })
            .expect("the worker runs")
            .unwrap_or_else(|e| panic!("add port {name}: {e}"));
    }

    /// Stops the worker and gives its switches back.
    pub fn shutdown(self) -> SwitchRegistry {
        self.worker.shutdown().expect("the worker stops")
    }
}

/// One switch run as `n` lanes (`weft_switch::lanes`), each on its own worker, as weftd
/// runs a switch with `settings.lanes = n` (with one lane, a plain switch).
pub struct WorkerLanes {
    lanes: Vec<WorkerSwitch>,
}

impl WorkerLanes {
    /// Spawns `n` workers, each with lane `i` of switch `switch`.
    pub fn spawn(switch: &str, n: usize) -> WorkerLanes {
        let handles: Vec<Option<weft_switch::lanes::Lane>> = if n > 1 {
            weft_switch::lanes::LaneGroup::lanes(n)
                .expect("a valid lane count")
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        let lanes = handles
            .into_iter()
            .map(|lane| {
                let ws = WorkerSwitch::spawn(switch);
                if let Some(lane) = lane {
                    let name = switch.to_string();
                    ws.worker
                        .exec(move |reg, _| {
                            if let Some(sw) = reg.get_mut(&name) {
                                sw.join_lanes(lane);
                            }
                        })
                        .expect("the worker runs");
                }
                ws
            })
            .collect();
        WorkerLanes { lanes }
    }

    /// Adds a port: lane `i` gets `halves[i]` (as `take_lane_halves` gives them).
    pub fn add_port<R, T>(&self, port: &str, halves: Vec<(R, T)>)
    where
        R: PortRx + 'static,
        T: PortTx + 'static,
    {
        assert_eq!(
            halves.len(),
            self.lanes.len(),
            "one pair of halves per lane"
        );
        for (lane, (rx, tx)) in self.lanes.iter().zip(halves) {
            lane.add_port(port, rx, tx);
        }
    }

    /// Stops the workers.
    pub fn shutdown(self) {
        for lane in self.lanes {
            drop(lane.shutdown());
        }
    }
}
