# iperf3 helpers shared by the benchmark scripts (bench-tap, bench-overlay). Source it.

# Datagrams the UDP layer of namespace NS took in so far, socket buffers full or not
# (InDatagrams + RcvbufErrors): what the forwarding path delivered, whether or not the
# receiving iperf3 (sharing a CPU with the sender) kept up.
udp_delivered() {
    ip netns exec "$1" cat /proc/net/snmp | awk '/^Udp:/ { if (h) { print $2 + $6; exit } h = 1 }'
}

# iperf3_figure JSON KIND BEFORE AFTER: Gbit/s for tcp* kinds; for udp* kinds the packets per
# second iperf3 received and those delivered to the receiving UDP layer (BEFORE/AFTER are
# udp_delivered readings around the run).
iperf3_figure() {
    python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
kind, before, after = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
end = r["end"]
if kind.startswith("tcp"):
    print(f'{end["sum_received"]["bits_per_second"] / 1e9:.2f}')
else:
    s = end["sum"]
    print(f'{(s["packets"] - s["lost_packets"]) / s["seconds"]:.0f} {(after - before) / s["seconds"]:.0f}')
PY
}
