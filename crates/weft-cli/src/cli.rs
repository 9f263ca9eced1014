//! The command line, as clap types. Mapping to requests lives in [`crate::commands`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use weft_control::state::XdpAttach;
use weft_control::{MacAddr, Vni};

use crate::cli_policy::PortPolicyArgs;
use crate::rule_syntax::SYNTAX_HELP;

const MAIN_HELP: &str = "\
EXAMPLES:
  weft switch add br1 --ageing 600
  weft port add br1:vm1 tap --access 10
  weft port add br1:up af-packet --ifname eth1 --trunk 10,20 --native 1
  weft port add br1:vm2 vhost-user --vhost-socket /run/weft/vhost/vm2.sock
  weft port add br1:vx vxlan --local 192.0.2.1 --vni 42 --remote 192.0.2.2
  weft fdb add br1 52:54:00:00:00:01 vm1 --vlan 10
  weft rule add br1 'priority=10,in_port=vm1,tcp,tp_dst=80 actions=output:up'
  weft top
  weft capture br1:vm1 -w vm1.pcap -c 100
  weft --json config show > weft.json && weft config apply weft.json --dry-run

THE DAEMON:
  weft talks to weftd over its control socket: --socket PATH, else $WEFT_SOCKET, else
  /run/weft/weftd.sock as root and $XDG_RUNTIME_DIR/weft/weftd.sock otherwise. With
  --connect HOST:PORT --token-file FILE it uses weftd's TCP listener instead.

EXIT CODES:
  0  success
  1  local failure (a file could not be read or written)
  2  usage: the command line is wrong (options, SWITCH:PORT, rule syntax, MAC address)
  3  not found: no such switch, port, rule, FDB entry or capture
  4  refused: invalid content, name exists already, limit reached, invalid input file
  5  cannot connect to weftd, or permission denied
  6  weftd failed: internal or system error, protocol mismatch, no answer in time";

/// weft: control the weft virtual switch daemon (weftd).
#[derive(Debug, Parser)]
#[command(name = "weft", version, after_help = MAIN_HELP, propagate_version = true)]
pub struct Cli {
    /// Options for every command.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options for every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print machine-readable JSON (the daemon's answer) instead of tables.
    #[arg(help_heading = "Global options", long, global = true)]
    pub json: bool,
    /// weftd's control socket [default: /run/weft/weftd.sock as root, else $XDG_RUNTIME_DIR/weft/weftd.sock].
    #[arg(
        help_heading = "Global options",
        long,
        global = true,
        env = "WEFT_SOCKET",
        value_name = "PATH"
    )]
    pub socket: Option<PathBuf>,
    /// Use weftd's TCP listener instead of the socket (needs --token-file).
    #[arg(
        help_heading = "Global options",
        long,
        global = true,
        value_name = "HOST:PORT",
        requires = "token_file"
    )]
    pub connect: Option<String>,
    /// File holding the TCP listener's token.
    #[arg(
        help_heading = "Global options",
        long,
        global = true,
        value_name = "FILE"
    )]
    pub token_file: Option<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(help_heading = "Global options", long, global = true, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
    pub timeout: Duration,
}

/// Seconds as a decimal number, from a millisecond to about 31 years.
pub fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if secs.is_nan() || secs < 0.001 {
        return Err(format!("'{s}' is too short: give at least 0.001 seconds"));
    }
    if secs > 1e9 {
        return Err(format!("'{s}' is too long: give at most 1e9 seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{s}' is not a number of seconds"))
}

/// A port, written `SWITCH:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRef {
    /// The switch.
    pub switch: String,
    /// The port.
    pub port: String,
}

/// Parses `SWITCH:PORT`.
pub fn parse_port_ref(s: &str) -> Result<PortRef, String> {
    match s.split_once(':') {
        Some((sw, port)) if !sw.is_empty() && !port.is_empty() => Ok(PortRef {
            switch: sw.to_string(),
            port: port.to_string(),
        }),
        _ => Err(format!(
            "'{s}' is not SWITCH:PORT (e.g. br0:vm1): name the switch, a colon, then the port"
        )),
    }
}

/// Parses `--xdp-attach`.
pub fn parse_xdp_attach(s: &str) -> Result<XdpAttach, String> {
    match s {
        "auto" => Ok(XdpAttach::Auto),
        "native" => Ok(XdpAttach::Native),
        "generic" => Ok(XdpAttach::Generic),
        _ => Err(format!("{s:?}: use auto, native or generic")),
    }
}

