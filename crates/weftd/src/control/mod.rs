//! The control plane: answers requests, keeps the configuration, and changes the data path
//! only through the workers.
//!
//! Every change goes the same way (VNET/P §4.6: validate before the data path sees it):
//! 1. check it completely against the configuration ([`crate::model`]): names, addresses,
//!    VLANs, limits, rules translated with the switch's port names; on any error nothing
//!    has changed;
//! 2. open what can fail outside weftd (a port's device), still changing nothing;
//! 3. write the new configuration to the state file (atomically);
//! 4. hand the change to the worker that owns the switch, as a closure run between batches.
//!
//! The [`Controller`] sits behind one mutex: requests are applied one at a time, in order.
//! Workers never take that mutex; counters are read through atomics.

mod apply;
mod build;
mod capture;
pub mod client_files;
mod diff;
mod directory;
pub use directory::DirectoryPort;
mod fd_store;
mod fdb;
mod handover;
mod mtu;
mod packet_out;
pub use handover::Held;
pub mod open_as;
pub mod pool;
mod ports;
mod remote_macs;
mod routes;
mod rules;
pub mod stats;
mod switches;
mod upcalls;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use weft_control::state::{State, SwitchState};
use weft_control::{ControlError, ErrorKind, Request, Response};
use weft_switch::{PortCounters, PortId, RuleId};

use crate::devices::{Carried, TapMarks, VhostPolicy};
pub use capture::{lock, serve, Session, MAX_CAPTURES};
use client_files::ClientFiles;
pub use open_as::FileReader;
use pool::WorkerPool;

/// A port as the control plane tracks it beside its configuration.
struct PortRt {
    id: PortId,
    /// The switch's counters of the port, one per lane.
    counters: Vec<Arc<PortCounters>>,
    /// Why the device could not be opened, when it could not.
    failed: Option<String>,
    /// Its device (a stand-in when it failed), kept open while the port exists.
    device: crate::devices::DeviceHandle,
}

impl PortRt {
    /// The port's counters summed over the switch's lanes.
    fn counters(&self) -> weft_switch::PortCountersSnapshot {
        let mut lanes = self.counters.iter().map(|c| c.snapshot());
        let mut sum = lanes.next().unwrap_or_default();
        for lane in lanes {
            sum.add(&lane);
        }
        sum
    }
}

/// A switch as the control plane tracks it beside its configuration.
struct SwitchRt {
    /// The worker that runs each lane, first lane first (one for most switches). The
    /// first lane is the one the control plane reads the FDB and rules from.
    workers: Vec<usize>,
    ports: BTreeMap<String, PortRt>,
    /// The flow table's ids of the switch's rules, in the order of its configuration.
    rule_ids: Vec<RuleId>,
}

impl SwitchRt {
    /// The worker of the first lane.
    fn home(&self) -> usize {
        self.workers.first().copied().unwrap_or(0)
    }
}

/// The control plane's state. See the module documentation.
pub struct Controller {
    /// The configuration, as persisted; switches sorted by name.
    state: State,
    switches: BTreeMap<String, SwitchRt>,
    pool: WorkerPool,
    state_path: PathBuf,
    /// Where vhost-user sockets may be (the default directory first) and what their ports
    /// may map.
    vhost: VhostPolicy,
    /// The files the request being handled names, read before the lock was taken.
    files: ClientFiles,
    captures: capture::Captures,
    /// Upcall subscriptions and the hub every switch hands its upcalls to.
    upcalls: upcalls::Upcalls,
    /// The directory client, when weftd has a `[directory]`.
    directory: Option<Arc<crate::directory::DirectoryLink>>,
    /// Which TAP devices weft created.
    taps: TapMarks,
    /// systemd's file descriptor store, when weftd runs with one.
    fd_store: Option<crate::systemd::FdStore>,
}

/// Where a controller's devices live and what they may be.
#[derive(Debug)]
pub struct DevicePaths {
    /// The state file.
    pub state_file: PathBuf,
    /// Where vhost-user sockets may be and what their ports may map.
    pub vhost: VhostPolicy,
    /// Which TAP devices weft created.
    pub taps: TapMarks,
}

impl DevicePaths {
    /// `state_file` and `vhost`, with no TAP marks (every TAP weft creates is released when
    /// its port goes).
    pub fn new(state_file: PathBuf, vhost: VhostPolicy) -> DevicePaths {
        DevicePaths {
            state_file,
            vhost,
            taps: TapMarks::none(),
        }
    }
}

