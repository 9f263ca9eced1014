//! `weft remote-mac`: one request each.

use weft_control::Request;

use crate::cli_overlay::RemoteMacCmd;

/// The request of a `weft remote-mac` command.
pub(super) fn request(cmd: &RemoteMacCmd) -> Request {
    match cmd {
        RemoteMacCmd::Add {
            target,
            mac,
            remote,
        } => Request::RemoteMacAdd {
            switch: target.switch.clone(),
            port: target.port.clone(),
            mac: *mac,
            remote: *remote,
        },
        RemoteMacCmd::Del { target, mac } => Request::RemoteMacDel {
            switch: target.switch.clone(),
            port: target.port.clone(),
            mac: *mac,
        },
        RemoteMacCmd::Show { target, mac } => Request::RemoteMacShow {
            switch: target.switch.clone(),
            port: target.port.clone(),
            mac: *mac,
        },
    }
}
