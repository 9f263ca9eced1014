//! A weft switch with TAP ports and one VXLAN port, for benchmarks and trying things out.
//!
//! ```text
//! overlay_switch --vxlan NETNS:LOCAL_IP:REMOTE_IP [--tap NETNS:IFNAME]...
//!                [--af-packet NETNS:IFNAME]... [--vni N] [--mtu N] [--offload on|off]
//!                [--socket-buffer BYTES] [--spin-us N]
//! ```
//!
//! Opens the VXLAN port's sockets in NETNS (`-`: this namespace) on LOCAL_IP:4789 toward
//! REMOTE_IP (every frame goes there: the remote is the only endpoint), creates a TAP named
//! IFNAME in its namespace for each `--tap` (TSO and checksum offload on), attaches the
//! existing interface IFNAME (say one end of a veth pair) in its namespace through an
//! AF_PACKET port (`TPACKET_V3` receive ring, `sendmmsg` transmit, every offload) for each
//! `--af-packet`, prints `ready`, and switches until stdin closes; then prints the switch's
//! and the ports' own counters on stderr. Pin it with `taskset`.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use weft_overlay::{VxlanConfig, VxlanPort};
use weft_packet::Vni;
use weft_switch::{PortOptions, Switch, SwitchConfig};
use weft_tap::{AfPacket, AfPacketOptions, Offloads, PortStats, Tap, TapOptions};
use weft_testlab::runner;

fn usage() -> ! {
    eprintln!(
        "usage: overlay_switch --vxlan NETNS:LOCAL_IP:REMOTE_IP [--tap NETNS:IFNAME]... \
         [--af-packet NETNS:IFNAME]... [--vni N] [--mtu N] [--offload on|off] \
         [--socket-buffer BYTES] [--spin-us N]"
    );
    std::process::exit(2)
}

fn netns(name: &str) -> Option<PathBuf> {
    (name != "-").then(|| weft_tap::netns::named(name))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut taps = Vec::new();
    let mut af_packets = Vec::new();
    let mut vxlan = None;
    let mut vni = 42;
    let mut mtu = None;
    let mut offload = true;
    let mut socket_buffer = None;
    let mut idle = runner::IdlePolicy::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--tap" => {
                let (ns, name) = value.split_once(':').unwrap_or_else(|| usage());
                taps.push((netns(ns), name.to_string()));
            }
            "--af-packet" => {
                let (ns, name) = value.split_once(':').unwrap_or_else(|| usage());
                af_packets.push((netns(ns), name.to_string()));
            }
            "--vxlan" => {
                let mut parts = value.splitn(3, ':');
                let (Some(ns), Some(local), Some(remote)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    usage()
                };
                let local: IpAddr = local.parse().unwrap_or_else(|_| usage());
                let remote: IpAddr = remote.parse().unwrap_or_else(|_| usage());
                vxlan = Some((netns(ns), local, remote));
            }
            "--vni" => vni = u32::try_from(number()).unwrap_or_else(|_| usage()),
            "--mtu" => mtu = Some(usize::try_from(number()).unwrap_or_else(|_| usage())),
            "--offload" => offload = value == "on",
            "--socket-buffer" => {
                socket_buffer = Some(usize::try_from(number()).unwrap_or_else(|_| usage()));
            }
            "--spin-us" => idle.spin_us = number(),
            _ => usage(),
        }
    }
    let (ns, local, remote) = vxlan.unwrap_or_else(|| usage());
    let mut config = VxlanConfig::new(SocketAddr::new(local, 0), Vni::new(vni)?).remote(remote);
    config.netns = ns;
    config.offload = offload;
    if let Some(m) = mtu {
        config.mtu = m;
    }
    if let Some(b) = socket_buffer {
        config.socket_buffer = b;
    }
    let mut switch = Switch::new("overlay", SwitchConfig::default())?;
    let (rx, tx, stats) = VxlanPort::open(&config)?.split();
    let vx = switch.add_port(
        "vxlan",
        Some(Box::new(rx)),
        Box::new(tx),
        PortOptions::default(),
    )?;
    let mut watched = vec![(
        "vxlan".to_string(),
        switch.port_counters(vx).ok_or("counters")?,
    )];
    let mut port_stats: Vec<(String, std::sync::Arc<PortStats>)> = Vec::new();
    for (ns, name) in &taps {
        let mut options = TapOptions::new(name).offloads(Offloads::ALL);
        options.netns = ns.clone();
        options.mtu = u32::try_from(config.mtu).ok();
        let (trx, ttx, tstats) = Tap::open(&options)?.into_queues().remove(0).split();
        let id = switch.add_port(
            name,
            Some(Box::new(trx)),
            Box::new(ttx),
            PortOptions::default(),
        )?;
        watched.push((name.clone(), switch.port_counters(id).ok_or("counters")?));
        port_stats.push((name.clone(), tstats));
    }
    for (ns, name) in &af_packets {
        let mut options = AfPacketOptions::new(name).offloads(Offloads::ALL);
        options.netns = ns.clone();
        let port = AfPacket::open(&options)?;
        if port.mtu() > config.mtu {
            return Err(format!(
                "{name}: MTU {} is above the overlay's inner MTU {}",
                port.mtu(),
                config.mtu
            )
            .into());
        }
        // Without PACKET_IGNORE_OUTGOING the port skips its own frames itself (counted in
        // rx_own_skipped); say which, since the two cost differently per frame.
        println!(
            "af-packet {name}: mtu {} kernel_ignores_outgoing {}",
            port.mtu(),
            port.kernel_ignores_outgoing()
        );
        let (arx, atx, astats) = port.split();
        let id = switch.add_port(
            name,
            Some(Box::new(arx)),
            Box::new(atx),
            PortOptions::default(),
        )?;
        watched.push((name.clone(), switch.port_counters(id).ok_or("counters")?));
        port_stats.push((name.clone(), astats));
    }
    let worker = runner::SwitchThread::spawn(switch, Vec::new(), idle);
    println!("ready mtu {}", config.mtu);
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(worker.stop());
    for (name, counters) in watched {
        eprintln!("{name}: switch {:?}", counters.snapshot());
    }
    eprintln!("vxlan: port {:?}", stats.snapshot());
    for (name, stats) in port_stats {
        eprintln!("{name}: port {:?}", stats.snapshot());
    }
    Ok(())
}
