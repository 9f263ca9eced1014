# Shared pieces of the benchmark scripts (bench-tap, bench-overlay): sourced, not run.

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

# bench_require TOOL...: exits with a message naming the first missing tool.
bench_require() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: $(basename "$0") needs root (network namespaces, TAP devices)" >&2
        exit 1
    fi
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "error: $tool is missing (scripts/install-test-deps)" >&2; exit 1; }
    done
}

# replace_marked_section FILE MARKER TEXT_FILE: keeps FILE up to MARKER, writes MARKER and
# TEXT_FILE's contents after it (creates FILE when missing).
replace_marked_section() {
    python3 - "$@" <<'PY'
import os, sys
out, marker, text = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
old = open(out).read() if os.path.exists(out) else ""
head = old.split(marker)[0].rstrip() + "\n\n" if marker in old else old + ("\n" if old else "")
open(out, "w").write(head + marker + "\n\n" + text)
PY
}
