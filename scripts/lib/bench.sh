# Shell helpers shared by the benchmark scripts (scripts/bench-*). Source it:
#   . "$(dirname "$0")/lib/bench.sh"
# Every function prints its errors as "error: NAME: ..." with BENCH_NAME set by the caller.

BENCH_NAME=${BENCH_NAME:-bench}

bench_die() {
    echo "error: $BENCH_NAME: $*" >&2
    exit 1
}

# bench_usage SCRIPT: prints SCRIPT's leading comment block (every comment line after the
# shebang, up to the first line that is not one): a script's --help, kept with its code.
bench_usage() {
    awk 'NR == 1 { next } /^#/ { print; next } { exit }' "$1"
}

# bench_require_root WHY: exits unless running as root.
bench_require_root() {
    [ "$(id -u)" -eq 0 ] || bench_die "needs root ($1)"
}

# bench_require_tools TOOL...: exits naming the first tool that is not on PATH.
bench_require_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null ||
            bench_die "$tool is missing (scripts/install-test-deps, or apt-get install the package that has it)"
    done
}

# bench_require_hugepages PAGES: 2 MB hugepages mounted at /dev/hugepages with at least PAGES
# free; mounts hugetlbfs and raises vm.nr_hugepages (by what is missing) when it must, saying so.
bench_require_hugepages() {
    local need=$1 free total
    if ! grep -q ' /dev/hugepages hugetlbfs' /proc/mounts; then
        echo "== mounting hugetlbfs at /dev/hugepages" >&2
        mkdir -p /dev/hugepages
        mount -t hugetlbfs nodev /dev/hugepages || bench_die "cannot mount hugetlbfs at /dev/hugepages"
    fi
    free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
    if [ "$free" -lt "$need" ]; then
        total=$(awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo)
        echo "== raising vm.nr_hugepages from $total to $((total + need - free)) ($free free, $need needed)" >&2
        echo $((total + need - free)) > /proc/sys/vm/nr_hugepages
        free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
        [ "$free" -ge "$need" ] ||
            bench_die "need $need free 2 MB hugepages, have $free (echo N > /proc/sys/vm/nr_hugepages)"
    fi
}

# bench_wait_for FILE PATTERN SECONDS [FROM_BYTE]: waits until FILE (from byte FROM_BYTE on)
# holds the extended regular expression PATTERN; fails after SECONDS.
bench_wait_for() {
    local file=$1 pattern=$2 secs=$3 from=${4:-0} deadline
    deadline=$(($(date +%s) + secs))
    until tail -c +$((from + 1)) "$file" 2>/dev/null | grep -Eq -- "$pattern"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# bench_stop_pid PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 10); reaps it if
# it is this shell's child.
bench_stop_pid() {
    local pid=$1 secs=${2:-10} i
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq $((secs * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# Results: every bench-* script writes one results file (JSON, the format described in
# scripts/lib/bench_report.py) while it runs, and prints its table and writes its plot with that
# one tool. BENCH_PYTHON runs it: Debian's python3 (where python3-matplotlib installs) when it
# has matplotlib, else the first python3 on PATH.
if [ -z "${BENCH_PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
        BENCH_PYTHON=/usr/bin/python3
    else
        BENCH_PYTHON=python3
    fi
fi

# bench_report ARGS...: scripts/lib/bench_report.py ARGS... (new, case, extra, sample, note,
# attach, finish, report, update-doc; see its --help).
bench_report() {
    "$BENCH_PYTHON" "$(dirname "${BASH_SOURCE[0]}")/bench_report.py" "$@"
}

# bench_require_plotting: exits unless bench_report can draw (matplotlib).
bench_require_plotting() {
    "$BENCH_PYTHON" -c 'import matplotlib' 2>/dev/null ||
        bench_die "matplotlib is missing: scripts/install-test-deps, or apt-get install python3-matplotlib"
}

# bench_default_results: the results file a run writes unless told otherwise,
# target/bench/$BENCH_NAME-<UTC date and time>.json (the directory is created).
bench_default_results() {
    mkdir -p target/bench
    echo "target/bench/$BENCH_NAME-$(date -u +%Y%m%dT%H%M%SZ).json"
}

# bench_invocation NAME ARGS...: the command line as a reader would type it again
# ("scripts/NAME ARGS...", an argument with spaces in double quotes).
bench_invocation() {
    local out="scripts/$1" a
    shift
    for a in "$@"; do
        if [[ $a =~ [[:space:]] ]]; then out+=" \"$a\""; else out+=" $a"; fi
    done
    echo "$out"
}
