# shellcheck shell=bash
# shellcheck disable=SC2154,SC2004 # $tmp is the caller's; PMD_PID/PMD_FD are associative
# Interactive dpdk-testpmd processes driven through a FIFO, shared by the benchmark scripts
# that run several of them (scripts/bench-vhost, scripts/bench-overlay-vhost). Source it after
# lib/bench.sh; the caller provides $tmp (a private directory) and the associative arrays
# PMD_PID and PMD_FD (declare -A PMD_PID=() PMD_FD=()).

# pmd_start NAME COMMAND...: runs COMMAND (an interactive testpmd) reading NAME's FIFO,
# unbuffered output to $tmp/NAME.out.
pmd_start() {
    local name=$1 fd
    shift
    rm -f "$tmp/$name.in"
    mkfifo "$tmp/$name.in"
    : > "$tmp/$name.out"
    setsid stdbuf -o0 -e0 "$@" < "$tmp/$name.in" >> "$tmp/$name.out" 2>&1 &
    PMD_PID[$name]=$!
    exec {fd}> "$tmp/$name.in"
    PMD_FD[$name]=$fd
    if ! bench_wait_for "$tmp/$name.out" 'testpmd> ' 60; then
        tail -20 "$tmp/$name.out" >&2
        bench_die "$name: testpmd did not reach its prompt in 60 s (output above)"
    fi
}

# pmd_cmd NAME COMMAND: sends one command line to NAME.
pmd_cmd() {
    kill -0 "${PMD_PID[$1]}" 2>/dev/null || { tail -20 "$tmp/$1.out" >&2; bench_die "$1: testpmd died (output above)"; }
    printf '%s\n' "$2" >&"${PMD_FD[$1]}" || bench_die "$1: cannot write to testpmd"
}

# pmd_quit NAME: asks NAME to quit, kills it after 30 s.
pmd_quit() {
    local name=$1 pid=${PMD_PID[$1]}
    printf 'stop\nquit\n' 1>&"${PMD_FD[$name]}" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    pmd_kill "$name"
}

pmd_kill() {
    local name=$1 fd=${PMD_FD[$1]:-}
    [ -n "$fd" ] && eval "exec $fd>&-"
    bench_stop_pid "${PMD_PID[$name]}" 5
    unset "PMD_PID[$name]" "PMD_FD[$name]"
}
