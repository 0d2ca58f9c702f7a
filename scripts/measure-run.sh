#!/usr/bin/env bash
# Whole-process cost of `orch run` under three bounded loads (issue 4,
# "Speed"): spawn overhead, events through the store, and memory with many
# agents at once.
#
#   bash scripts/measure-run.sh                 # 5 timed runs, 3 RSS runs
#   RUNS=10 RSS_RUNS=5 bash scripts/measure-run.sh
#   STATE_ROOT=/dev/shm bash scripts/measure-run.sh   # state dirs on tmpfs
#   ORCH=/path/to/orch bash scripts/measure-run.sh    # skip the build
#
# 1. builds the release binary (`cargo build --release`);
# 2. generates, into a temporary directory, three pipelines of `command`
#    agents (nothing touches the network, every load stops by itself):
#    - spawn:  PHASES (1,000) phases running `true`, in layers of LAYER (10),
#              each phase depending on one or two phases of the layer before,
#              `max_parallel = 8`;
#    - events: one agent (python3) printing EVENTS (200,000) JSON lines
#              `{"type":"x","n":I}` as fast as it can;
#    - wide:   one `parallel = true` phase of WIDE (64) agents running
#              `sleep 1`, `max_parallel = 64`;
# 3. runs each once with `--format json` and checks it: exit 0, every phase
#    and agent succeeded; for events, every line is in `state.db` in order
#    (and `orch runs show` counts them); for wide, all agents overlapped;
# 4. times RUNS runs of spawn, each against the "spawn floor": the same
#    PHASES `true` processes started by this script (posix_spawn, own
#    process group, output to /dev/null) in the same order, a phase as soon
#    as its dependencies have exited, at most 8 at once. The runs alternate
#    floor / orch so machine noise hits both alike. Overhead per phase =
#    (orch wall - floor wall) / PHASES, from medians (and from minimums);
# 5. times RUNS runs of events (events per second = EVENTS / wall of the
#    whole `orch run`, orch's start-up and the agent's own time included;
#    every run is checked to have stored every line);
# 6. peak RSS of orch over RSS_RUNS runs of events and of wide, under
#    `/usr/bin/time -v` ("Maximum resident set size"; see
#    scripts/measure_common.py for why not ru_maxrss from Python).
#
# Every timed `orch run` gets a fresh `--state-dir` under STATE_ROOT
# (default: the temporary directory). The spawn runs' state directories are
# kept until the end: on ext4 without a journal, creating inodes right after
# deleting thousands (as back-to-back runs would) is slow, because the
# allocator skips recently deleted inodes, which would bill the file
# system's bookkeeping to whichever run came next. The script says when the
# state root is on such a file system. The attempts' own folders (one per
# confined agent start, under `$XDG_CACHE_HOME/orch/attempts`, by default
# in the home) are made under STATE_ROOT too, for the same reason: only
# confined starts make them, so on such a file system its bookkeeping
# would be billed to confinement (set KEEP_CACHE_HOME=1 to leave them in
# the home).
#
# 7. confinement (issue 8): the spawn pipeline again with every phase
#    confined (`permission = "workspace-write"`: a Landlock ruleset built
#    and entered per agent start, and the attempt's process tree tracked
#    by a cgroup where orch can make one), RUNS runs alternating floor /
#    unconfined (`ORCH_CGROUPS=off`: no cgroup either) / confined; the cost
#    of confinement and tree tracking per agent start = (confined wall -
#    unconfined wall) / PHASES, from medians (and minimums). Skipped, and
#    said so, where orch cannot confine (`orch doctor`).
#
# Targets (issue 21): spawn overhead <= 0.25 ms per phase; events >= 700,000
# per second and peak RSS <= 40 MiB; wide peak RSS <= 64 MiB; confinement <= 1 ms per
# agent start.
#
# Exit status: 0 all good; 1 a run failed (crash, non-zero exit, missing
# events, wrong counts); 2 every run succeeded but a target was missed.
set -euo pipefail

