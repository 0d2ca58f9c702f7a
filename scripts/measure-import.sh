#!/usr/bin/env bash
# Whole-process cost of `orch state import FILE` for a run with many
# reports (issue: importing 16,000 reports took about 13 s).
#
#   bash scripts/measure-import.sh                 # 16,000 reports, 5 runs
#   REPORTS=64000 RUNS=3 bash scripts/measure-import.sh
#   ORCH=/path/to/orch bash scripts/measure-import.sh   # skip the build
#
# 1. builds the release binary (`cargo build --release`);
# 2. in a temporary directory, runs a one-phase pipeline (a `command` agent
#    running `true`) to get a real run in a fresh state directory, and adds
#    REPORTS reports to it with Python's sqlite3, as agents would through
#    orch's server: in groups of four (a task started, a comment on it, a
#    finding, the task completed; the comment and the completion name the
#    task), with a few reports said twice alike;
# 3. exports the run (`orch state export`) and checks that an import into
#    an empty state directory brings every report (the count, and each
#    task reference pointing at its task), and that importing again moves
#    nothing and changes nothing;
# 4. times RUNS imports into fresh, empty state directories ("first") and
#    RUNS imports of the same file again into one of them ("again": the
#    merge finds everything already there). Each timed run is one
#    posix_spawn/wait4 from Python; the wall time is the whole process.
#
# Target: a first import of 16,000 reports in at most 1 s (median).
#
# Exit status: 0 all good; 1 a run failed (non-zero exit, lost or doubled
# reports); 2 every run succeeded but the target was missed.
set -euo pipefail

RUNS=${RUNS:-5}
REPORTS=${REPORTS:-16000}
TARGET_S=${TARGET_S:-1}

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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orch-measure-import.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== $(uname -srm), $(nproc) CPU(s), $("$orch" --version 2>/dev/null || echo orch)"

PYTHONPATH="$root/scripts" PYTHONDONTWRITEBYTECODE=1 \
    python3 - "$tmp" "$orch" "$RUNS" "$REPORTS" "$TARGET_S" <<'PY'
import json
import os
import sqlite3
import statistics
import subprocess
import sys

from measure_common import Load, once, stats, verdict

tmp, orch, runs, reports, target = sys.argv[1:]
runs, reports, target = int(runs), int(reports), float(target)
RUN = "measure-import"
status = 0
os.chdir(tmp)


def orch_in(state, *args):
    return subprocess.run([orch, "--state-dir", state, *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)


def check(p, what):
    if p.returncode != 0:
        print(f"FAIL {what}: exit {p.returncode}\n{p.stderr.strip()[-2000:]}")
        sys.exit(1)


with open("p.toml", "w") as f:
    f.write('version = 1\nname = "import"\n'
            '[agents.noop]\nkind = "command"\ncommand = ["true"]\n'
            '[[phases]]\nname = "work"\nagents = ["noop"]\n')
check(orch_in("src", "run", "p.toml", "--run-id", RUN), "orch run")

# The reports, as orch's server appends them (ids in order; a task's
# comment and completion carry its id).
db = sqlite3.connect("src/state.db")
with db:
    for i in range(0, reports, 4):
        ts = 1_700_000_000_000 + i

        def add(kind, data, task=None, ts=ts):
            cur = db.execute(
                "INSERT INTO reports (run_id, phase, agent, attempt, ts_ms, kind, task_id, data_json)"
                " VALUES (?, 'work', 'noop', 1, ?, ?, ?, ?)",
                (RUN, ts, kind, task, json.dumps(data)))
            return cur.lastrowid

        task = add("task_started", {"task": f"task {i // 4}", "description": "change src/lib.rs"})
        add("comment", {"text": "looking at src/lib.rs" if i % 400 else "same words"}, task)
        # Every 100th group says its finding twice alike (same ms, same words).
        add("finding", {"severity": "low", "text": f"finding {i // 4 if i % 400 else 0}"},
            None, ts if i % 400 else 1_700_000_000_000)
        add("task_completed", {"task": f"task {i // 4}", "summary": "done"}, task)
    n = db.execute("SELECT count(*) FROM reports WHERE run_id = ?", (RUN,)).fetchone()[0]
db.close()
print(f"== {n} reports in run {RUN}")
check(orch_in("src", "state", "export", "--run", RUN, "-o", "run.db"), "orch state export")
print(f"   export: {os.path.getsize('run.db') // 1024} KiB")


def content(state):
    """The run's reports as content (each with its task's data, not its id)."""
    c = sqlite3.connect(os.path.join(state, "state.db"))
    rows = c.execute(
        "SELECT r.kind, r.ts_ms, r.data_json, t.data_json FROM reports r"
        " LEFT JOIN reports t ON t.id = r.task_id WHERE r.run_id = ? ORDER BY r.id",
        (RUN,)).fetchall()
    c.close()
    return rows


# Correctness first: every report once, task references intact, and a
# second import moves nothing.
want = content("src")
p = orch_in("check", "state", "import", "run.db", "--format", "json")
check(p, "orch state import")
moved = json.loads(p.stdout)["files"][0]["moved"]["reports"]
if moved != n or content("check") != want:
    print(f"FAIL the import moved {moved} of {n} reports, or changed them (timing goes on)")
    status = 1
p = orch_in("check", "state", "import", "run.db", "--format", "json")
check(p, "orch state import (again)")
moved = json.loads(p.stdout)["files"][0]["moved"]["reports"]
if moved != 0:
    print(f"FAIL importing again moved {moved} reports (timing goes on)")
    status = 1
if status == 0:
    print("   checked: every report imported once, task references intact; again: nothing moves")

first, again = [], []
with Load() as load:
    for i in range(runs):
        state = f"dst-{i}"
        wall, code, _, _ = once([orch, "--state-dir", state, "state", "import", "run.db"])
        if code != 0:
            print(f"FAIL import exited {code}")
            sys.exit(1)
        first.append(wall)
    for i in range(runs):
        wall, code, _, _ = once([orch, "--state-dir", "dst-0", "state", "import", "run.db"])
        if code != 0:
            print(f"FAIL import (again) exited {code}")
            sys.exit(1)
        again.append(wall)
print(f"== orch state import, {n} reports ({runs} runs each), seconds")
print(f"   first  {stats(first)}")
print(f"   again  {stats(again)}")
load.line("the imports")
ok = statistics.median(first) <= target
print(f"   first import, median: {statistics.median(first):.2f} s  {verdict(ok, f'<= {target:g} s')}")
sys.exit(status or (0 if ok else 2))
PY