/// Devices another weftd handed over, by switch and port: what each is, and its
/// descriptors.
pub type Inherited = BTreeMap<(String, String), (Carried, Vec<std::os::fd::OwnedFd>)>;

/// A port that could not be recreated on start.
#[derive(Debug, Clone)]
pub struct PortFailure {
    /// Its switch.
    pub switch: String,
    /// The port.
    pub port: String,
    /// Why.
    pub reason: String,
}

fn internal(message: impl Into<String>) -> ControlError {
    ControlError::new(ErrorKind::Internal, message)
}

fn limit(message: impl Into<String>) -> ControlError {
    ControlError::new(ErrorKind::LimitReached, message)
}

fn no_switch(name: &str) -> ControlError {
    ControlError::not_found(format!("no switch {name:?}"))
        .with_hint("list the switches with switch_list (weft switch list)")
}

fn no_port(switch: &str, name: &str) -> ControlError {
    ControlError::not_found(format!("no port {name:?} on switch {switch:?}"))
        .with_hint("list the switch's ports with port_list (weft port list)")
}

impl Controller {
    /// What opening a port on `switch` needs (its lanes as configured now; one for a
    /// switch not configured yet).
    fn open_ctx<'a>(&'a self, switch: &'a str) -> crate::devices::OpenContext<'a> {
        let lanes = self
            .state
            .switches
            .iter()
            .find(|s| s.name == switch)
            .map_or(1, |s| s.settings.lanes);
        crate::devices::OpenContext {
            switch,
            vhost: &self.vhost,
            files: &self.files,
            lanes,
            taps: &self.taps,
        }
    }

    /// Starts the workers and builds `state` on them. Ports whose device cannot be opened
    /// are kept, marked failed, and returned. With `save`, the state is written to the
    /// state file once built (a first start).
    pub fn start(
        pool: WorkerPool,
        paths: DevicePaths,
        state: State,
        save: bool,
    ) -> Result<(Controller, Vec<PortFailure>), ControlError> {
        Self::start_with_kept(pool, paths, state, save, Inherited::new())
    }

    /// [`start`](Self::start), taking over the devices systemd's file descriptor store kept
    /// across a crash (`kept`, by switch and port) where they still fit their port; a kept
    /// device that does not is closed and the port opened afresh. Kept devices of ports
    /// the state does not have are closed.
    pub fn start_with_kept(
        pool: WorkerPool,
        paths: DevicePaths,
        state: State,
        save: bool,
        mut kept: Inherited,
    ) -> Result<(Controller, Vec<PortFailure>), ControlError> {
        let mut failures = Vec::new();
        let mut controller = Self::build(pool, paths, state, false, |ctx, switch| {
            Ok(build::open_or_fail(ctx, switch, &mut kept, &mut failures))
        })?;
        for (switch, port) in kept.keys() {
            tracing::info!(%switch, %port, "systemd kept a device of a port the state does not have: closed");
        }
        // A switch made on demand whose port never got added (weftd stopped between the
        // two) goes now, as it would have with its last port.
        let emptied: Vec<String> = controller
            .state
            .switches
            .iter()
            .filter(|s| s.on_demand && s.ports.is_empty())
            .map(|s| s.name.clone())
            .collect();
        for name in emptied {
            controller.drop_if_emptied_on_demand(&name);
        }
        if save {
            controller.save(&controller.state)?;
        }
        Ok((controller, failures))
    }

    /// Starts the workers and builds `state` on them with the devices another weftd handed
    /// over (`inherited`, by switch and port); any of them that cannot be taken over fails
    /// the whole start (the other weftd then carries on). Ports not handed over are opened.
    /// `from` names the other weftd in `port show`.
    pub fn take_over(
        pool: WorkerPool,
        paths: DevicePaths,
        state: State,
        mut inherited: Inherited,
        from: &str,
    ) -> Result<Controller, ControlError> {
        let controller = Self::build(pool, paths, state, true, |ctx, switch| {
            build::adopt_all(ctx, switch, &mut inherited, from)
        })?;
        if let Some((switch, port)) = inherited.keys().next() {
            let e = internal(format!(
                "a device was handed over for {switch}:{port}, which the state does not have"
            ));
            std::mem::forget(controller);
            return Err(e);
        }
        Ok(controller)
    }