RUNS=${RUNS:-5}
RSS_RUNS=${RSS_RUNS:-3}
PHASES=${PHASES:-1000}
LAYER=${LAYER:-10}
EVENTS=${EVENTS:-200000}
WIDE=${WIDE:-64}
OVERHEAD_TARGET_MS=${OVERHEAD_TARGET_MS:-0.25}
EVENTS_TARGET=${EVENTS_TARGET:-700000}
EVENTS_RSS_TARGET_MIB=${EVENTS_RSS_TARGET_MIB:-40}
WIDE_RSS_TARGET_MIB=${WIDE_RSS_TARGET_MIB:-64}
CONFINE_TARGET_MS=${CONFINE_TARGET_MS:-1}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 1; }

if [[ -n ${ORCH:-} ]]; then
    orch=$(cd "$(dirname "$ORCH")" && pwd)/$(basename "$ORCH")
    echo "== using ORCH=$orch (no build)"
else
    echo "== cargo build --release"
    cargo build --release --quiet
    orch="$root/target/release/orch"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orch-measure-run.XXXXXX")
state_root=$tmp
if [[ -n ${STATE_ROOT:-} ]]; then
    state_root=$(mktemp -d "$STATE_ROOT/orch-measure-run.XXXXXX")
fi
trap 'rm -rf "$tmp" "$state_root"' EXIT

echo "== $(uname -srm), $(nproc) CPU(s), $("$orch" --version 2>/dev/null || echo orch)"

# The harness (stdlib only, with scripts/measure_common.py). Arguments: temp
# dir, state root, orch binary, then the settings above in order.
PYTHONPATH="$root/scripts" PYTHONDONTWRITEBYTECODE=1 \
    python3 - "$tmp" "$state_root" "$orch" "$RUNS" "$RSS_RUNS" "$PHASES" "$LAYER" "$EVENTS" "$WIDE" \
    "$OVERHEAD_TARGET_MS" "$EVENTS_TARGET" "$EVENTS_RSS_TARGET_MIB" "$WIDE_RSS_TARGET_MIB" \
    "$CONFINE_TARGET_MS" <<'PY'
import heapq
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

from measure_common import DEVNULL, Load, once, peak_rss, stats, verdict

(tmp, state_root, orch, runs, rss_runs, phases, layer, events, wide,
 overhead_target, events_target, events_rss_target, wide_rss_target,
 confine_target) = sys.argv[1:]
confine_target = float(confine_target)
runs, rss_runs, phases, layer, events, wide = map(int, (runs, rss_runs, phases, layer, events, wide))
overhead_target, events_target = float(overhead_target), float(events_target)
events_rss_target, wide_rss_target = float(events_rss_target), float(wide_rss_target)
PARALLEL = 8
status = 0
# The agents' working directory: nothing lands in the repo, and the state
# directories (beside it) are outside the workspace, as orch requires
# where an agent may write it.
os.makedirs(os.path.join(tmp, "work"), exist_ok=True)
os.chdir(os.path.join(tmp, "work"))
# The attempts' own folders beside the state directories (see the header).
if not os.environ.get("KEEP_CACHE_HOME"):
    os.environ["XDG_CACHE_HOME"] = os.path.join(state_root, "cache")
    os.makedirs(os.environ["XDG_CACHE_HOME"], exist_ok=True)


def fail(msg, p=None):
    global status
    print(f"FAIL {msg}")
    if p is not None:
        print("  exit:", p.returncode)
        print("  stdout:", (p.stdout or "").strip()[:2000])
        print("  stderr:", (p.stderr or "").strip()[-2000:])
    status = 1


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def which(name):
    path = shutil.which(name)
    if not path:
        sys.exit(f"error: `{name}` is not on PATH")
    return os.path.realpath(path)


TRUE, SLEEP = which("true"), which("sleep")
PYTHON = os.path.realpath(sys.executable)  # not a pyenv shim: the interpreter


# ---------------------------------------------------------------- pipelines

def deps_of(i):
    """Layer L > 0: phase j needs phase j of layer L-1, and phase j+1 too
    when j is even (so one or two dependencies)."""
    lay, j = divmod(i, layer)
    if lay == 0:
        return []
    base = (lay - 1) * layer
    d = [base + j]
    if j % 2 == 0 and layer > 1:
        d.append(base + (j + 1) % layer)
    return sorted(d)


DEPS = [deps_of(i) for i in range(phases)]


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


lines = ["version = 1", 'name = "measure-spawn"', "", "[defaults]",
         f"max_parallel = {PARALLEL}", "", "[agents.t]", 'kind = "command"',
         f"command = [{toml_str(TRUE)}]", ""]
