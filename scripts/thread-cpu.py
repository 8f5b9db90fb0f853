#!/usr/bin/env python3
"""Where a process's CPU time goes, thread by thread (the GPU machine has no perf).

  thread-cpu.py NAME OUT   waits (a minute at most) for a process whose command name is NAME
                           and which started at most 2 s before this one,
                           samples /proc/PID/task/*/stat every second until it exits and writes
                           to OUT the CPU seconds (user + system) of its busiest threads and of
                           each thread name, then prints OUT.

A thread's last sample is its total, short of at most a second's work.
"""
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def processes(name):
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        found.add(int(pid))
            except OSError:
                pass
    return found


def sample(pid, seen):
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        user, system = int(fields[11]) / TICK, int(fields[12]) / TICK
        seen[int(tid)] = (comm, user, system)
    return True


def start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return int(s[s.rindex(")") + 2:].split()[19])


def main():
    name, out = sys.argv[1], sys.argv[2]
    # a process that started with this one or later, even before this saw it
    since = start_ticks(os.getpid()) - 2 * TICK
    deadline = time.time() + 60
    pid = None
    while pid is None and time.time() < deadline:
        new = []
        for p in processes(name):
            try:
                if start_ticks(p) >= since:
                    new.append(p)
            except OSError:
                pass
        pid = max(new) if new else None
        if pid is None:
            time.sleep(0.2)
    if pid is None:
        return
    seen = {}
    while sample(pid, seen):
        time.sleep(1)
    user = sum(v[1] for v in seen.values())
    system = sum(v[2] for v in seen.values())
    by_name = {}
    for comm, u, s in seen.values():
        n, tu, ts = by_name.get(comm, (0, 0.0, 0.0))
        by_name[comm] = (n + 1, tu + u, ts + s)
    lines = [f"  threads: {len(seen)}, user {user:.1f} s, system {system:.1f} s"]
    lines.append("  by name: " + ", ".join(
        f"{c} x{n} {u + s:.1f} s (sys {s:.1f})"
        for c, (n, u, s) in sorted(by_name.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))))
    top = sorted(seen.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:10]
    lines.append("  busiest: " + ", ".join(
        f"{c}[{tid}] {u + s:.1f} s (sys {s:.1f})" for tid, (c, u, s) in top))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