/// Parses a MAC address `xx:xx:xx:xx:xx:xx` (only with colons, as `weft` prints them).
pub fn parse_mac(s: &str) -> Result<MacAddr, String> {
    let groups: Vec<&str> = s.split(':').collect();
    let ok = groups.len() == 6
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit()));
    match s.parse() {
        Ok(mac) if ok => Ok(mac),
        _ => Err(format!(
            "'{s}' is not a MAC address: write six hex pairs, e.g. 52:54:00:00:00:01"
        )),
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, delete and list switches.
    #[command(subcommand)]
    Switch(SwitchCmd),
    /// Create, change, delete, list and inspect ports.
    #[command(subcommand)]
    Port(PortCmd),
    /// The forwarding database: learned and static MAC addresses.
    #[command(subcommand)]
    Fdb(FdbCmd),
    /// The flow table.
    #[command(subcommand)]
    Rule(RuleCmd),
    /// Routes by source and destination MAC to a port (flow rules tagged as routes).
    #[command(subcommand)]
    Route(crate::cli_overlay::RouteCmd),
    /// A VXLAN port's remote FDB: which remote endpoint a MAC lives behind.
    #[command(subcommand, name = "remote-mac")]
    RemoteMac(crate::cli_overlay::RemoteMacCmd),
    /// The directory (etcd) where weft hosts find each other's endpoints and MACs.
    #[command(subcommand)]
    Directory(crate::cli_overlay::DirectoryCmd),
    /// Counters per switch and per port (drops by reason), and worker load.
    #[command(after_help = "EXAMPLES:\n  weft stats\n  weft stats br0\n  weft --json stats br0")]
    Stats {
        /// Only this switch.
        switch: Option<String>,
    },
    /// Live per-port packet and bit rates and drops, refreshed in the terminal.
    Top(TopArgs),
    /// Capture a port's packets into a pcap file (for tshark / Wireshark).
    Capture(CaptureArgs),
    /// Watch what weftd hands to a controller.
    #[command(subcommand)]
    Monitor(MonitorCmd),
    /// Send a frame out of a port, or into a switch as if a port had received it (a
    /// controller's answer to an upcall).
    #[command(
        name = "packet-out",
        after_help = "--port sends the frame out of that port exactly as given. --in-port runs \
        it through the switch as if that port had received it: rules and the learning bridge \
        decide where it goes, and its source address is not learned; with --normal the rules \
        are skipped (OpenFlow's NORMAL), so a frame a controller rule sent up goes on as the \
        switch would have sent it. The frame must fit the port's MTU.\n\nEXAMPLES:\n  \
        weft packet-out br0 --port vm1 ffffffffffff0200000000010806...\n  \
        weft packet-out br0 --in-port vm1 ff:ff:ff:ff:ff:ff:02:00:00:00:00:01:08:06:...\n  \
        weft packet-out br0 --in-port vm1 --normal ffffffffffff0200000000010806..."
    )]
    PacketOut(PacketOutArgs),
    /// Show or apply the whole configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Print a shell completion script.
    #[command(
        after_help = "EXAMPLES:\n  weft completions bash > /etc/bash_completion.d/weft\n  \
                            weft completions zsh > ~/.zfunc/_weft\n  \
                            weft completions fish > ~/.config/fish/completions/weft.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Replace the running weftd with a new binary without a traffic gap: the new weftd
    /// takes over every port (TAP devices, vhost-user connections, sockets, learned
    /// addresses); if it cannot, the running one carries on.
    #[command(
        after_help = "EXAMPLES:\n  weft upgrade\n  weft upgrade --weftd /usr/local/bin/weftd.new\n\n\
        Runs on weftd's host, as root, over the Unix control socket. Under systemd, \
        ExecReload=weft upgrade makes `systemctl reload weftd` do it (see docs/weftd.service)."
    )]
    Upgrade(crate::upgrade::UpgradeArgs),
    /// Ask weftd for its version and protocol.
    Hello,
    /// Print weft's version and weftd's.
    Version,
}

/// `weft switch ...`
#[derive(Debug, Subcommand)]
pub enum SwitchCmd {
    /// Create a switch.
    #[command(
        after_help = "EXAMPLES:\n  weft switch add br1\n  weft switch add br1 --batch 128 --fdb-max 65536 --ageing 600\n  \
            weft switch add br1 --lanes 2   # two workers, each polling its share of the \
            ports' queue pairs\n                                  \
            (weftd needs [workers] count = 2 or more)"
    )]
    Add(SwitchAddArgs),
    /// Delete a switch.
    #[command(after_help = "EXAMPLES:\n  weft switch del br1\n  weft switch del br1 --force")]
    Del {
        /// The switch.
        name: String,
        /// Delete its ports too.
        #[arg(long)]
        force: bool,
    },
    /// List switches.
    #[command(alias = "ls")]
    List,
}