for i in range(phases):
    lines += ["[[phases]]", f'name = "p{i}"', 'agents = ["t"]']
    if DEPS[i]:
        lines.append("depends_on = [" + ", ".join(f'"p{d}"' for d in DEPS[i]) + "]")
    lines.append("")
SPAWN = write("spawn.toml", "\n".join(lines))
# The same phases, each confined: its command gets a Landlock ruleset.
confined_lines = ["version = 1", 'name = "measure-confined"', "", "[defaults]",
                  f"max_parallel = {PARALLEL}", "", "[agents.t]", 'kind = "command"',
                  f"command = [{toml_str(TRUE)}]", ""]
for i in range(phases):
    confined_lines += ["[[phases]]", f'name = "p{i}"', 'agents = ["t"]']
    if DEPS[i]:
        confined_lines.append("depends_on = [" + ", ".join(f'"p{d}"' for d in DEPS[i]) + "]")
    confined_lines += ["[phases.tools]", 'permission = "workspace-write"', ""]
CONFINED = write("confined.toml", "\n".join(confined_lines))

EMIT = (
    "import sys\n"
    "w = sys.stdout.write\n"
    f"n = {events}\n"
    "for s in range(0, n, 10000):\n"
    "    w(''.join('{\"type\":\"x\",\"n\":%d}\\n' % i for i in range(s, min(s + 10000, n))))\n"
)
EVENTS_TOML = write("events.toml", "\n".join([
    "version = 1", 'name = "measure-events"', "", "[defaults]", "max_parallel = 1", "",
    "[agents.emit]", 'kind = "command"',
    f"command = [{toml_str(PYTHON)}, \"-c\", {toml_str(EMIT)}]", "",
    "[[phases]]", 'name = "emit"', 'agents = ["emit"]', ""]))

lines = ["version = 1", 'name = "measure-wide"', "", "[defaults]", f"max_parallel = {wide}", ""]
for k in range(wide):
    lines += [f"[agents.s{k}]", 'kind = "command"', f'command = [{toml_str(SLEEP)}, "1"]', ""]
lines += ["[[phases]]", 'name = "wide"', "parallel = true",
          "agents = [" + ", ".join(f'"s{k}"' for k in range(wide)) + "]", ""]
WIDE_TOML = write("wide.toml", "\n".join(lines))

n_edges = sum(len(d) for d in DEPS)
print(f"== pipelines in {tmp}")
print(f"   spawn.toml   {phases} phases of `{TRUE}`, layers of {layer}, {n_edges} edges,"
      f" max_parallel = {PARALLEL}")
print(f"   events.toml  1 agent printing {events} JSON lines ({PYTHON})")
print(f"   wide.toml    1 phase, {wide} agents `{SLEEP} 1` with parallel = true,"
      f" max_parallel = {wide}")
print(f"   confined.toml  spawn.toml with every phase `permission = \"workspace-write\"`")


def fs_note(path):
    """File system of the state root, and a warning for ext4 without a journal."""
    try:
        out = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "--target", path],
                             capture_output=True, text=True).stdout.split()
    except OSError:
        return "unknown file system", None
    if len(out) < 2:
        return "unknown file system", None
    source, fstype = out[0], out[1]
    note = None
    if fstype == "ext4":
        try:
            with open(f"/sys/fs/ext4/{os.path.basename(source)}/journal_task") as f:
                if f.read().strip() == "<none>":
                    note = ("ext4 without a journal: inode allocation right after mass deletes is"
                            " slow here (spawn state dirs are kept until the end; STATE_ROOT=/dev/shm"
                            " takes the file system out of the figure)")
        except OSError:
            pass
    return f"{fstype} on {source}", note


what, note = fs_note(state_root)
print(f"== state directories under {state_root} ({what})"
      + ("" if os.environ.get("KEEP_CACHE_HOME") else ", attempts' own folders too"))
if note:
    print(f"   note: {note}")

# ------------------------------------------------------------------ helpers

serial = 0


def state_dir(tag):
    global serial
    serial += 1
    return os.path.join(state_root, f"{tag}-{serial}")


def orch_run(path, sdir):
    return [orch, "--state-dir", sdir, "run", path]


