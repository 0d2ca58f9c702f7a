#!/usr/bin/env bash
# Whole-process cost of `orch validate FILE`: wall time and peak RSS.
#
#   bash scripts/measure-validate.sh            # 30 runs per file
#   RUNS=100 bash scripts/measure-validate.sh
#   ORCH=/path/to/orch bash scripts/measure-validate.sh   # skip the build
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
#    time is printed too: on a busy machine both rise). Peak RSS comes from
#    RSS_RUNS further runs under `/usr/bin/time` (scripts/measure_common.py
#    says why not ru_maxrss from Python). Without /usr/bin/time the script
#    falls back to wait4's ru_maxrss and prints it as an upper bound next to
#    the floor (the same figure for /bin/true).
#
# Targets: 1,000 phases, median wall <= 10 ms and peak RSS <= 15 MiB;
# the 100,000-phase chain, median wall <= 1 s and peak RSS <= 250 MiB.
# Override with WALL_TARGET_MS, RSS_TARGET_MIB, CHAIN_WALL_TARGET_MS and
# CHAIN_RSS_TARGET_MIB.
#
# Exit status: 0 all good; 1 a run failed (crash, non-zero exit, wrong
# counts); 2 every run succeeded but a target was missed.
set -euo pipefail

RUNS=${RUNS:-30}
CHAIN_RUNS=${CHAIN_RUNS:-5}
RSS_RUNS=${RSS_RUNS:-5}
WALL_TARGET_MS=${WALL_TARGET_MS:-10}
RSS_TARGET_MIB=${RSS_TARGET_MIB:-15}
CHAIN_WALL_TARGET_MS=${CHAIN_WALL_TARGET_MS:-1000}
CHAIN_RSS_TARGET_MIB=${CHAIN_RSS_TARGET_MIB:-250}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 1; }
command -v rustc >/dev/null || { echo "error: rustc is required" >&2; exit 1; }

if [ -n "${ORCH:-}" ]; then
    orch=$ORCH
    echo "== using ORCH=$orch (no build)"
else
    echo "== cargo build --release"
    cargo build --release --quiet
    orch="$root/target/release/orch"
fi

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

# The timing harness (stdlib only, with scripts/measure_common.py).
# Arguments: temp dir, orch binary, runs for the 1,000-phase file, runs for
# the chain, RSS runs, then wall (ms) and RSS (MiB) targets for the
# 1,000-phase file and for the chain.
PYTHONPATH="$root/scripts" PYTHONDONTWRITEBYTECODE=1 \
    python3 - "$tmp" "$orch" "$RUNS" "$CHAIN_RUNS" "$RSS_RUNS" "$WALL_TARGET_MS" "$RSS_TARGET_MIB" \
    "$CHAIN_WALL_TARGET_MS" "$CHAIN_RSS_TARGET_MIB" <<'PY'
import os
import statistics
import subprocess
import sys

from measure_common import HAVE_TIME, Load, once, peak_rss, stats, verdict

tmp, orch, runs, chain_runs, rss_runs = sys.argv[1:6]
runs, chain_runs, rss_runs = int(runs), int(chain_runs), int(rss_runs)
wall_target, rss_target, chain_wall_target, chain_rss_target = map(float, sys.argv[6:10])
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


FLOOR_KIB = None if HAVE_TIME else once(["/bin/true"])[3]


def measure(name, n, warmup, wall_target_ms, rss_target_mib):
    global status
    if not check(name):
        return
    argv = [orch, "validate", os.path.join(tmp, name + ".toml")]
    for _ in range(warmup):
        once(argv)
    walls, cpus, rsss = [], [], []
    with Load() as load:
        for _ in range(n):
            wall, code, cpu, _ = once(argv)
            if code != 0:
                print(f"FAIL {name}: a timed run exited {code}")
                status = 1
                return
            walls.append(wall * 1e3)
            cpus.append(cpu * 1e3)
    for _ in range(rss_runs):
        code, rss, how, _ = peak_rss(argv, tmp)
        if code != 0:
            print(f"FAIL {name}: a run for RSS exited {code}")
            status = 1
            return
        rsss.append(rss / 1024)
    med = statistics.median(walls)
    peak = max(rsss)

    def against(value, target):
        if not target:
            return "(for information)"
        if value > target and FLOOR_KIB is not None and value * 1024 <= FLOOR_KIB * 1.02:
            return f"target <= {target:g}  INCONCLUSIVE (at the wait4 floor)"
        return verdict(value <= target, f"<= {target:g}")

    print(f"   {name}: wall over {n} runs, peak RSS over {rss_runs} runs ({how})")
    print(f"     wall ms   {stats(walls)}   {against(med, wall_target_ms)}")
    print(f"     CPU ms    {stats(cpus)}   (user + sys, for reference)")
    print(f"     RSS MiB   {stats(rsss)}   {against(peak, rss_target_mib)}")
    load.line("the timed runs")
    if FLOOR_KIB is not None:
        print(f"     (wait4 floor: /bin/true reads {FLOOR_KIB / 1024:.2f} MiB the same way)")
    if (wall_target_ms and med > wall_target_ms) or (rss_target_mib and peak > rss_target_mib):
        status = max(status, 2)


print("== 1,000-phase layered pipeline")
measure("layered-1000", runs, 3, wall_target, rss_target)
print("== 100,000-phase chain")
measure("chain-100000", chain_runs, 1, chain_wall_target, chain_rss_target)
sys.exit(status)
PY
