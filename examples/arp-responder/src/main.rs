//! `weft-arp-responder`: an example controller for weft (VALE's suggestion: answer ARP for
//! known addresses so that ARP broadcasts never flood).
//!
//! Given a table of IPv4 → MAC, it installs one rule on a switch sending every ARP frame to
//! the controller (`arp actions=controller`, priority 60000, cookie 0xa4b), reads the switch's
//! upcalls (`upcall_subscribe` / `upcall_read`, what `weft monitor upcalls` prints), and
//! answers a request for a known address with the owner's reply, sent out of the asking
//! port (`packet_out` with `output`): that broadcast never floods. Everything else its rule
//! sent up — requests for addresses not in the table, replies, gratuitous ARP, frames it
//! cannot read — goes back to the switch by the port it came from, to the learning bridge
//! alone (`packet_out` with `in_port` and `normal`, OpenFlow's NORMAL: it does not meet the
//! rule again), and on as if there were no responder. On exit (Ctrl-C, SIGTERM) it removes
//! its rule; one that could not (killed, or its connection closed by a `weft upgrade`) leaves
//! it, and the next responder removes it before installing its own, so run it under a
//! supervisor that restarts it (systemd `Restart=always`): between the two, ARP is sent up
//! with nobody reading and lost (`weft_switch_upcalls_unclaimed_total`).

mod answer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use weft_cli::client::{default_socket_path, Client, Daemon, Endpoint};
use weft_cli::monitor::{UpcallStream, READ_WAIT};
use weft_control::codec::{hex_decode, hex_encode};
use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};
use weft_control::{Request, Response};

use answer::{answer, parse_entry, Table, Verdict};

/// The cookie of the rule the responder installs (and removes).
const COOKIE: u64 = 0xa4b;

/// Answers ARP requests for known IPv4 addresses on a weft switch.
#[derive(Debug, Parser)]
#[command(
    name = "weft-arp-responder",
    after_help = "EXAMPLES:\n  \
    weft-arp-responder br0 --entry 10.0.0.2=52:54:00:00:00:02 --entry 10.0.0.3=52:54:00:00:00:03\n  \
    weft-arp-responder br0 --table /etc/weft/arp.table   (lines: IPV4 MAC; # comments)"
)]
struct Args {
    /// The switch to answer on.
    switch: String,
    /// An address to answer for: IPV4=MAC (repeat).
    #[arg(long = "entry", value_name = "IPV4=MAC", value_parser = parse_entry)]
    entries: Vec<(std::net::Ipv4Addr, weft_packet::MacAddr)>,
    /// A file of addresses: one `IPV4 MAC` per line, `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    table: Option<PathBuf>,
    /// weftd's control socket [default: weft's].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The rule's priority.
    #[arg(long, default_value_t = 60000)]
    priority: u16,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let table = load_table(&args)?;
    if table.is_empty() {
        bail!("no addresses to answer for: give --entry IPV4=MAC or --table FILE");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let endpoint = Endpoint::Unix(args.socket.clone().unwrap_or_else(default_socket_path));
    let mut client = Client::connect(&endpoint, Duration::from_secs(10))?;
    // Subscribed before the rule exists, so that no ARP is sent up with nobody reading.
    let mut stream = UpcallStream::subscribe(&mut client, Some(args.switch.clone()), None)?;
    // A responder that was killed, or lost its connection in a `weft upgrade`, left its rule:
    // one rule, whatever the restarts.
    let stale = remove_own_rules(&mut client, &args.switch)?;
    if stale > 0 {
        eprintln!("weft-arp-responder: removed {stale} rule(s) an earlier responder left");
    }
    let rule_id = install_rule(&mut client, &args)?;
    eprintln!(
        "weft-arp-responder: answering for {} address(es) on {} (rule {rule_id})",
        table.len(),
        args.switch
    );
    let result = serve(&mut client, &mut stream, &table, &args.switch, &stop);
    // Whatever happened, ARP goes back to the bridge.
    let removed = client.call(Request::RuleDel {
        switch: args.switch.clone(),
        id: rule_id,
    });
    let _ = stream.unsubscribe(&mut client);
    result?;
    removed.context("removing the responder's rule")?;
    Ok(())
}

fn load_table(args: &Args) -> Result<Table> {
    let mut table: Table = BTreeMap::new();
    if let Some(path) = &args.table {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (ip, mac) = parse_entry(line)
                .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), n + 1))?;
            table.insert(ip, mac);
        }
    }
    table.extend(args.entries.iter().copied());
    Ok(table)
}