    /// The controller with `state` built, each switch's devices from `open`. With `leak`, a
    /// controller that fails halfway is leaked rather than dropped (its devices were handed
    /// over: closing them could disturb the weftd that goes on serving them).
    fn build(
        pool: WorkerPool,
        paths: DevicePaths,
        mut state: State,
        leak: bool,
        mut open: impl FnMut(
            crate::devices::OpenContext<'_>,
            &SwitchState,
        ) -> Result<Vec<build::Opened>, ControlError>,
    ) -> Result<Controller, ControlError> {
        crate::model::validate::state(&state)?;
        state.switches.sort_by(|a, b| a.name.cmp(&b.name));
        let mut controller = Controller {
            state: State {
                version: state.version,
                switches: Vec::new(),
            },
            switches: BTreeMap::new(),
            pool,
            state_path: paths.state_file,
            vhost: paths.vhost,
            files: ClientFiles::default(),
            captures: capture::Captures::default(),
            upcalls: upcalls::Upcalls::default(),
            directory: None,
            taps: paths.taps,
            fd_store: None,
        };
        for switch in state.switches {
            let built = open(controller.open_ctx(&switch.name), &switch).and_then(|devices| {
                let workers = controller.lane_workers(&switch)?;
                controller.install(
                    &switch,
                    devices.into_iter().map(build::Source::Opened).collect(),
                    workers,
                )
            });
            if let Err(e) = built {
                if leak {
                    std::mem::forget(controller);
                }
                return Err(e);
            }
            controller.state.switches.push(switch);
        }
        Ok(controller)
    }

    /// The configuration.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The state file.
    pub fn state_path(&self) -> &std::path::Path {
        &self.state_path
    }

    /// [`handle`](Self::handle) with the files the request names read already (before the
    /// lock: [`ClientFiles::prefetch`]).
    pub fn handle_with_files(
        &mut self,
        request: Request,
        session: &mut Session,
        files: ClientFiles,
    ) -> Result<Response, ControlError> {
        self.files = files;
        let answer = self.handle(request, session);
        self.files = ClientFiles::default();
        answer
    }

    /// Answers one request. `session` is the connection's: the captures it started end
    /// with it. systemd's file descriptor store, when weftd has one, then holds a record
    /// of every port's device as it is now.
    pub fn handle(
        &mut self,
        request: Request,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        self.upcalls.end_idle(std::time::Instant::now());
        let answer = self.answer(request, session);
        self.sync_fd_store();
        answer
    }

    fn answer(
        &mut self,
        request: Request,
        session: &mut Session,
    ) -> Result<Response, ControlError> {
        match request {
            Request::Hello {} => Ok(Response::Hello {
                daemon_version: env!("CARGO_PKG_VERSION").to_string(),
                protocol_version: weft_control::PROTOCOL_VERSION,
                pid: Some(std::process::id()),
            }),
            Request::SwitchAdd { name, settings } => self.switch_add(name, settings),
            Request::SwitchDel { name, force } => self.switch_del(&name, force),
            Request::SwitchList {} => self.switch_list(),
            Request::PortAdd {
                switch,
                name,
                kind,
                options,
                create_switch,
            } => self.port_add_creating(&switch, name, kind, options, create_switch),
            Request::PortDel { switch, name } => self.port_del(&switch, &name),
            Request::PortSet {
                switch,
                name,
                options,
            } => self.port_set(&switch, &name, options),
            Request::PortList { switch } => self.port_list(switch.as_deref()),
            Request::PortShow { switch, name } => self.port_show(&switch, &name),
            Request::FdbShow { switch, vlan, port } => {
                self.fdb_show(&switch, vlan, port.as_deref())
            }
            Request::FdbAdd {
                switch,
                vlan,
                mac,
                port,
            } => self.fdb_add(&switch, vlan, mac, &port),
            Request::FdbDel { switch, vlan, mac } => self.fdb_del(&switch, vlan, mac),
            Request::FdbFlush {
                switch,
                port,
                vlan,
                dynamic_only,
            } => self.fdb_flush(&switch, port.as_deref(), vlan, dynamic_only),
            Request::RemoteMacAdd {
                switch,
                port,
                mac,
                remote,
            } => self.remote_mac_add(&switch, &port, mac, remote),
            Request::RemoteMacDel { switch, port, mac } => self.remote_mac_del(&switch, &port, mac),
            Request::RemoteMacShow { switch, port, mac } => {
                self.remote_mac_show(&switch, &port, mac)
            }
            Request::DirectoryStatus {} => Ok(self.directory_status()),
            Request::RuleAdd { switch, rule } => self.rule_add(&switch, rule),
            Request::RouteAdd {
                switch,
                rule,
                remote,
            } => self.route_add(&switch, rule, remote),
            Request::RuleDel { switch, id } => self.rule_del(&switch, id),
            Request::RuleList { switch } => self.rule_list(&switch),
            Request::Stats { switch } => self.stats(switch.as_deref()),
            Request::CaptureStart {
                switch,
                port,
                direction,
                snaplen,
            } => self.capture_start(&switch, &port, direction, snaplen, session),
            Request::CaptureRead {
                id,
                max,
                wait_ms: _,
            } => self.capture_read(id, max),
            Request::CaptureStop { id } => self.capture_stop(id, session),
            Request::UpcallSubscribe { switch, queue } => {
                self.upcall_subscribe(switch, queue, session)
            }
            Request::UpcallRead {
                id,
                max,
                wait_ms: _,
            } => self.upcall_read(id, max),
            Request::UpcallUnsubscribe { id } => self.upcall_unsubscribe(id, session),
            Request::PacketOut {
                switch,
                output,
                in_port,
                normal,
                frame,
            } => {
                let to = packet_out::To::of(output.as_deref(), in_port.as_deref(), normal)?;
                self.packet_out(&switch, to, &frame)
            }
            Request::ConfigShow {} => Ok(Response::Config {
                state: self.state.clone(),
            }),
            Request::ConfigApply { state, dry_run } => self.config_apply(state, dry_run),
        }
    }