/// `weft switch add`.
#[derive(Debug, Args)]
pub struct SwitchAddArgs {
    /// Name (1 to 32 of A-Z a-z 0-9 - _ .).
    pub name: String,
    /// Frames per batch (1 to 1024) [default: 128].
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// Most FDB entries [default: 8192].
    #[arg(long, value_name = "N")]
    pub fdb_max: Option<usize>,
    /// Most learned FDB entries per port [default: 1024].
    #[arg(long, value_name = "N")]
    pub fdb_per_port: Option<usize>,
    /// FDB ageing time [default: 300].
    #[arg(long, value_name = "SECS")]
    pub ageing: Option<u64>,
    /// Most flow rules [default: 4096].
    #[arg(long, value_name = "N")]
    pub max_rules: Option<usize>,
    /// Flow cache entries [default: 4096].
    #[arg(long, value_name = "N")]
    pub cache: Option<usize>,
    /// Worker threads running the switch at once, each polling its share of the ports'
    /// queue pairs (1 to 16, at most weftd's workers) [default: 1].
    #[arg(long, value_name = "N")]
    pub lanes: Option<usize>,
    /// MAC flap dampening: a learned MAC that moves between ports more than N times in a
    /// second is held on its port for --mac-move-hold; its frames on other ports are
    /// dropped meanwhile. 0 turns it off [default: 0].
    #[arg(long, value_name = "N")]
    pub mac_move_limit: Option<u32>,
    /// How long a flapping MAC is held, 1 to 3600 [default: 10].
    #[arg(long, value_name = "SECS")]
    pub mac_move_hold: Option<u32>,
}

/// `weft port ...`
#[derive(Debug, Subcommand)]
pub enum PortCmd {
    /// Create a port.
    #[command(after_help = "EXAMPLES:\n  weft port add br0:vm1 tap\n  \
        weft port add br0:vm1 tap --ifname tap-vm1 --netns blue --mtu 9000\n  \
        weft port add br0:vm2 tap --access 10 --no-learning\n  \
        weft port add br0:up af-packet --ifname eth1 --trunk 10,20 --native 1\n  \
        weft port add br0:vm3 vhost-user\n  \
        weft port add br0:vm4 vhost-user --vhost-socket /run/weft/vm4.sock --mtu 9000\n  \
        weft port add br0:vx vxlan --local 192.0.2.1 --vni 42 --remote 192.0.2.2 --remote 192.0.2.3\n  \
        weft port add br0:vx6 vxlan --local fd00::1 --vni 7 --remote-learning --udp-port 8472 --netns under\n  \
        weft port add lab:p1 vhost-user      # creates switch lab if there is none\n\n\
        SWITCHES ON DEMAND:\n  \
        A port added to a switch that does not exist creates it with default settings, as VALE\n  \
        does; a switch created so goes away with its last port (unless rules are left on it).\n  \
        --no-create-switch refuses instead; `weft switch add` makes a switch that stays.")]
    Add {
        /// The port to create.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
        /// Refuse when the switch does not exist, instead of creating it.
        #[arg(long, global = true)]
        no_create_switch: bool,
        /// What the port is.
        #[command(subcommand)]
        kind: PortKindCmd,
    },
    /// Change a port's switch-side options (the ones not given stay as they are).
    #[command(after_help = "EXAMPLES:\n  weft port set br0:vm1 --access 20\n  \
        weft port set br0:up --trunk 10,20,30 --native 1\n  \
        weft port set br0:vm1 --plain --learning\n  \
        weft port set br0:vm1 --allowed-mac 52:54:00:00:00:01 --allowed-ip 10.0.0.5,2001:db8::5\n  \
        weft port set br0:vm1 --storm-broadcast 1000pps --storm-unknown-unicast 1000pps,10mbit\n  \
        weft port set br0:vm1 --mac-limit 4 --mac-limit-action drop\n  \
        weft port set br0:vm1 --no-port-security --no-storm-control --no-mac-limit")]
    Set {
        /// The port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
        /// The options to change.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// Delete a port.
    #[command(after_help = "EXAMPLES:\n  weft port del br0:vm1")]
    Del {
        /// The port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
    },
    /// List ports (of one switch, or of all).
    #[command(
        alias = "ls",
        after_help = "EXAMPLES:\n  weft port list\n  weft port list br0"
    )]
    List {
        /// Only this switch.
        switch: Option<String>,
    },
    /// A port in detail: options, counters, drops by reason.
    #[command(after_help = "EXAMPLES:\n  weft port show br0:vm1")]
    Show {
        /// The port.
        #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
        target: PortRef,
    },
}

