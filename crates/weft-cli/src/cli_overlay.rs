//! The command line of the overlay commands: `weft route` (VNET/P's routing table, kept as
//! flow rules) and `weft remote-mac` (a VXLAN port's remote FDB).

use std::net::{IpAddr, SocketAddr};

use clap::{Args, Subcommand};
use weft_control::state::RemoteMac;
use weft_control::{MacAddr, Vni};

use crate::cli::{parse_mac, parse_port_ref, PortRef};

/// Parses `MAC=IP` (a static remote FDB entry).
pub fn parse_remote_mac(s: &str) -> Result<RemoteMac, String> {
    let Some((mac, remote)) = s.split_once('=') else {
        return Err(format!(
            "'{s}' is not MAC=IP: write the MAC, '=', then the remote endpoint, e.g. \
             52:54:00:00:00:02=192.0.2.2"
        ));
    };
    let mac = parse_mac(mac)?;
    let Ok(remote) = remote.parse() else {
        return Err(format!("'{remote}' is not an IP address (in '{s}')"));
    };
    Ok(RemoteMac { mac, remote })
}

/// Parses an IP address.
pub fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.parse().map_err(|_| {
        format!(
            "'{s}' is not an IP address: write an IPv4 or IPv6 address, e.g. 192.0.2.1 or fd00::1"
        )
    })
}

/// Parses `IP:PORT`.
pub fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not IP:PORT: write an address and a port, e.g. 192.0.2.1:7000 or [fd00::1]:7000")
    })
}

/// Parses a VNI (0 to 16777215).
pub fn parse_vni(s: &str) -> Result<Vni, String> {
    s.parse::<u32>()
        .ok()
        .and_then(|n| Vni::new(n).ok())
        .ok_or_else(|| format!("'{s}' is not a VNI: write a number from 0 to 16777215 (24 bits)"))
}

/// A MAC address or `any`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MacOrAny {
    /// Matches every address.
    Any,
    /// This address.
    Mac(MacAddr),
}

impl MacOrAny {
    /// `Some(mac)`, or `None` for any.
    pub fn mac(&self) -> Option<MacAddr> {
        match self {
            MacOrAny::Any => None,
            MacOrAny::Mac(m) => Some(*m),
        }
    }
}

/// Parses a MAC address or `any`.
pub fn parse_mac_or_any(s: &str) -> Result<MacOrAny, String> {
    if s.eq_ignore_ascii_case("any") {
        return Ok(MacOrAny::Any);
    }
    parse_mac(s).map(MacOrAny::Mac)
}

/// The source and destination a route matches.
#[derive(Debug, Args, Clone, PartialEq, Eq)]
pub struct RouteMatchArgs {
    /// Source MAC, or `any`.
    #[arg(long, value_name = "MAC|any", default_value = "any", value_parser = parse_mac_or_any)]
    pub src: MacOrAny,
    /// Destination MAC, or `any`.
    #[arg(long, value_name = "MAC|any", default_value = "any", value_parser = parse_mac_or_any)]
    pub dst: MacOrAny,
}

/// `weft route ...`: routes by (source MAC, destination MAC) to a port, as flow rules tagged
/// with the route cookie (so `weft rule list` shows them too).
#[derive(Debug, Subcommand)]
pub enum RouteCmd {
    /// Add a route: frames from --src to --dst go out --to.
    #[command(after_help = "EXAMPLES:\n  \
        weft route add br0 --dst 52:54:00:00:00:02 --to vm2\n  \
        weft route add br0 --src 52:54:00:00:00:01 --dst any --to vx --priority 200\n  \
        weft route add br0 --dst 52:54:00:00:00:09 --to vx --remote 192.0.2.3\n\n\
        A route to a VXLAN port with several remotes goes where the port's remote FDB says \
        for the destination MAC; --remote (needs --dst MAC) sets that entry too (weft \
        remote-mac add), so it holds for every source. The route and the entry go in \
        together or not at all.")]
    Add {
        /// The switch.
        switch: String,
        /// What the route matches.
        #[command(flatten)]
        matches: RouteMatchArgs,
        /// The port frames go out of.
        #[arg(long, value_name = "PORT")]
        to: String,
        /// For a VXLAN port: the remote endpoint the destination MAC lives behind.
        #[arg(long, value_name = "IP", value_parser = parse_ip)]
        remote: Option<IpAddr>,
        /// Higher wins over lower (and over other rules of lower priority).
        #[arg(long, value_name = "N", default_value_t = 100)]
        priority: u16,
    },
    /// Delete routes: by id, or every route with this source and destination.
    #[command(
        after_help = "EXAMPLES:\n  weft route del br0 --dst 52:54:00:00:00:02\n  \
        weft route del br0 --id 7"
    )]
    Del {
        /// The switch.
        switch: String,
        /// The route's rule id (from `weft route list`).
        #[arg(long, value_name = "ID", conflicts_with_all = ["src", "dst"])]
        id: Option<u64>,
        /// Which routes.
        #[command(flatten)]
        matches: RouteMatchArgs,
    },
    /// List the routes (only the rules added as routes), in lookup order.
    #[command(alias = "ls", after_help = "EXAMPLES:\n  weft route list br0")]
    List {
        /// The switch.
        switch: String,
    },
}

/// `weft directory ...`.
#[derive(Debug, Subcommand)]
pub enum DirectoryCmd {
    /// Whether weftd is connected to etcd, the revision it has seen, its entries by kind,
    /// what it refused and its last error.
    #[command(after_help = "EXAMPLES:\n  weft directory status\n  weft --json directory status")]
    Status,
}

/// `weft remote-mac ...`: a VXLAN port's remote FDB (MAC → remote endpoint).
#[derive(Debug, Subcommand)]
pub enum RemoteMacCmd {
    /// Add (or move) a static entry: frames to MAC go to REMOTE only.
    #[command(after_help = "EXAMPLES:\n  weft remote-mac add br0:vx 52:54:00:00:00:02 192.0.2.2")]
    Add {
        /// The VXLAN port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
        /// The MAC address.
        #[arg(value_parser = parse_mac)]
        mac: MacAddr,
        /// The remote endpoint (one of the port's remotes, unless it learns).
        #[arg(value_parser = parse_ip)]
        remote: IpAddr,
    },
    /// Remove an entry (static, or learned: it comes back with the next frame). A directory
    /// entry changes in the directory; a static one overrides it.
    #[command(after_help = "EXAMPLES:\n  weft remote-mac del br0:vx 52:54:00:00:00:02")]
    Del {
        /// The VXLAN port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
        /// The MAC address.
        #[arg(value_parser = parse_mac)]
        mac: MacAddr,
    },
    /// List the entries and their source: static, directory (from the directory, not
    /// saved) or learned.
    #[command(
        alias = "list",
        after_help = "EXAMPLES:\n  weft remote-mac show br0:vx\n  weft remote-mac show br0:vx 52:54:00:00:00:02"
    )]
    Show {
        /// The VXLAN port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
        /// Only this MAC's entry.
        #[arg(value_name = "MAC", value_parser = parse_mac)]
        mac: Option<MacAddr>,
    },
}
