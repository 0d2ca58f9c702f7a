#!/usr/bin/env bash
# Whole-process cost of `orch validate FILE`: wall time and peak RSS.
#
#   bash scripts/measure-validate.sh            # 30 runs per file
#   RUNS=100 bash scripts/measure-validate.sh
#
# 1. builds the release binary (`cargo build --release`);
# 2. generates, into a temporary directory, a 1,000-phase layered pipeline
#    and a 100,000-phase chain with the generator the benches use
#    (benches/support/pipeline_gen.rs, compiled by rustc through
#    scripts/gen-pipeline.rs);
# 3. checks `orch validate` accepts each (exit 0, the expected phase and
#    invocation counts), then times RUNS runs of the 1,000-phase file and
#    CHAIN_RUNS runs of the chain. Each timed run is one posix_spawn/wait4
#    from Python, timed around spawn and reap (the child's user + sys CPU
#    time is printed too: on a busy machine both rise). Peak RSS comes from RSS_RUNS
#    further runs under `/usr/bin/time` ("Maximum resident set size"):
#    ru_maxrss read by Python itself would be wrong, because Linux carries
#    the pre-exec memory high-water mark of a child into its ru_maxrss, and a
#    child of Python starts as a copy (or a vfork) of a ~10 MiB interpreter.
#    Without /usr/bin/time the script falls back to wait4's ru_maxrss and
#    prints it as an upper bound next to the floor (the same figure for
#    /bin/true).
#
# Targets for 1,000 phases: median wall <= 15 ms, peak RSS <= 16 MiB.
# The chain is for information only (it must exit 0 without crashing).
#
# Exit status: 0 all good; 1 a run failed (crash, non-zero exit, wrong
# counts); 2 every run succeeded but a target was missed.
set -euo pipefail

RUNS=${RUNS:-30}
CHAIN_RUNS=${CHAIN_RUNS:-5}
RSS_RUNS=${RSS_RUNS:-5}
WALL_TARGET_MS=${WALL_TARGET_MS:-15}
RSS_TARGET_MIB=${RSS_TARGET_MIB:-16}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 1; }
command -v rustc >/dev/null || { echo "error: rustc is required" >&2; exit 1; }

echo "== cargo build --release"
cargo build --release --quiet
orch="$root/target/release/orch"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orch-measure.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== generating pipelines in $tmp"
rustc --edition 2024 -O -o "$tmp/gen-pipeline" scripts/gen-pipeline.rs
"$tmp/gen-pipeline" 1000 >"$tmp/layered-1000.toml" 2>"$tmp/layered-1000.expect"
"$tmp/gen-pipeline" 100000 --chain >"$tmp/chain-100000.toml" 2>"$tmp/chain-100000.expect"
for f in layered-1000 chain-100000; do
    printf '   %-18s %8d KiB  %s\n' "$f.toml" "$(( $(wc -c <"$tmp/$f.toml") / 1024 ))" "$(cat "$tmp/$f.expect")"
done

echo "== $(uname -srm), $(nproc) CPU(s), $("$orch" --version 2>/dev/null || echo orch)"

# The timing harness (stdlib only). Arguments: temp dir, orch binary, runs
# for the 1,000-phase file, runs for the chain, RSS runs, wall target (ms),
# RSS target (MiB).
python3 - "$tmp" "$orch" "$RUNS" "$CHAIN_RUNS" "$RSS_RUNS" "$WALL_TARGET_MS" "$RSS_TARGET_MIB" <<'PY'
import os
import re
import statistics
import subprocess
import sys
import time

tmp, orch, runs, chain_runs, rss_runs, wall_target, rss_target = sys.argv[1:]
runs, chain_runs, rss_runs = int(runs), int(chain_runs), int(rss_runs)
wall_target, rss_target = float(wall_target), float(rss_target)
devnull = os.open(os.devnull, os.O_WRONLY)
status = 0


def expected(name):
    with open(os.path.join(tmp, name + ".expect")) as f:
        return dict(kv.split("=") for kv in f.read().split())


def check(name):
    """One run with its output: exit 0 and the generator's counts."""
    global status
    path = os.path.join(tmp, name + ".toml")
    p = subprocess.run([orch, "validate", path], capture_output=True, text=True)
    want = expected(name)
    line = f"({want['phases']} phases, {want['invocations']} invocations)"
    if p.returncode != 0 or not p.stdout.startswith("ok: ") or line not in p.stdout:
        print(f"FAIL {name}: exit {p.returncode} (signal {-p.returncode})"
              if p.returncode < 0 else f"FAIL {name}: exit {p.returncode}")
        print("  stdout:", p.stdout.strip()[:2000])
        print("  stderr:", p.stderr.strip()[:2000])
        print("  expected: exit 0 and `ok: ...", line + "`")
        status = 1
        return False
    print(f"   check {name}: exit 0, {p.stdout.strip()}")
    return True