/// The kinds of port.
#[derive(Debug, Subcommand)]
pub enum PortKindCmd {
    /// A TAP device (created, or attached to when it exists).
    Tap {
        /// Device name [default: the port name].
        #[arg(long, value_name = "NAME")]
        ifname: Option<String>,
        /// Network namespace (a name under /run/netns) to move the device into.
        #[arg(long, value_name = "NS")]
        netns: Option<String>,
        /// Queues (a multiqueue TAP), 1 to 16: the kernel spreads the host's flows over
        /// them, and a switch on several lanes (`--lanes`) receives each on its own lane.
        #[arg(long, value_name = "N", default_value_t = 1)]
        queues: u16,
        /// MTU of the device.
        #[arg(long, value_name = "N", default_value_t = 1500)]
        mtu: u32,
        /// Do not negotiate checksum and segmentation offloads with the kernel.
        #[arg(long)]
        no_offloads: bool,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// An existing interface (veth or physical) used through an AF_PACKET socket.
    AfPacket {
        /// The interface.
        #[arg(long, value_name = "NAME")]
        ifname: String,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// An existing interface (veth or physical) used through an AF_XDP socket: weftd
    /// attaches an XDP program that hands one receive queue's frames to weft (the other
    /// queues' frames go on to the kernel), zero-copy where the driver allows.
    #[command(
        after_help = "EXAMPLES:\n  weft port add br0:x0 af-xdp --ifname veth0\n  \
        weft port add br0:x1 af-xdp --ifname eth1 --queue 3 --xdp-attach native\n\n\
        One AF_XDP port per interface. Frames of other queues are not seen: steer the \
        traffic to the queue (ethtool -N, or one queue: ethtool -L IFNAME combined 1). \
        No offloads: super-frames toward the port are cut to its MTU first."
    )]
    AfXdp {
        /// The interface.
        #[arg(long, value_name = "NAME")]
        ifname: String,
        /// The receive queue whose frames weft takes.
        #[arg(long, value_name = "Q", default_value_t = 0)]
        queue: u32,
        /// Where the XDP program runs: `native` (in the driver: veth and most NICs),
        /// `generic` (after the kernel made an skb: any driver, slower), `auto` (native where
        /// the driver has it).
        #[arg(long, value_name = "HOW", default_value = "auto", value_parser = parse_xdp_attach)]
        xdp_attach: XdpAttach,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// A vhost-user socket a VM (QEMU, Cloud Hypervisor) or DPDK virtio-user connects to.
    #[command(after_help = "EXAMPLES:\n  weft port add br0:vm1 vhost-user\n  \
        weft port add br0:vm1 vhost-user --vhost-socket /run/weft/vhost/vm1.sock --mtu 9000\n  \
        weft port add br0:vm2 vhost-user --vhost-mode client --vhost-socket /run/qemu/vm2.sock\n  \
        (with vhost_socket_dirs = [\"/run/qemu\"] in weftd.toml)\n\n\
        weft port add br0:vm1 vhost-user --dispatch adaptive --notify optimistic\n\n\
        QEMU: -chardev socket,id=c0,path=SOCKET -netdev vhost-user,id=n0,chardev=c0 \
        -device virtio-net-pci,netdev=n0 (guest memory shared: memory-backend-memfd,share=on)\n\
        DPDK: --vdev=net_virtio_user0,path=SOCKET,server=0")]
    VhostUser {
        /// Socket path [default: RUNTIME_DIR/vhost/SWITCH-PORT.sock] (`--socket` is weftd's
        /// control socket). It must be directly inside RUNTIME_DIR/vhost or a directory
        /// listed in vhost_socket_dirs in weftd.toml, spelled as listed, then one file name
        /// (no `..`, `//` or symlink); weftd refuses any other path.
        #[arg(long, value_name = "PATH")]
        vhost_socket: Option<String>,
        /// Who listens on the socket: weft (`server`), or the VM (`client`: QEMU
        /// `-chardev socket,path=SOCKET,server=on,wait=off`; weft connects, and reconnects
        /// after either side restarts, without a guest reboot).
        #[arg(long, value_enum, value_name = "MODE", default_value_t = VhostModeArg::Server)]
        vhost_mode: VhostModeArg,
        /// MTU of the port.
        #[arg(long, value_name = "N", default_value_t = 1500)]
        mtu: u32,
        /// Who drives the port: guest-driven, switch-driven, adaptive [the default: 1000 and
        /// 10000 frames/s over 5000 µs] or adaptive:LOW_PPS,HIGH_PPS,WINDOW_US.
        #[arg(long, value_name = "MODE")]
        dispatch: Option<weft_control::state::VhostDispatch>,
        /// When the guest is interrupted: immediate [the default], optimistic, coalesced
        /// (32 frames or 50 µs) or coalesced:FRAMES,MAX_DELAY_US.
        #[arg(long, value_name = "POLICY")]
        notify: Option<weft_control::state::VhostNotify>,
        /// Queue pairs to offer (virtio-net multiqueue above 1; the VM asks for as many with
        /// `-netdev vhost-user,queues=N` and `-device virtio-net-pci,mq=on`), 1 to 16.
        #[arg(long, value_name = "N", default_value_t = 1)]
        queues: u16,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// A memif interface: the shared-memory packet interface of VPP, libmemif and DPDK's
    /// net_memif (CNFs and DPDK applications beside the VMs).
    #[command(after_help = "EXAMPLES:\n  weft port add br0:m1 memif --id 0\n  \
        weft port add br0:m1 memif --memif-socket /run/weft/vhost/cnf.sock --id 3 --secret s3cret --queues 2\n  \
        weft port add br0:vpp memif --role client --memif-socket /run/vpp/memif.sock --id 0\n  \
        (with vhost_socket_dirs = [\"/run/vpp\"] in weftd.toml)\n\n\
        DPDK: --vdev=net_memif0,role=client,socket=SOCKET,socket-abstract=no,id=0\n\
        VPP: create memif socket id 1 filename SOCKET; create interface memif socket-id 1 id 0 slave")]
    Memif {
        /// Socket path [default: RUNTIME_DIR/vhost/SWITCH-PORT.memif.sock] (`--socket` is
        /// weftd's control socket). Allowed where vhost-user sockets are: directly inside
        /// RUNTIME_DIR/vhost or a directory in vhost_socket_dirs, then one file name.
        #[arg(long, value_name = "PATH")]
        memif_socket: Option<String>,
        /// The interface id both sides use (DPDK `id=`, VPP `id`).
        #[arg(long, value_name = "N", default_value_t = 0)]
        id: u32,
        /// Who listens: weft (`server`, memif's master: the peer connects and hands over
        /// its memory), or the peer (`client`: weft connects, allocates the memory, and
        /// reconnects after the peer restarts).
        #[arg(long, value_enum, value_name = "ROLE", default_value_t = VhostModeArg::Server)]
        role: VhostModeArg,
        /// A secret the client must present (1 to 23 bytes).
        #[arg(long, value_name = "S")]
        secret: Option<String>,
        /// Queue pairs, 1 to 16 (a server takes as many as its client asks, up to this).
        #[arg(long, value_name = "N", default_value_t = 1)]
        queues: u16,
        /// MTU of the port (larger frames are chained over several buffers).
        #[arg(long, value_name = "N", default_value_t = 1500)]
        mtu: u32,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// A VXLAN tunnel endpoint: one VNI over UDP, head-end replication to the remotes.
    #[command(after_help = "EXAMPLES:\n  \
        weft port add br0:vx vxlan --local 192.0.2.1 --vni 42 --remote 192.0.2.2 --remote 192.0.2.3\n  \
        weft port add br0:vx vxlan --local 192.0.2.1 --vni 42 --remote 192.0.2.2 --remote-mac 52:54:00:00:00:02=192.0.2.2\n  \
        weft port add br0:vx vxlan --local fd00::1 --vni 7 --remote-learning --udp-port 8472 --netns under\n  \
        weft port add br0:vx vxlan --local 192.0.2.1 --vni 42 --directory")]
    Vxlan {
        /// Local endpoint IP address (IPv4 or IPv6).
        #[arg(long, value_name = "IP", value_parser = crate::cli_overlay::parse_ip)]
        local: IpAddr,
        /// The VNI (0 to 16777215).
        #[arg(long, value_name = "N", value_parser = crate::cli_overlay::parse_vni)]
        vni: Vni,
        /// A remote endpoint (repeat for several).
        #[arg(long = "remote", value_name = "IP", value_parser = crate::cli_overlay::parse_ip)]
        remotes: Vec<IpAddr>,
        /// Network namespace (a name under /run/netns) to open the socket in.
        #[arg(long, value_name = "NS")]
        netns: Option<String>,
        /// Learn MAC → endpoint from received traffic and accept endpoints not given with
        /// --remote (`--learning` is the switch-side option).
        #[arg(long)]
        remote_learning: bool,
        /// UDP port [default: 4789].
        #[arg(long, value_name = "N")]
        udp_port: Option<u16>,
        /// A static remote FDB entry MAC=IP: frames to MAC go to that remote only (repeat
        /// for several; change them later with `weft remote-mac`).
        #[arg(long = "remote-mac", value_name = "MAC=IP", value_parser = crate::cli_overlay::parse_remote_mac)]
        remote_macs: Vec<weft_control::state::RemoteMac>,
        /// Seconds a learned remote MAC lives without being seen again (1 to 86400).
        #[arg(
            long,
            value_name = "SECS",
            default_value_t = weft_control::state::DEFAULT_REMOTE_AGEING_SECS,
            value_parser = clap::value_parser!(u32).range(1..=i64::from(weft_control::state::MAX_REMOTE_AGEING_SECS))
        )]
        remote_ageing: u32,
        /// Find the VNI's remote endpoints and MACs in the directory (etcd, weftd's
        /// `[directory]`), and publish this host's endpoint and local MACs there; beside or
        /// instead of --remote.
        #[arg(long)]
        directory: bool,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
    /// A TCP link to another weftd: Ethernet frames in one TCP connection; one end listens,
    /// the other connects (and connects again whenever the connection is lost).
    #[command(after_help = "EXAMPLES:\n  \
        weft port add br0:t1 tcp-link --listen 192.0.2.1:7000\n  \
        weft port add br0:t1 tcp-link --peer 192.0.2.1:7000 --link-id 3 --netns under")]
    TcpLink {
        /// Accept the peer's connections on IP:PORT.
        #[arg(
            long,
            value_name = "IP:PORT",
            required_unless_present = "peer",
            conflicts_with = "peer",
            value_parser = crate::cli_overlay::parse_socket_addr
        )]
        listen: Option<SocketAddr>,
        /// Connect to the peer at IP:PORT. (Not `--connect`, and not the id `connect`: clap
        /// would merge it with the global option naming weftd's own TCP control listener.)
        #[arg(long = "peer", id = "peer", value_name = "IP:PORT", value_parser = crate::cli_overlay::parse_socket_addr)]
        connect: Option<SocketAddr>,
        /// Network namespace (a name under /run/netns) to open the sockets in.
        #[arg(long, value_name = "NS")]
        netns: Option<String>,
        /// The link id both ends agree on (a peer with another one is cut off).
        #[arg(long, value_name = "N", default_value_t = 0)]
        link_id: u32,
        /// MTU of the port.
        #[arg(long, value_name = "N", default_value_t = 1500)]
        mtu: u32,
        /// Segment super-frames and complete checksums before sending, instead of carrying
        /// them across.
        #[arg(long)]
        no_offloads: bool,
        /// A file holding the key both ends share (at least 32 bytes, used raw; make one with
        /// `head -c 32 /dev/urandom > PATH; chmod 600 PATH` and copy it to the peer). Each end
        /// then proves it knows the key when connecting. Without one, anyone who reaches the
        /// link can send into the switch. Frames are not encrypted either way.
        #[arg(long, value_name = "PATH")]
        key_file: Option<std::path::PathBuf>,
        /// Switch-side options.
        #[command(flatten)]
        options: PortOptionArgs,
    },
}