/// Deletes the rules with the responder's cookie on `switch`; how many.
fn remove_own_rules(client: &mut Client, switch: &str) -> Result<usize> {
    let Response::Rules { rules } = client.call(Request::RuleList {
        switch: switch.to_string(),
    })?
    else {
        bail!("rule_list answered something else");
    };
    let own: Vec<u64> = rules
        .iter()
        .filter(|r| r.rule.cookie == COOKIE)
        .map(|r| r.id)
        .collect();
    for &id in &own {
        client
            .call(Request::RuleDel {
                switch: switch.to_string(),
                id,
            })
            .with_context(|| format!("removing rule {id}, an earlier responder's"))?;
    }
    Ok(own.len())
}

fn install_rule(client: &mut Client, args: &Args) -> Result<u64> {
    let rule = RuleSpec {
        priority: args.priority,
        matches: MatchSpec {
            ethertype: Some(weft_packet::ethernet::ethertype::ARP),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Controller],
        cookie: COOKIE,
    };
    match client.call(Request::RuleAdd {
        switch: args.switch.clone(),
        rule,
    })? {
        Response::RuleAdded { id } => Ok(id),
        other => bail!("rule_add answered {other:?}"),
    }
}

/// What the responder did, printed when it stops.
#[derive(Debug, Default)]
struct Tally {
    answered: u64,
    unknown: u64,
    passed: BTreeMap<&'static str, u64>,
    lost: u64,
}

fn serve(
    client: &mut Client,
    stream: &mut UpcallStream,
    table: &Table,
    switch: &str,
    stop: &AtomicBool,
) -> Result<()> {
    let mut tally = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let (upcalls, lost) = stream.read(client, READ_WAIT)?;
        tally.lost += lost;
        for u in upcalls {
            // Only the switch's own upcalls (the subscription asked for nothing else).
            if u.switch != switch {
                continue;
            }
            let Some(frame) = hex_decode(&u.data) else {
                *tally.passed.entry("bad hex from weftd").or_default() += 1;
                continue;
            };
            if usize::try_from(u.orig_len).unwrap_or(usize::MAX) > frame.len() {
                // Cut at the snap length: not an ARP frame, and not whole to send on.
                *tally
                    .passed
                    .entry("longer than an upcall holds")
                    .or_default() += 1;
                continue;
            }
            let (request, output, in_port, normal) = match answer(table, &frame) {
                Verdict::Reply(reply) => {
                    tally.answered += 1;
                    (reply, Some(u.port.clone()), None, false)
                }
                verdict => {
                    match verdict {
                        Verdict::Unknown(_) => tally.unknown += 1,
                        Verdict::Ignored(why) => *tally.passed.entry(why).or_default() += 1,
                        Verdict::Reply(_) => {}
                    }
                    (frame, None, Some(u.port.clone()), true)
                }
            };
            let sent = client.call(Request::PacketOut {
                switch: switch.to_string(),
                output,
                in_port,
                normal,
                frame: hex_encode(&request),
            });
            // A port that went, a full queue: this one frame is lost, as on a wire.
            if let Err(e) = sent {
                eprintln!("weft-arp-responder: sending on {}: {e}", u.port);
            }
        }
    }
    eprintln!(
        "weft-arp-responder: {} answered, {} for unknown addresses passed on, {} lost, other \
         frames passed on {:?}",
        tally.answered, tally.unknown, tally.lost, tally.passed
    );
    Ok(())
}
