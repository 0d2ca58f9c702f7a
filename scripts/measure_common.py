"""What scripts/measure-validate.sh and scripts/measure-run.sh share (stdlib
only): starting a process and timing it, its peak RSS, the load the rest of
the machine put on it, and how a figure is printed. Both scripts put this
directory on PYTHONPATH for their harness.

Peak RSS comes from `/usr/bin/time -v` ("Maximum resident set size"):
ru_maxrss read by Python itself would be wrong, because Linux carries the
pre-exec memory high-water mark of a child into its ru_maxrss, and a child of
Python starts as a copy (or a vfork) of a ~10 MiB interpreter. Without
/usr/bin/time, `peak_rss` falls back to wait4's ru_maxrss and says it is an
upper bound.
"""
import os
import re
import statistics
import subprocess
import time

DEVNULL = os.open(os.devnull, os.O_RDWR)
HAVE_TIME = os.access("/usr/bin/time", os.X_OK)


def once(argv):
    """Spawn `argv` (stdin, stdout and stderr on /dev/null), wait; wall
    seconds, exit status, CPU seconds (user + sys of the process and of the
    children it reaped), ru_maxrss (KiB)."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, DEVNULL, 0),
                                       (os.POSIX_SPAWN_DUP2, DEVNULL, 1),
                                       (os.POSIX_SPAWN_DUP2, DEVNULL, 2)])
    _, wstatus, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall, os.waitstatus_to_exitcode(wstatus), ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def peak_rss(argv, scratch):
    """Exit status, peak RSS (KiB), how it was measured, wall seconds.
    `scratch` is a directory for `/usr/bin/time`'s report."""
    if HAVE_TIME:
        t0 = time.perf_counter()
        out = os.path.join(scratch, "time-v.out")
        p = subprocess.run(["/usr/bin/time", "-v", "-o", out, *argv],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        with open(out) as f:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
        if m:
            return p.returncode, int(m.group(1)), "/usr/bin/time -v", wall
    wall, code, _, rss = once(argv)
    return code, rss, "wait4 ru_maxrss, upper bound", wall


def busy_seconds():
    """CPU seconds the whole machine has spent busy (Linux /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


class Load:
    """CPUs kept busy by anything but this script and what it started (and
    reaped) inside the `with` block."""

    def __enter__(self):
        t = os.times()
        self.busy, self.own, self.t = busy_seconds(), t[0] + t[1] + t[2] + t[3], time.perf_counter()
        return self

    def __exit__(self, *exc):
        t = os.times()
        busy, own, now = busy_seconds(), t[0] + t[1] + t[2] + t[3], time.perf_counter()
        self.other = None
        if self.busy is not None and busy is not None:
            self.other = max(0.0, (busy - self.busy) - (own - self.own)) / (now - self.t)

    def line(self, what):
        """Print the load, with a warning when it is high enough to matter."""
        if self.other is None:
            return
        busy = self.other > 0.2
        print(f"     other load during {what}: {self.other:.2f} of {os.cpu_count()} CPU(s)"
              + ("; it slows these runs too (shared caches, memory bandwidth):"
                 " compare min, or rerun on a quiet machine" if busy else ""))


def stats(xs):
    return f"min {min(xs):8.2f}  median {statistics.median(xs):8.2f}  max {max(xs):8.2f}"


def verdict(ok, target):
    return f"target {target}  {'OK' if ok else 'MISSED'}"
