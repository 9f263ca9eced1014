//! A weft switch with TAP and AF_PACKET ports, for benchmarks and trying things out.
//!
//! ```text
//! tap_switch [--tap NETNS:IFNAME]... [--af-packet NETNS:IFNAME]... [--offloads all|csum|none]
//!            [--mtu N] [--queues N] [--spin-us N] [--sleep-ms N]
//! ```
//!
//! Creates a TAP named IFNAME in network namespace NETNS (`ip netns add` names; `-` for the
//! current one) for each `--tap`, opens an AF_PACKET port on the existing interface for each
//! `--af-packet`, prints `ready` on stdout, and switches until stdin closes; then prints
//! every port's counters on stderr. Pin it with `taskset`.

use weft_testlab::runner;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use weft_switch::{PortCounters, PortId, PortOptions, PortRx, Switch, SwitchConfig};
use weft_tap::{AfPacket, AfPacketOptions, Offloads, PortStats, Tap, TapOptions};

struct Args {
    taps: Vec<(Option<PathBuf>, String)>,
    af_packets: Vec<(Option<PathBuf>, String)>,
    offloads: Offloads,
    mtu: Option<u32>,
    queues: usize,
    idle: runner::IdlePolicy,
}

fn usage() -> ! {
    eprintln!(
        "usage: tap_switch [--tap NETNS:IFNAME]... [--af-packet NETNS:IFNAME]... \
         [--offloads all|csum|none] [--mtu N] [--queues N] [--spin-us N] [--sleep-ms N]"
    );
    std::process::exit(2)
}

fn endpoint(v: &str) -> (Option<PathBuf>, String) {
    let Some((ns, name)) = v.split_once(':') else {
        usage()
    };
    let ns = (ns != "-").then(|| weft_tap::netns::named(ns));
    (ns, name.to_string())
}

fn parse() -> Args {
    let mut args = Args {
        taps: Vec::new(),
        af_packets: Vec::new(),
        offloads: Offloads::ALL,
        mtu: None,
        queues: 1,
        idle: runner::IdlePolicy::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        let number = || value.parse::<u32>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--tap" => args.taps.push(endpoint(&value)),
            "--af-packet" => args.af_packets.push(endpoint(&value)),
            "--offloads" => {
                args.offloads = match value.as_str() {
                    "all" => Offloads::ALL,
                    "csum" => Offloads::CSUM_ONLY,
                    "none" => Offloads::NONE,
                    _ => usage(),
                }
            }
            "--mtu" => args.mtu = Some(number()),
            "--queues" => args.queues = number() as usize,
            "--spin-us" => args.idle.spin_us = u64::from(number()),
            "--sleep-ms" => args.idle.sleep_ms = i32::try_from(number()).unwrap_or(20),
            _ => usage(),
        }
    }
    args
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse();
    let mut switch = Switch::new("bench", SwitchConfig::default())?;
    let mut extra: Vec<(PortId, Box<dyn PortRx>)> = Vec::new();
    let mut watched: Vec<(String, Arc<PortCounters>, Vec<Arc<PortStats>>)> = Vec::new();
    for (ns, name) in &args.taps {
        let mut options = TapOptions::new(name)
            .offloads(args.offloads)
            .queues(args.queues);
        options.netns = ns.clone();
        options.mtu = args.mtu;
        let tap = Tap::open(&options)?;
        let mut stats = Vec::new();
        let mut rxs = Vec::new();
        let mut txs = Vec::new();
        for q in tap.into_queues() {
            let (rx, tx, s) = q.split();
            rxs.push(rx);
            txs.push(tx);
            stats.push(s);
        }
        let mut rxs = rxs.into_iter();
        let first = rxs.next().map(|rx| Box::new(rx) as Box<dyn PortRx>);
        let tx = txs.into_iter().next().ok_or("no queue")?;
        let id = switch.add_port(name, first, Box::new(tx), PortOptions::default())?;
        extra.extend(rxs.map(|rx| (id, Box::new(rx) as Box<dyn PortRx>)));
        let counters = switch.port_counters(id).ok_or("counters")?;
        watched.push((name.clone(), counters, stats));
    }
    for (ns, name) in &args.af_packets {
        let mut options = AfPacketOptions::new(name).offloads(args.offloads);
        options.netns = ns.clone();
        let (rx, tx, stats) = AfPacket::open(&options)?.split();
        let id = switch.add_port(
            name,
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )?;
        let counters = switch.port_counters(id).ok_or("counters")?;
        watched.push((name.clone(), counters, vec![stats]));
    }
    let worker = runner::SwitchThread::spawn(switch, extra, args.idle);
    println!("ready");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(worker.stop());
    for (name, counters, stats) in watched {
        eprintln!("{name}: switch {:?}", counters.snapshot());
        for (q, s) in stats.iter().enumerate() {
            eprintln!("{name} queue {q}: port {:?}", s.snapshot());
        }
    }
    Ok(())
}