def once(argv):
    """Spawn, wait; wall seconds, exit status, ru_maxrss (KiB), CPU seconds."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(
        argv[0], argv, os.environ,
        file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                      (os.POSIX_SPAWN_DUP2, devnull, 2)],
    )
    _, wstatus, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall, os.waitstatus_to_exitcode(wstatus), ru.ru_maxrss, ru.ru_utime + ru.ru_stime


HAVE_TIME = os.access("/usr/bin/time", os.X_OK)


def time_v(argv):
    """Exit status and peak RSS (KiB) as `/usr/bin/time -v` reports them."""
    out = os.path.join(tmp, "time-v.out")
    p = subprocess.run(["/usr/bin/time", "-v", "-o", out, *argv],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
    return p.returncode, int(m.group(1)) if m else None


def peak_rss(argv):
    """Exit status, peak RSS (KiB), and how it was measured."""
    if HAVE_TIME:
        code, rss = time_v(argv)
        if rss is not None:
            return code, rss, "/usr/bin/time -v"
    _, code, rss, _ = once(argv)
    return code, rss, "wait4 ru_maxrss, upper bound"


FLOOR_KIB = None if HAVE_TIME else once(["/bin/true"])[2]


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


def measure(name, n, warmup, wall_target_ms, rss_target_mib):
    global status
    if not check(name):
        return
    argv = [orch, "validate", os.path.join(tmp, name + ".toml")]
    for _ in range(warmup):
        once(argv)
    busy0, self0, t0 = busy_seconds(), sum(os.times()[:2]), time.perf_counter()
    walls, cpus, rsss = [], [], []
    for _ in range(n):
        wall, code, _, cpu = once(argv)
        if code != 0:
            print(f"FAIL {name}: a timed run exited {code}")
            status = 1
            return
        walls.append(wall * 1e3)
        cpus.append(cpu * 1e3)
    busy1, self1, t1 = busy_seconds(), sum(os.times()[:2]), time.perf_counter()
    # CPUs kept busy by anything but these runs and this script.
    other = None
    if busy0 is not None and busy1 is not None:
        other = max(0.0, (busy1 - busy0) - sum(cpus) / 1e3 - (self1 - self0)) / (t1 - t0)
    for _ in range(rss_runs):
        code, rss, how = peak_rss(argv)
        if code != 0:
            print(f"FAIL {name}: a run for RSS exited {code}")
            status = 1
            return
        rsss.append(rss / 1024)
    med = statistics.median(walls)
    peak = max(rsss)

    def verdict(value, target):
        if not target:
            return "(for information)"
        if value > target and FLOOR_KIB is not None and value * 1024 <= FLOOR_KIB * 1.02:
            return f"target <= {target:g}  INCONCLUSIVE (at the wait4 floor)"
        return f"target <= {target:g}  {'OK' if value <= target else 'MISSED'}"

    print(f"   {name}: wall over {n} runs, peak RSS over {rss_runs} runs ({how})")
    print(f"     wall ms   min {min(walls):8.2f}  median {med:8.2f}  max {max(walls):8.2f}"
          f"   {verdict(med, wall_target_ms)}")
    print(f"     CPU ms    min {min(cpus):8.2f}  median {statistics.median(cpus):8.2f}"
          f"  max {max(cpus):8.2f}   (user + sys, for reference)")
    print(f"     RSS MiB   min {min(rsss):8.2f}  median {statistics.median(rsss):8.2f}"
          f"  max {peak:8.2f}   {verdict(peak, rss_target_mib)}")
    if other is not None:
        busy = other > 0.2
        print(f"     other load during the timed runs: {other:.2f} of {os.cpu_count()} CPU(s)"
              + ("; it slows these runs too (shared caches, memory bandwidth):"
                 " compare min, or rerun on a quiet machine" if busy else ""))
    if FLOOR_KIB is not None:
        print(f"     (wait4 floor: /bin/true reads {FLOOR_KIB / 1024:.2f} MiB the same way)")
    if (wall_target_ms and med > wall_target_ms) or (rss_target_mib and peak > rss_target_mib):
        status = max(status, 2)


print("== 1,000-phase layered pipeline")
measure("layered-1000", runs, 3, wall_target, rss_target)
print("== 100,000-phase chain (information only)")
measure("chain-100000", chain_runs, 1, 0, 0)
sys.exit(status)
PY
