#!/usr/bin/env python3
"""Ring overruns of the AF_PACKET ports of running processes, from the kernel.

    packet-ring-stats.py PID...

weft's AfPacketRx now counts these drops itself (port drop reason `ring_full`), reading
PACKET_STATISTICS as this does; every read resets the kernel's counters, so while both read,
each sees part: the total is this script's tp_drops plus the port's ring_full. This takes a duplicate of every AF_PACKET
socket of each PID (pidfd_getfd: needs root or ptrace rights), reads PACKET_STATISTICS every
0.5 s (each read resets the kernel's counters, so the reads are summed) until every PID has
exited or SIGTERM arrives, then prints per PID: tp_packets (frames the socket saw),
tp_drops (of those, not put in the ring: it was full) and tp_freeze_q_cnt (times the ring
was found full). Reading takes nothing from the ring's owner but the counters' reset.
"""
import ctypes
import os
import signal
import socket
import struct
import sys
import time

SYS_PIDFD_GETFD = 438
SOL_PACKET, PACKET_STATISTICS = 263, 6

libc = ctypes.CDLL(None, use_errno=True)
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def packet_sockets(pid):
    """Duplicates of PID's AF_PACKET sockets."""
    out = []
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return out
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            dup = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
            if dup < 0:
                continue
            s = socket.socket(fileno=dup)
            if s.family == socket.AF_PACKET:
                out.append(s)
            else:
                s.close()
    finally:
        os.close(pidfd)
    return out


pids = [int(p) for p in sys.argv[1:]]
socks = {pid: packet_sockets(pid) for pid in pids}
total = {pid: [0, 0, 0] for pid in pids}


def read_all():
    for pid, ss in socks.items():
        for s in ss:
            try:
                p, d, f = struct.unpack("III", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
            except OSError:
                continue
            t = total[pid]
            t[0] += p
            t[1] += d
            t[2] += f


while not stop and any(os.path.exists(f"/proc/{pid}") for pid in pids):
    read_all()
    time.sleep(0.5)
read_all()
for pid in pids:
    p, d, f = total[pid]
    print(f"pid {pid}: AF_PACKET ring: tp_packets {p} tp_drops {d} tp_freeze_q_cnt {f}")