def check_run(path, tag):
    """One run with its output; the JSON report, or None after a failure."""
    sdir = state_dir(tag)
    p = subprocess.run(orch_run(path, sdir) + ["--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{tag}: `orch run` exited {p.returncode}", p)
        return None, sdir
    try:
        report = json.loads(p.stdout)
    except ValueError:
        fail(f"{tag}: `--format json` printed no JSON document", p)
        return None, sdir
    bad = [ph["name"] for ph in report["phases"] if ph["status"] != "succeeded"]
    bad += [f"{ph['name']}/{a['agent']}" for ph in report["phases"] for a in ph["agents"]
            if a["status"] != "succeeded"]
    if report["status"] != "succeeded" or bad:
        fail(f"{tag}: run {report['status']}; not succeeded: {', '.join(bad[:10])}", p)
        return None, sdir
    return report, sdir


def rss_runs_of(path, tag):
    """RSS_RUNS runs under `peak_rss`, each in a fresh state dir: peak RSS
    (MiB) and wall (ms) of each, and how RSS was measured; None after a
    failure."""
    rsss, walls = [], []
    for _ in range(rss_runs):
        sdir = state_dir(tag)
        code, rss, how, wall = peak_rss(orch_run(path, sdir), tmp)
        shutil.rmtree(sdir, ignore_errors=True)
        if code != 0:
            fail(f"{tag}: a run for RSS exited {code}")
            return None
        rsss.append(rss / 1024)
        walls.append(wall * 1e3)
    return rsss, walls, how


def run_events(db):
    """`events WHERE <the run's, ? its id>`, for the schema of either orch
    (before step 7 an event held its run's id; now its attempt's)."""
    if "run_id" in [c[1] for c in db.execute("PRAGMA table_info(events)")]:
        return "events WHERE run_id = ?"
    return "events WHERE attempt_id IN (SELECT id FROM attempts WHERE run_id = ?)"


def stored_events(sdir, run_id=None):
    """(rows, distinct seq, min seq, max seq) of the events of the run."""
    db = sqlite3.connect(f"file:{os.path.join(sdir, 'state.db')}?mode=ro", uri=True)
    try:
        if run_id is None:
            (run_id,) = db.execute("SELECT run_id FROM runs ORDER BY started_ms DESC LIMIT 1").fetchone()
        return db.execute("SELECT count(*), count(DISTINCT seq), min(seq), max(seq)"
                          f" FROM {run_events(db)}", (run_id,)).fetchone()
    finally:
        db.close()


# ------------------------------------------------------------------- spawn

def floor():
    """The spawn floor: the same processes, same order, same limit; seconds."""
    down = [[] for _ in range(phases)]
    need = [len(d) for d in DEPS]
    for i, d in enumerate(DEPS):
        for x in d:
            down[x].append(i)
    ready = [i for i in range(phases) if need[i] == 0]
    heapq.heapify(ready)  # declaration order among ready phases, as orch
    fa = [(os.POSIX_SPAWN_DUP2, DEVNULL, 0), (os.POSIX_SPAWN_DUP2, DEVNULL, 1),
          (os.POSIX_SPAWN_DUP2, DEVNULL, 2)]
    env = os.environ
    running, done = {}, 0
    t0 = time.perf_counter()
    while done < phases:
        while ready and len(running) < PARALLEL:
            i = heapq.heappop(ready)
            pid = os.posix_spawn(TRUE, [TRUE], env, file_actions=fa, setpgroup=0)
            running[pid] = i
        pid, wstatus = os.waitpid(-1, 0)
        if wstatus != 0:
            raise SystemExit(f"FAIL floor: `true` exited with wait status {wstatus}")
        i = running.pop(pid)
        done += 1
        for k in down[i]:
            need[k] -= 1
            if need[k] == 0:
                heapq.heappush(ready, k)
    return time.perf_counter() - t0


def measure_spawn():
    global status
    print(f"== 1. spawn: {phases} phases of `true`, max_parallel = {PARALLEL}")
    report, _ = check_run(SPAWN, "spawn")
    if report is None:
        return
    if len(report["phases"]) != phases or sum(ph["attempts"] for ph in report["phases"]) != phases:
        fail(f"spawn: {len(report['phases'])} phases and"
             f" {sum(ph['attempts'] for ph in report['phases'])} attempts reported, want {phases}")
        return
    print(f"   check: exit 0, {phases} phases succeeded, {phases} attempts")
    floor()  # warm-up (the check run warmed orch up)
    fl, oc, ocpu = [], [], []
    with Load() as load:
        for _ in range(runs):
            fl.append(floor() * 1e3)
            wall, code, cpu, _ = once(orch_run(SPAWN, state_dir("spawn")))
            if code != 0:
                fail(f"spawn: a timed run exited {code}")
                return
            oc.append(wall * 1e3)
            ocpu.append(cpu * 1e3)
    per_med = (statistics.median(oc) - statistics.median(fl)) / phases
    per_min = (min(oc) - min(fl)) / phases
    print(f"   {runs} runs each, alternating")
    print(f"     floor wall ms  {stats(fl)}")
    print(f"     orch wall ms   {stats(oc)}")
    print(f"     orch CPU ms    {stats(ocpu)}   (user + sys, its `true` children included)")
    print(f"     overhead per phase: {per_med:.3f} ms from medians, {per_min:.3f} ms from minimums"
          f"   {verdict(per_med <= overhead_target, f'<= {overhead_target:g} ms')}")
    load.line("the timed runs")
    if per_med > overhead_target:
        status = max(status, 2)


# ------------------------------------------------------------------ events

def measure_events():
    global status
    print(f"== 2. events: one agent printing {events} JSON lines")
    report, sdir = check_run(EVENTS_TOML, "events")
    if report is None:
        return
    run_id = report["run_id"]
    rows, distinct, lo, hi = stored_events(sdir, run_id)
    db = sqlite3.connect(f"file:{os.path.join(sdir, 'state.db')}?mode=ro", uri=True)
    wrong = 0
    for n, (seq, kind, raw) in enumerate(db.execute(
            f"SELECT seq, kind, raw FROM {run_events(db)} ORDER BY seq", (run_id,))):
        if seq != n or raw != '{"type":"x","n":%d}' % n:
            wrong += 1
    db.close()
    shown = subprocess.run([orch, "--state-dir", sdir, "runs", "show", run_id, "--format", "json"],
                           capture_output=True, text=True)
    try:
        counted = sum(a.get("events", 0) for ph in json.loads(shown.stdout)["phases"]
                      for a in ph["agents"])
    except (ValueError, KeyError, TypeError):
        counted = None
    if (rows, distinct, lo, hi) != (events, events, 0, events - 1) or wrong or counted != events:
        fail(f"events: stored {rows} rows ({distinct} distinct seq, {lo}..{hi}), {wrong} out of"
             f" order or altered; `orch runs show` counts {counted}; want {events}")
        return
    print(f"   check: exit 0, {events} events stored in order with their lines;"
          f" `orch runs show` counts {counted}")
    shutil.rmtree(sdir, ignore_errors=True)
    # The agent alone, for reference: its output to /dev/null.
    alone = min(once([PYTHON, "-c", EMIT])[0] for _ in range(3)) * 1e3
    walls, cpus, rates = [], [], []
    with Load() as load:
        for _ in range(runs):
            sdir = state_dir("events")
            wall, code, cpu, _ = once(orch_run(EVENTS_TOML, sdir))
            if code != 0:
                fail(f"events: a timed run exited {code}")
                return
            got = stored_events(sdir)[0]
            shutil.rmtree(sdir, ignore_errors=True)
            if got != events:
                fail(f"events: a timed run stored {got} of {events} events")
                return
            walls.append(wall * 1e3)
            cpus.append(cpu * 1e3)
            rates.append(events / wall)
    measured = rss_runs_of(EVENTS_TOML, "events")
    if measured is None:
        return
    rsss, _, how = measured
    rate = statistics.median(rates)
    peak = max(rsss)
    print(f"   {runs} timed runs (every one checked: {events} events stored), {rss_runs} for RSS ({how})")
    print(f"     wall ms        {stats(walls)}   (the agent alone: {alone:.0f} ms)")
    print(f"     orch CPU ms    {stats(cpus)}   (user + sys, the agent included)")
    print(f"     events/s       min {min(rates):8.0f}  median {rate:8.0f}  max {max(rates):8.0f}"
          f"   {verdict(rate >= events_target, f'>= {events_target:,.0f}')}")
    print(f"     peak RSS MiB   {stats(rsss)}   {verdict(peak <= events_rss_target, f'<= {events_rss_target:g}')}")
    load.line("the timed runs")
    if rate < events_target or peak > events_rss_target:
        status = max(status, 2)


# -------------------------------------------------------------------- wide

def measure_wide():
    global status
    print(f"== 3. wide: {wide} agents `sleep 1` at once")
    report, sdir = check_run(WIDE_TOML, "wide")
    if report is None:
        return
    agents = report["phases"][0]["agents"]
    last_start = max(a["started_ms"] for a in agents)
    first_end = min(a["ended_ms"] for a in agents)
    if len(agents) != wide or last_start >= first_end:
        fail(f"wide: {len(agents)} agents; the last started at +{last_start - first_end} ms"
             " after the first ended, so they did not all run at once")
        return
    print(f"   check: exit 0, {wide} agents succeeded, all running at once"
          f" (starts spread over {last_start - min(a['started_ms'] for a in agents)} ms)")
    shutil.rmtree(sdir, ignore_errors=True)
    with Load() as load:
        measured = rss_runs_of(WIDE_TOML, "wide")
    if measured is None:
        return
    rsss, walls, how = measured
    peak = max(rsss)
    print(f"   {rss_runs} runs ({how})")
    print(f"     wall ms        {stats(walls)}   (for information)")
    print(f"     peak RSS MiB   {stats(rsss)}   {verdict(peak <= wide_rss_target, f'<= {wide_rss_target:g}')}")
    load.line("the runs")
    if peak > wide_rss_target:
        status = max(status, 2)


# ------------------------------------------------------------- confinement

def measure_confined():
    global status
    print(f"== 4. confinement: {phases} confined phases of `true` against {phases} unconfined")
    doctor = subprocess.run([orch, "doctor", "--format", "json"], capture_output=True, text=True)
    try:
        can = json.loads(doctor.stdout)["confinement"]
    except (ValueError, KeyError):
        can = {"state": "unknown"}
    if can.get("state") != "available":
        print(f"   skipped: orch cannot confine here ({can})")
        return
    report, sdir = check_run(CONFINED, "confined")
    if report is None:
        return
    explained = subprocess.run([orch, "explain", CONFINED, "--phase", "p0", "--format", "json"],
                               capture_output=True, text=True)
    inv = json.loads(explained.stdout)["invocations"][0]
    if inv["enforcement"]["permission"]["by"] != "os" or not inv["confinement"]:
        fail(f"confined: phase p0 is not confined: {inv['enforcement']['permission']}")
        return
    print(f"   check: exit 0, {phases} phases succeeded, each confined (Landlock ABI {can['abi']})")
    fl, un, co = [], [], []
    with Load() as load:
        for _ in range(runs):
            fl.append(floor() * 1e3)
            # The unconfined start without the process-tree cgroup either:
            # the figure is confinement and tree tracking together.
            os.environ["ORCH_CGROUPS"] = "off"
            wall, code, _, _ = once(orch_run(SPAWN, state_dir("spawn")))
            del os.environ["ORCH_CGROUPS"]
            un.append(wall * 1e3)
            wall2, code2, _, _ = once(orch_run(CONFINED, state_dir("confined")))
            co.append(wall2 * 1e3)
            if code or code2:
                fail(f"confined: a timed run exited {code or code2}")
                return
    med = statistics.median
    per_med = (med(co) - med(un)) / phases
    per_min = (min(co) - min(un)) / phases
    print(f"   {runs} runs each, alternating")
    print(f"     floor wall ms       {stats(fl)}")
    print(f"     unconfined wall ms  {stats(un)}   ({(med(un) - med(fl)) / phases:.3f} ms per phase over the floor)")
    print(f"     confined wall ms    {stats(co)}   ({(med(co) - med(fl)) / phases:.3f} ms per phase over the floor)")
    print(f"     confinement per agent start: {per_med:.3f} ms from medians, {per_min:.3f} ms from minimums"
          f"   {verdict(per_med <= confine_target, f'<= {confine_target:g} ms')}")
    load.line("the timed runs")
    if per_med > confine_target:
        status = max(status, 2)


measure_spawn()
measure_events()
measure_wide()
measure_confined()
print(f"== {'all targets met' if status == 0 else 'a run failed' if status == 1 else 'a target was missed'}")
sys.exit(status)
PY
