//! `weft-dirload`: the load of `scripts/bench-directory`. Registers simulated hosts (a
//! tunnel endpoint each and MACs behind it) straight into etcd, as a thousand weftd would,
//! then moves MACs between them and times how long each move takes to reach a real weftd's
//! remote FDB (polled over its control socket, one MAC at a time).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use etcd_client::{Client, Txn, TxnOp};
use weft_control::{decode_response, encode_request, Request, RequestEnvelope, Response};
use weft_packet::MacAddr;

#[derive(Parser)]
struct Args {
    /// etcd's client URL.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    endpoint: String,
    /// The directory's key prefix.
    #[arg(long, default_value = "/weft/")]
    prefix: String,
    /// The VNI the simulated hosts carry.
    #[arg(long, default_value_t = 100)]
    vni: u32,
    /// Simulated hosts.
    #[arg(long, default_value_t = 1000)]
    hosts: u32,
    /// MACs behind each.
    #[arg(long, default_value_t = 100)]
    macs: u32,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Writes every simulated host's endpoint and MAC claims.
    Load,
    /// Moves MACs to other simulated hosts, one at a time, timing each until weftd's port
    /// forwards the MAC to its new host.
    Moves {
        /// Moves to time.
        #[arg(long, default_value_t = 1000)]
        count: u32,
        /// weftd's control socket.
        #[arg(long)]
        socket: PathBuf,
        /// The VXLAN port with --directory (`switch:port`).
        #[arg(long, default_value = "br0:vx")]
        port: String,
        /// Longest wait for one move.
        #[arg(long, default_value_t = 10)]
        timeout_secs: u64,
    },
}

/// Simulated host `i`'s tunnel endpoint: 10.128.0.0/9, one address per host.
fn vtep(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a80_0001 + i))
}

/// MAC `j` of simulated host `i` (locally administered, unicast).
fn mac(i: u32, j: u32) -> MacAddr {
    let n = (u64::from(i) << 16) | u64::from(j);
    MacAddr::from_u64(0x0200_0000_0000 | n)
}

fn mac_key(prefix: &str, vni: u32, m: MacAddr, host: u32) -> String {
    let o = m.octets();
    format!(
        "{prefix}vni/{vni}/mac/{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}/sim{host:05}",
        o[0], o[1], o[2], o[3], o[4], o[5]
    )
}

fn claim(vtep: IpAddr, seq: u32) -> String {
    format!(r#"{{"vtep":"{vtep}","seq":{seq}}}"#)
}

async fn load(args: &Args, client: &mut Client) -> Result<()> {
    let started = Instant::now();
    let mut ops = Vec::new();
    let mut written = 0u64;
    for i in 0..args.hosts {
        ops.push(TxnOp::put(
            format!("{}vni/{}/vtep/sim{i:05}", args.prefix, args.vni),
            format!(r#"{{"addr":"{}","port":4789}}"#, vtep(i)),
            None,
        ));
        for j in 0..args.macs {
            ops.push(TxnOp::put(
                mac_key(&args.prefix, args.vni, mac(i, j), i),
                claim(vtep(i), 0),
                None,
            ));
            if ops.len() >= 64 {
                written += ops.len() as u64;
                client
                    .txn(Txn::new().and_then(std::mem::take(&mut ops)))
                    .await?;
            }
        }
    }
    written += ops.len() as u64;
    if !ops.is_empty() {
        client.txn(Txn::new().and_then(ops)).await?;
    }
    println!(
        "loaded {written} keys ({} hosts × {} MACs) in {:.1} s",
        args.hosts,
        args.macs,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One control connection to weftd.
struct Control {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    id: u64,
}

impl Control {
    fn connect(socket: &PathBuf) -> Result<Control> {
        let s = UnixStream::connect(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
        Ok(Control {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
            id: 0,
        })
    }

    fn call(&mut self, request: Request) -> Result<Response> {
        self.id += 1;
        let line = encode_request(&RequestEnvelope {
            version: weft_control::PROTOCOL_VERSION,
            id: self.id,
            token: None,
            request,
        });
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        self.reader.read_line(&mut answer)?;
        let envelope = decode_response(answer.as_bytes()).map_err(|e| anyhow::anyhow!("{e}"))?;
        envelope.result.map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Where the port sends frames for `mac`.
    fn remote_of(&mut self, switch: &str, port: &str, m: MacAddr) -> Result<Option<String>> {
        match self.call(Request::RemoteMacShow {
            switch: switch.to_string(),
            port: port.to_string(),
            mac: Some(m),
        })? {
            Response::RemoteMacs { entries } => Ok(entries.into_iter().next().map(|e| e.remote)),
            other => bail!("unexpected answer {other:?}"),
        }
    }
}

async fn moves(
    args: &Args,
    client: &mut Client,
    count: u32,
    socket: &PathBuf,
    port: &str,
    timeout: Duration,
) -> Result<()> {
    let (switch, port) = port.split_once(':').context("--port is switch:port")?;
    let mut control = Control::connect(socket)?;
    // A simple generator: the k-th move takes MAC (k mod hosts, k / hosts mod macs) from its
    // host to the next host, claiming it with a number one higher.
    let mut latencies = Vec::with_capacity(count as usize);
    let mut state: std::collections::HashMap<(u32, u32), (u32, u32)> = Default::default();
    for k in 0..count {
        let i = k % args.hosts;
        let j = (k / args.hosts) % args.macs;
        let (owner, seq) = *state.get(&(i, j)).unwrap_or(&(i, 0));
        let to = (owner + 1 + k % 7) % args.hosts;
        let m = mac(i, j);
        let started = Instant::now();
        client
            .txn(Txn::new().and_then(vec![
                TxnOp::put(
                    mac_key(&args.prefix, args.vni, m, to),
                    claim(vtep(to), seq + 1),
                    None,
                ),
                TxnOp::delete(mac_key(&args.prefix, args.vni, m, owner), None),
            ]))
            .await?;
        let want = vtep(to).to_string();
        loop {
            if control.remote_of(switch, port, m)?.as_deref() == Some(want.as_str()) {
                break;
            }
            if started.elapsed() > timeout {
                bail!("move {k} of {m} to {want} did not reach weftd within {timeout:?}");
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        latencies.push(started.elapsed());
        state.insert((i, j), (to, seq + 1));
    }
    latencies.sort();
    // The entry at per-mille `p` of the sorted latencies.
    let pct =
        |per_mille: usize| latencies[(latencies.len() * per_mille / 1000).min(latencies.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "moves {} p50_ms {:.1} p99_ms {:.1} max_ms {:.1}",
        latencies.len(),
        ms(pct(500)),
        ms(pct(990)),
        ms(*latencies.last().unwrap_or(&Duration::ZERO))
    );
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let mut client = Client::connect([args.endpoint.as_str()], None)
        .await
        .with_context(|| format!("connecting to etcd at {}", args.endpoint))?;
    match &args.what {
        What::Load => load(&args, &mut client).await,
        What::Moves {
            count,
            socket,
            port,
            timeout_secs,
        } => {
            moves(
                &args,
                &mut client,
                *count,
                socket,
                port,
                Duration::from_secs(*timeout_secs),
            )
            .await
        }
    }
}
