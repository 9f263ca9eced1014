//! Ports put on an in-process switch the way the end-to-end tests need them: the halves of
//! any port under a name, and a TAP opened inside a namespace with an address there.

use weft_switch::{PortId, PortOptions, PortRx, PortTx, Switch};
use weft_tap::{Tap, TapOptions};

use crate::lab::{self, Netns};

/// Adds a port's halves to `switch` as `name`, with default options.
pub fn add_port(
    switch: &mut Switch,
    name: &str,
    rx: impl PortRx + 'static,
    tx: impl PortTx + 'static,
) -> PortId {
    switch
        .add_port(
            name,
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
        .unwrap_or_else(|e| panic!("add port {name}: {e}"))
}

/// Opens a TAP (a fresh name) inside `ns`, with the options `options` adds to the name and
/// namespace; gives it the address `cidr` there, brings it up, and adds its one queue to
/// `switch` under the TAP's name. Returns that name.
pub fn add_tap(
    switch: &mut Switch,
    ns: &Netns,
    cidr: &str,
    options: impl FnOnce(TapOptions) -> TapOptions,
) -> String {
    let name = lab::unique("tap");
    let tap = Tap::open(&options(TapOptions::new(&name).netns(ns.path())))
        .unwrap_or_else(|e| panic!("open TAP {name}: {e}"));
    ns.ip(&["addr", "add", cidr, "dev", &name]);
    ns.ip(&["link", "set", &name, "up"]);
    let (rx, tx, _stats) = tap.into_queues().remove(0).split();
    add_port(switch, &name, rx, tx);
    name
}