/// Switch-side port options.
#[derive(Debug, Args, Default, PartialEq, Eq)]
pub struct PortOptionArgs {
    /// Access port: untagged on the wire, in this VLAN (1 to 4094).
    #[arg(long, value_name = "VLAN", conflicts_with_all = ["trunk", "plain"])]
    pub access: Option<u16>,
    /// Trunk port: these VLANs tagged on the wire (comma-separated).
    #[arg(
        long,
        value_name = "VLANS",
        value_delimiter = ',',
        num_args = 1,
        conflicts_with = "plain"
    )]
    pub trunk: Option<Vec<u16>>,
    /// With --trunk: the VLAN of untagged frames.
    #[arg(long, value_name = "VLAN", requires = "trunk")]
    pub native: Option<u16>,
    /// No VLAN processing: frames pass as they are (the default).
    #[arg(long)]
    pub plain: bool,
    /// Do not flood unknown unicast to this port.
    #[arg(long, conflicts_with = "flood_unknown")]
    pub no_flood_unknown: bool,
    /// Flood unknown unicast to this port (the default).
    #[arg(long)]
    pub flood_unknown: bool,
    /// Do not learn source addresses seen on this port.
    #[arg(long, conflicts_with = "learning")]
    pub no_learning: bool,
    /// Learn source addresses seen on this port (the default).
    #[arg(long)]
    pub learning: bool,
    /// Port security, storm control and MAC limit.
    #[command(flatten)]
    pub policy: Box<PortPolicyArgs>,
}

