//! From parsed arguments to what to do: most commands are one request ([`plan`] builds it
//! without touching a socket, so it is tested directly); a few need several ([`Plan`]).

mod config;
mod port;
mod remote_mac;
pub mod route;
mod rule;
mod run;

use std::path::Path;

use weft_control::state::SwitchSettings;
use weft_control::Request;

use crate::cli::{
    CaptureArgs, Command, ConfigCmd, FdbCmd, PortCmd, RuleCmd, SwitchAddArgs, SwitchCmd, TopArgs,
};
use crate::error::CliError;

pub use port::{port_add_request, updated_settings, PortChanges};
pub use run::{connect, port_set, run, unexpected};

/// What a command does.
#[derive(Debug)]
pub enum Plan<'a> {
    /// Send one request, print its answer.
    Call(Request),
    /// Read the port's options, change the ones given, send `port_set`.
    PortSet {
        /// Switch.
        switch: String,
        /// Port.
        port: String,
        /// What to change.
        changes: PortChanges,
    },
    /// `weft route ...`: rules read, added or deleted as routes.
    Route(&'a crate::cli_overlay::RouteCmd),
    /// `weft top`.
    Top(&'a TopArgs),
    /// `weft capture`.
    Capture(&'a CaptureArgs),
    /// `weft monitor upcalls`.
    MonitorUpcalls(&'a crate::cli::MonitorUpcallsArgs),
    /// `weft completions`.
    Completions(clap_complete::Shell),
    /// `weft version`.
    Version,
    /// `weft upgrade`.
    Upgrade(&'a crate::upgrade::UpgradeArgs),
}

/// The plan for a command; reads files named on the command line (rules, states).
pub fn plan(command: &Command) -> Result<Plan<'_>, CliError> {
    let call = |r| Ok(Plan::Call(r));
    match command {
        Command::Switch(SwitchCmd::Add(args)) => call(switch_add_request(args)),
        Command::Switch(SwitchCmd::Del { name, force }) => call(Request::SwitchDel {
            name: name.clone(),
            force: *force,
        }),
        Command::Switch(SwitchCmd::List) => call(Request::SwitchList {}),
        Command::Port(PortCmd::Add {
            target,
            kind,
            no_create_switch,
        }) => call(port_add_request(target, kind, !no_create_switch)?),
        Command::Port(PortCmd::Set { target, options }) => Ok(Plan::PortSet {
            switch: target.switch.clone(),
            port: target.port.clone(),
            changes: PortChanges::from_args(options)?,
        }),
        Command::Port(PortCmd::Del { target }) => call(Request::PortDel {
            switch: target.switch.clone(),
            name: target.port.clone(),
        }),
        Command::Port(PortCmd::List { switch }) => call(Request::PortList {
            switch: switch.clone(),
        }),
        Command::Port(PortCmd::Show { target }) => call(Request::PortShow {
            switch: target.switch.clone(),
            name: target.port.clone(),
        }),
        Command::Fdb(cmd) => call(fdb_request(cmd)),
        Command::Rule(RuleCmd::Add {
            switch,
            rule,
            json_rule,
        }) => call(Request::RuleAdd {
            switch: switch.clone(),
            rule: rule::rule_from_args(rule.as_deref(), json_rule.as_deref())?,
        }),
        Command::Rule(RuleCmd::Del { switch, id }) => call(Request::RuleDel {
            switch: switch.clone(),
            id: *id,
        }),
        Command::Rule(RuleCmd::List { switch }) => call(Request::RuleList {
            switch: switch.clone(),
        }),
        Command::Route(cmd) => Ok(Plan::Route(cmd)),
        Command::RemoteMac(cmd) => call(remote_mac::request(cmd)),
        Command::Directory(crate::cli_overlay::DirectoryCmd::Status) => {
            call(Request::DirectoryStatus {})
        }
        Command::Stats { switch } => call(Request::Stats {
            switch: switch.clone(),
        }),
        Command::Top(args) => Ok(Plan::Top(args)),
        Command::Capture(args) => Ok(Plan::Capture(args)),
        Command::Monitor(crate::cli::MonitorCmd::Upcalls(args)) => Ok(Plan::MonitorUpcalls(args)),
        Command::PacketOut(args) => call(Request::PacketOut {
            switch: args.switch.clone(),
            output: args.port.clone(),
            in_port: args.in_port.clone(),
            normal: args.normal,
            frame: args.frame.clone(),
        }),
        Command::Config(ConfigCmd::Show) => call(Request::ConfigShow {}),
        Command::Config(ConfigCmd::Apply { file, dry_run }) => call(Request::ConfigApply {
            state: config::read_state(file)?,
            dry_run: *dry_run,
        }),
        Command::Completions { shell } => Ok(Plan::Completions(*shell)),
        Command::Hello => call(Request::Hello {}),
        Command::Version => Ok(Plan::Version),
        Command::Upgrade(args) => Ok(Plan::Upgrade(args)),
    }
}

fn switch_add_request(args: &SwitchAddArgs) -> Request {
    let d = SwitchSettings::default();
    Request::SwitchAdd {
        name: args.name.clone(),
        settings: SwitchSettings {
            batch_size: args.batch.unwrap_or(d.batch_size),
            fdb_max_entries: args.fdb_max.unwrap_or(d.fdb_max_entries),
            fdb_max_per_port: args.fdb_per_port.unwrap_or(d.fdb_max_per_port),
            fdb_ageing_secs: args.ageing.unwrap_or(d.fdb_ageing_secs),
            max_rules: args.max_rules.unwrap_or(d.max_rules),
            flow_cache_capacity: args.cache.unwrap_or(d.flow_cache_capacity),
            lanes: args.lanes.unwrap_or(d.lanes),
            mac_move_limit: args.mac_move_limit.unwrap_or(d.mac_move_limit),
            mac_move_hold_secs: args.mac_move_hold.unwrap_or(d.mac_move_hold_secs),
        },
    }
}

fn fdb_request(cmd: &FdbCmd) -> Request {
    match cmd {
        FdbCmd::Show { switch, vlan, port } => Request::FdbShow {
            switch: switch.clone(),
            vlan: *vlan,
            port: port.clone(),
        },
        FdbCmd::Add {
            switch,
            mac,
            port,
            vlan,
        } => Request::FdbAdd {
            switch: switch.clone(),
            vlan: *vlan,
            mac: *mac,
            port: port.clone(),
        },
        FdbCmd::Del { switch, mac, vlan } => Request::FdbDel {
            switch: switch.clone(),
            vlan: *vlan,
            mac: *mac,
        },
        FdbCmd::Flush {
            switch,
            port,
            vlan,
            dynamic,
        } => Request::FdbFlush {
            switch: switch.clone(),
            port: port.clone(),
            vlan: *vlan,
            dynamic_only: *dynamic,
        },
    }
}

/// Reads a file named on the command line, `-` meaning stdin.
fn read_input(path: &Path) -> Result<String, CliError> {
    use std::io::Read;
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| CliError::io("reading stdin", e))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::io(format!("reading {}", path.display()), e))
    }
}

#[cfg(test)]
mod tests;
