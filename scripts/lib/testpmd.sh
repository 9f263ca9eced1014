# shellcheck shell=bash
# shellcheck disable=SC2154,SC2004 # $tmp is the caller's; PMD_PID/PMD_FD are associative
# Interactive dpdk-testpmd processes driven through a FIFO, shared by the benchmark scripts
# that run testpmd (scripts/bench-vhost, bench-overlay-vhost, bench-storm, bench-restart).
# Source it after lib/bench.sh; the caller provides $tmp (a private directory) and the
# associative arrays PMD_PID and PMD_FD (declare -A PMD_PID=() PMD_FD=()).

# pmd_launch NAME COMMAND...: runs COMMAND (an interactive testpmd) reading NAME's FIFO, in
# its own session, unbuffered output to $tmp/NAME.out; does not wait for its prompt (a
# virtio-user port with server=1 holds it back until the switch connects).
pmd_launch() {
    local name=$1 fd
    shift
    rm -f "$tmp/$name.in"
    mkfifo "$tmp/$name.in"
    : > "$tmp/$name.out"
    setsid stdbuf -o0 -e0 "$@" < "$tmp/$name.in" >> "$tmp/$name.out" 2>&1 &
    PMD_PID[$name]=$!
    exec {fd}> "$tmp/$name.in"
    PMD_FD[$name]=$fd
}

# pmd_prompt NAME: waits for NAME's prompt, 60 s at most.
pmd_prompt() {
    if ! bench_wait_for "$tmp/$1.out" 'testpmd> ' 60; then
        tail -20 "$tmp/$1.out" >&2
        bench_die "$1: testpmd did not reach its prompt in 60 s (output above)"
    fi
}

# pmd_start NAME COMMAND...: pmd_launch, then waits for the prompt.
pmd_start() {
    pmd_launch "$@"
    pmd_prompt "$1"
}

# pmd_cmd NAME COMMAND: sends one command line to NAME.
pmd_cmd() {
    kill -0 "${PMD_PID[$1]}" 2>/dev/null || { tail -20 "$tmp/$1.out" >&2; bench_die "$1: testpmd died (output above)"; }
    printf '%s\n' "$2" >&"${PMD_FD[$1]}" || bench_die "$1: cannot write to testpmd"
}

# pmd_mark NAME: writes a unique line into NAME's output (an unknown command is echoed back
# in testpmd's error) and waits for it: every command sent before has been done.
pmd_mark() {
    local name=$1 from mark
    from=$(stat -c %s "$tmp/$name.out")
    mark=mark$RANDOM$RANDOM
    pmd_cmd "$name" "$mark"
    bench_wait_for "$tmp/$name.out" "$mark" 30 "$from" ||
        { tail -20 "$tmp/$name.out" >&2; bench_die "$name: testpmd did not answer in 30 s (output above)"; }
}

# pmd_links_up NAME COUNT [TRIES]: 0 when NAME shows COUNT ports with their link up within
# TRIES half-seconds (default 60), 1 otherwise.
pmd_links_up() {
    local name=$1 count=$2 tries=${3:-60} up offset
    for _ in $(seq "$tries"); do
        offset=$(stat -c %s "$tmp/$name.out")
        pmd_cmd "$name" "show port info all"
        sleep 0.5
        up=$(tail -c +$((offset + 1)) "$tmp/$name.out" | grep -c 'Link status: up' || true)
        [ "$up" -ge "$count" ] && return 0
    done
    return 1
}

# pmd_quit NAME [SECONDS]: asks NAME to stop and quit, kills it after SECONDS (default 30).
pmd_quit() {
    local name=$1 seconds=${2:-30} pid=${PMD_PID[$1]}
    printf 'stop\nquit\n' 1>&"${PMD_FD[$name]}" 2>/dev/null || true
    for _ in $(seq $((seconds * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    pmd_kill "$name"
}

# pmd_kill NAME: closes NAME's FIFO and stops it at once.
pmd_kill() {
    local name=$1 fd=${PMD_FD[$1]:-}
    [ -n "$fd" ] && eval "exec $fd>&-"
    bench_stop_pid "${PMD_PID[$name]}" 5
    unset "PMD_PID[$name]" "PMD_FD[$name]"
}