/// `weft fdb ...`
#[derive(Debug, Subcommand)]
pub enum FdbCmd {
    /// List FDB entries.
    #[command(
        alias = "list",
        after_help = "EXAMPLES:\n  weft fdb show br0\n  weft fdb show br0 --vlan 10 --port vm1"
    )]
    Show {
        /// The switch.
        switch: String,
        /// Only this VLAN.
        #[arg(long, value_name = "V")]
        vlan: Option<u16>,
        /// Only this port.
        #[arg(long, value_name = "PORT")]
        port: Option<String>,
    },
    /// Add a static entry.
    #[command(
        after_help = "EXAMPLES:\n  weft fdb add br0 52:54:00:00:00:01 vm1\n  weft fdb add br0 52:54:00:00:00:01 up --vlan 10"
    )]
    Add {
        /// The switch.
        switch: String,
        /// The MAC address.
        #[arg(value_parser = parse_mac)]
        mac: MacAddr,
        /// The port it lives behind.
        port: String,
        /// VLAN (0 = none).
        #[arg(long, value_name = "V", default_value_t = 0)]
        vlan: u16,
    },
    /// Remove an entry (static or learned).
    #[command(after_help = "EXAMPLES:\n  weft fdb del br0 52:54:00:00:00:01 --vlan 10")]
    Del {
        /// The switch.
        switch: String,
        /// The MAC address.
        #[arg(value_parser = parse_mac)]
        mac: MacAddr,
        /// VLAN (0 = none).
        #[arg(long, value_name = "V", default_value_t = 0)]
        vlan: u16,
    },
    /// Remove many entries.
    #[command(
        after_help = "EXAMPLES:\n  weft fdb flush br0\n  weft fdb flush br0 --port vm1 --dynamic"
    )]
    Flush {
        /// The switch.
        switch: String,
        /// Only this port's entries.
        #[arg(long, value_name = "PORT")]
        port: Option<String>,
        /// Only this VLAN's entries.
        #[arg(long, value_name = "V")]
        vlan: Option<u16>,
        /// Only learned entries: keep the static ones.
        #[arg(long)]
        dynamic: bool,
    },
}

