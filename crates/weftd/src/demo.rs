//! `weftd demo`: a demonstration of the switch core without any device: switch `br0` with
//! in-memory ports, each sending unicast frames to the next; the bridge learns, stops
//! flooding, and the counters show it.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use weft_packet::MacAddr;
use weft_switch::memory_port::replay_port;
use weft_switch::{PortCaps, PortOptions, SwitchConfig, SwitchRegistry, Timestamp};

/// Options of `weftd demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Ports on the switch (2 to 256).
    #[arg(long, default_value_t = 4)]
    ports: usize,
    /// Frames to send in total.
    #[arg(long, default_value_t = 2_000_000)]
    frames: u64,
    /// Frame size in bytes, Ethernet header included (60 to 1514).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Frames per batch (1 to 1024).
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

fn station(i: usize) -> MacAddr {
    let [_, _, _, _, _, _, hi, lo] = i.to_be_bytes();
    MacAddr([0x02, 0x00, 0x00, 0x00, hi, lo])
}

fn unicast_frame(dst: MacAddr, src: MacAddr, size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// Runs the demo and prints its counters.
pub fn run(args: &DemoArgs) -> Result<()> {
    if !(2..=256).contains(&args.ports) {
        bail!("--ports {} is out of range: use 2 to 256", args.ports);
    }
    if !(60..=1514).contains(&args.size) {
        bail!("--size {} is out of range: use 60 to 1514 bytes", args.size);
    }
    let config = SwitchConfig {
        batch_size: args.batch,
        ..SwitchConfig::default()
    };
    let mut registry = SwitchRegistry::new(config.clone());
    registry
        .create("br0", config)
        .context("creating switch br0")?;
    for i in 0..args.ports {
        let to = station((i + 1) % args.ports);
        let frames = vec![unicast_frame(to, station(i), args.size)];
        let (rx, tx) = replay_port(frames, PortCaps::plain(1500));
        registry
            .add_port(
                &format!("br0:p{i}"),
                Some(Box::new(rx)),
                Box::new(tx),
                PortOptions::default(),
            )
            .with_context(|| format!("adding port p{i}"))?;
    }
    let sw = registry.get_mut("br0").context("switch br0 vanished")?;
    let ids: Vec<_> = sw.ports().map(|(id, _)| id).collect();

    println!(
        "weft demo: switch br0, {} in-memory ports, {} frames of {} B, batch {}",
        args.ports, args.frames, args.size, args.batch
    );
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < args.frames {
        let now = Timestamp(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        for id in &ids {
            sent += sw.poll(*id, now) as u64;
        }
    }
    let secs = start.elapsed().as_secs_f64();

    println!(
        "\n{:<6} {:>12} {:>12} {:>10}",
        "port", "rx pkts", "tx pkts", "drops"
    );
    for (id, name) in sw.ports() {
        let c = sw.port_counters(id).context("port counters")?.snapshot();
        println!(
            "{name:<6} {:>12} {:>12} {:>10}",
            c.rx_packets,
            c.tx_packets,
            c.total_drops()
        );
    }
    println!("\nFDB ({} entries):", sw.fdb().len());
    for e in sw.fdb().entries() {
        println!("  vlan {:<4} {}  port {}", e.vlan, e.mac, e.port);
    }
    #[allow(clippy::cast_precision_loss)]
    let mpps = sent as f64 / secs / 1e6;
    #[allow(clippy::cast_precision_loss)]
    let ns = secs * 1e9 / sent as f64;
    println!("\n{sent} frames in {secs:.3} s: {mpps:.1} Mpps, {ns:.1} ns per frame (one core, copy included)");
    Ok(())
}