    /// Stops the workers and closes every device (a TAP weft created goes with it). The
    /// state file stays as it is; requests after this fail.
    pub fn shutdown(&mut self) {
        self.release_fd_store();
        self.pool.shutdown();
        self.switches.clear();
    }

    /// Writes `state` to the state file.
    fn save(&self, state: &State) -> Result<(), ControlError> {
        crate::persist::save(&self.state_path, state).map_err(|e| {
            ControlError::new(
                ErrorKind::System,
                format!(
                    "cannot write the state file {}: {e}; nothing was changed",
                    self.state_path.display()
                ),
            )
            .with_hint("check the file system holding the state file (space, permissions)")
        })
    }

    /// Writes `next` to the state file, then makes it the configuration. Returns the
    /// previous one, for [`Controller::revert`].
    fn commit(&mut self, next: State) -> Result<State, ControlError> {
        self.save(&next)?;
        Ok(std::mem::replace(&mut self.state, next))
    }

    /// Goes back to `previous` after a change the data path refused (which validation
    /// should have caught: a bug, logged as one).
    fn revert(&mut self, previous: State, error: &ControlError) {
        tracing::error!(error = %error.message, "a validated change failed on the data path; reverting the configuration");
        if let Err(e) = self.save(&previous) {
            tracing::error!(error = %e.message, "cannot revert the state file");
        }
        self.state = previous;
    }

    /// Commits `next`, then runs `apply`; reverts the configuration if `apply` fails.
    fn commit_then(
        &mut self,
        next: State,
        apply: impl FnOnce(&mut Self) -> Result<(), ControlError>,
    ) -> Result<(), ControlError> {
        let previous = self.commit(next)?;
        if let Err(e) = apply(self) {
            self.revert(previous, &e);
            return Err(e);
        }
        Ok(())
    }

    fn switch_index(&self, name: &str) -> Result<usize, ControlError> {
        self.state
            .switches
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .map_err(|_| no_switch(name))
    }

    fn switch_conf(&self, name: &str) -> Result<&SwitchState, ControlError> {
        self.switch_index(name).map(|i| &self.state.switches[i])
    }

    fn switch_rt(&self, name: &str) -> Result<&SwitchRt, ControlError> {
        self.switches.get(name).ok_or_else(|| no_switch(name))
    }

    fn port_rt(&self, switch: &str, port: &str) -> Result<&PortRt, ControlError> {
        self.switch_rt(switch)?
            .ports
            .get(port)
            .ok_or_else(|| no_port(switch, port))
    }

    /// The configuration with switch `name` replaced by what `change` makes of it.
    fn with_switch(
        &self,
        name: &str,
        change: impl FnOnce(&mut SwitchState) -> Result<(), ControlError>,
    ) -> Result<State, ControlError> {
        let i = self.switch_index(name)?;
        let mut next = self.state.clone();
        change(&mut next.switches[i])?;
        crate::model::validate::switch_state(&next.switches[i])?;
        Ok(next)
    }
}

#[cfg(test)]
mod tests;