/// `weft rule ...`
#[derive(Debug, Subcommand)]
pub enum RuleCmd {
    /// Add a flow rule; prints its id.
    #[command(after_long_help = SYNTAX_HELP, after_help = "See --help for the rule syntax.")]
    Add {
        /// The switch.
        switch: String,
        /// The rule, e.g. 'priority=10,in_port=vm1 actions=output:vm2' (see --help).
        #[arg(required_unless_present = "json_rule", conflicts_with = "json_rule")]
        rule: Option<String>,
        /// Read the rule as JSON (the protocol's RuleSpec) from FILE ('-' for stdin).
        #[arg(long, value_name = "FILE")]
        json_rule: Option<PathBuf>,
    },
    /// Delete a rule by id.
    #[command(after_help = "EXAMPLES:\n  weft rule del br0 3")]
    Del {
        /// The switch.
        switch: String,
        /// The rule's id (from `weft rule add` or `weft rule list`).
        id: u64,
    },
    /// List rules with their counters, in lookup order.
    #[command(alias = "ls", after_help = "EXAMPLES:\n  weft rule list br0")]
    List {
        /// The switch.
        switch: String,
    },
}

/// `weft top`.
#[derive(Debug, Args)]
#[command(
    after_help = "Press q or Ctrl-C to quit. When stdout is not a terminal, prints one \
    sample after the interval and exits.\n\nEXAMPLES:\n  weft top\n  weft top br0 --interval 0.5\n  \
    weft --json top --interval 2 > rates.json"
)]
pub struct TopArgs {
    /// Only this switch.
    pub switch: Option<String>,
    /// Seconds between samples.
    #[arg(long, short = 'i', value_name = "SECS", default_value = "1", value_parser = parse_secs)]
    pub interval: Duration,
}

/// Which side of a vhost-user socket weft takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VhostModeArg {
    /// weft creates the socket; the VM connects.
    Server,
    /// The VM creates the socket; weft connects and reconnects.
    Client,
}

/// Which way packets went through the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Direction {
    /// Received from the port.
    In,
    /// Sent to the port.
    Out,
    /// Both.
    Both,
}

/// `weft capture`.
#[derive(Debug, Args)]
#[command(
    after_help = "Stops after -c packets, after --duration, or on Ctrl-C, whichever \
    comes first; then prints how many packets were captured and lost.\n\nEXAMPLES:\n  \
    weft capture br0:vm1 -w vm1.pcap -c 100\n  \
    weft capture br0:up -w up.pcap --direction in --duration 10 --snaplen 128\n  \
    weft capture br0:vm1 -w - | tshark -r -"
)]
pub struct CaptureArgs {
    /// The port.
    #[arg(value_name = "SWITCH:PORT", value_parser = parse_port_ref)]
    pub target: PortRef,
    /// The pcap file to write ('-' for stdout).
    #[arg(short = 'w', long = "write", value_name = "FILE.pcap")]
    pub file: PathBuf,
    /// Stop after this many packets.
    #[arg(short = 'c', long = "count", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Which way.
    #[arg(long, value_enum, default_value_t = Direction::Both)]
    pub direction: Direction,
    /// Bytes kept per packet [default: 65535].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=262_144))]
    pub snaplen: Option<u32>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub duration: Option<Duration>,
}

/// `weft monitor ...`
#[derive(Debug, Subcommand)]
pub enum MonitorCmd {
    /// Print the packets `controller` rule actions send up, one JSON line each (switch,
    /// port, reason, rule cookie and priority, orig_len, data as hex), until Ctrl-C.
    Upcalls(MonitorUpcallsArgs),
}

/// `weft monitor upcalls`.
#[derive(Debug, Args)]
#[command(after_help = "Upcalls come from rules with the controller action \
    (weft rule add br0 'arp actions=controller'). Without a monitor or another controller \
    subscribed, weftd drops them and counts them (weft_switch_upcalls_unclaimed_total). A \
    monitor that falls behind loses upcalls: weftd counts them and weft says so on stderr.\n\n\
    EXAMPLES:\n  \
    weft monitor upcalls\n  \
    weft monitor upcalls br0 --count 10\n  \
    weft monitor upcalls br0 | jq -r '.port + \" \" + .data'\n\n\
    OUTPUT (one line per upcall):\n  \
    {\"switch\":\"br0\",\"port\":\"vm1\",\"reason\":\"action\",\"cookie\":7,\"priority\":100,\"orig_len\":42,\"data\":\"ffffffffffff...\"}")]
pub struct MonitorUpcallsArgs {
    /// Only this switch's upcalls (default: every switch's).
    pub switch: Option<String>,
    /// Stop after this many upcalls.
    #[arg(short = 'c', long = "count", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Upcalls weftd holds for this monitor before it loses them [default: 1024].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub queue: Option<u32>,
}

/// `weft packet-out`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("how").required(true).args(["port", "in_port"])))]
pub struct PacketOutArgs {
    /// The switch.
    pub switch: String,
    /// Send the frame out of this port, as it is.
    #[arg(long, value_name = "PORT")]
    pub port: Option<String>,
    /// Run the frame through the switch as if this port had received it.
    #[arg(long, value_name = "PORT")]
    pub in_port: Option<String>,
    /// With --in-port: to the learning bridge alone, skipping the rules.
    #[arg(long, requires = "in_port")]
    pub normal: bool,
    /// The whole Ethernet frame in hex (':', '-' and spaces between bytes are ignored).
    #[arg(value_name = "HEX", value_parser = crate::monitor::parse_frame)]
    pub frame: String,
}

/// `weft config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Print the whole configuration (as weftd persists it) as JSON.
    #[command(after_help = "EXAMPLES:\n  weft config show > weft.json")]
    Show,
    /// Make the configuration equal to a JSON state file; prints the changes.
    #[command(after_help = "The file is what `weft config show` prints (or what \
        `weft --json config show` prints). weftd validates it as a whole: an invalid file \
        changes nothing.\n\nEXAMPLES:\n  weft config apply weft.json --dry-run\n  \
        weft config apply weft.json")]
    Apply {
        /// The state file ('-' for stdin).
        file: PathBuf,
        /// Only validate and show what would change.
        #[arg(long)]
        dry_run: bool,
    },
}
