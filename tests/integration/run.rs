//! `orch run`: the demo, selection, outcomes, and supervised agents that
//! misbehave (time out, stall, crash, flood, leave children that ignore
//! TERM, are missing), Ctrl-C, SIGKILL and resume, and a busy state dir.
//! Agents here are plain commands, so these tests need no agent CLI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{cgroups_here, json_of, orch, root, run_in, skipped, stderr, stdout, write};

/// A scratch workspace with its own state dir (outside it, as orch
/// requires where an agent may write the workspace).
struct Space {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Space {
    fn new() -> Self {
        Space {
            dir: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn state(&self) -> &Path {
        self.state.path()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write `p.toml`: a pipeline named `t` with this body.
    fn pipeline(&self, body: &str) -> PathBuf {
        write(
            self.path(),
            "p.toml",
            &format!("version = 1\nname = \"t\"\n{body}"),
        )
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = orch();
        c.current_dir(self.path())
            .arg("--state-dir")
            .arg(self.state())
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> (Output, Value) {
        let out = self.run(args);
        let v = json_of(&out);
        (out, v)
    }

    /// `orch run FILE --format json EXTRA...`: how it ended, and its report.
    fn report(&self, file: &Path, extra: &[&str]) -> (Output, Value) {
        let mut args = vec!["run", file.to_str().unwrap(), "--format", "json"];
        args.extend_from_slice(extra);
        self.json(&args)
    }

    /// The recorded runs, newest first (`orch runs list --format json`).
    fn runs(&self) -> Value {
        self.json(&["runs", "list", "--format", "json"]).1
    }
}

fn phase_of<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {report}"))
}

fn phase_status<'a>(report: &'a Value, name: &str) -> &'a str {
    phase_of(report, name)["status"].as_str().unwrap()
}

#[test]
fn the_demo_runs() {
    let s = Space::new();
    let demo = root().join("pipelines/demo.toml");
    let (out, report) = s.report(&demo, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["status"], "succeeded");
    for p in ["prepare", "count", "shout", "report"] {
        assert_eq!(phase_status(&report, p), "succeeded");
    }
    let words = std::fs::read_to_string(s.path().join(".orch/demo/report.txt")).unwrap();
    assert_eq!(words.trim(), "words: 9, letters: 35");
    // count and shout are in the same stage: their agents overlapped.
    let span = |phase: &str| -> Vec<(u64, u64)> {
        phase_of(&report, phase)["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["started_ms"].as_u64().unwrap(),
                    a["ended_ms"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let count = span("count");
    assert_eq!(count.len(), 2);
    let (s0, e0) = span("shout")[0];
    assert!(
        count.iter().any(|&(s, e)| s < e0 && s0 < e),
        "{count:?} vs {:?}",
        (s0, e0)
    );
}

#[test]
fn phase_selection_runs_without_earlier_state() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.a]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo a > a.txt\"]\n\
         [agents.b]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo b > b.txt\"]\n\
         [[phases]]\nname = \"first\"\nagents = [\"a\"]\n\
         [[phases]]\nname = \"second\"\nagents = [\"b\"]\ndepends_on = [\"first\"]\n",
    );
    let (out, report) = s.report(&p, &["--phase", "second"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["phases"].as_array().unwrap().len(), 1);
    assert!(s.path().join("b.txt").exists());
    assert!(
        !s.path().join("a.txt").exists(),
        "--phase runs only that phase"
    );
    let (out, report) = s.report(&p, &["--from", "first"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["phases"].as_array().unwrap().len(), 2);
    assert_eq!(phase_status(&report, "first"), "succeeded");
    assert_eq!(phase_status(&report, "second"), "succeeded");
    assert!(
        s.path().join("a.txt").exists(),
        "--from runs the named phase too"
    );
}

#[test]
fn dry_run_spawns_nothing() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.a]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"touch spawned\"]\n\
         [[phases]]\nname = \"one\"\nagents = [\"a\"]\n",
    );
    let out = s.run(&["run", p.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("# stage 1 / one / a\nenv sh -c 'touch spawned'"),
        "{}",
        stdout(&out)
    );
    assert!(!s.path().join("spawned").exists());
    assert!(!s.state().join("state.db").exists());
}

#[test]
fn outcomes_follow_the_format() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.ok]\nkind = \"command\"\ncommand = [\"true\"]\n\
         [agents.bad]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo oops >&2; exit 3\"]\n\
         [[phases]]\nname = \"optional-fails\"\nagents = [\"bad\"]\nrequired = false\n\
         [[phases]]\nname = \"after-optional\"\nagents = [\"ok\"]\ndepends_on = [\"optional-fails\"]\n\
         [[phases]]\nname = \"required-fails\"\nagents = [\"bad\"]\n\
         [[phases]]\nname = \"after-required\"\nagents = [\"ok\"]\ndepends_on = [\"required-fails\"]\n\
         [[phases]]\nname = \"independent\"\nagents = [\"ok\"]\n\
         [[phases]]\nname = \"no-artifact\"\nagents = [\"ok\"]\nartifacts = [\"never.txt\"]\nrequired = false\n",
    );
    let (out, report) = s.report(&p, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed required phase fails the run"
    );
    assert_eq!(report["status"], "failed");
    assert_eq!(phase_status(&report, "optional-fails"), "failed");
    assert_eq!(phase_status(&report, "after-optional"), "succeeded");
    assert_eq!(phase_status(&report, "required-fails"), "failed");
    assert_eq!(phase_status(&report, "after-required"), "skipped");
    assert_eq!(phase_status(&report, "independent"), "succeeded");
    assert_eq!(phase_status(&report, "no-artifact"), "failed");
    let bad = &phase_of(&report, "required-fails")["agents"][0];
    assert_eq!(bad["exit_code"], 3);
}

#[test]
fn an_llm_cli_that_exits_0_without_its_result_event_failed() {
    // `/bin/true` as Claude Code: status 0, but no session ran.
    let s = Space::new();
    let p = s.pipeline(
        "[agents.claude]\nkind = \"claude\"\n\
         [[phases]]\nname = \"p\"\nagents = [\"claude\"]\nprompt = \"hi\"\n",
    );
    let (out, report) = s.report(&p, &["--agent-binary", "claude=/bin/true"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let agent = &phase_of(&report, "p")["agents"][0];
    assert_eq!(agent["status"], "failed");
    assert_eq!(agent["exit_code"], 0);
    assert!(
        agent["reason"]
            .as_str()
            .unwrap()
            .contains("without its final result event"),
        "{agent}"
    );
}

#[test]
fn retries_then_success() {
    let s = Space::new();
    // Fails twice, then succeeds: a counter file outside the agent.
    let p = s.pipeline(
        "[agents.flaky]\nkind = \"command\"\n\
         command = [\"sh\", \"-c\", \"n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -ge 3 ]\"]\n\
         [[phases]]\nname = \"flaky\"\nagents = [\"flaky\"]\nretries = 2\n",
    );
    let (out, report) = s.report(&p, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["phases"][0]["agents"][0]["attempts"], 3);
}

#[test]
fn a_rate_limit_waits_until_it_lifts() {
    let s = Space::new();
    // The first attempt is rate limited with a reset 4 s away (longer than
    // the at most 2.4 s backoff); the second succeeds. Each attempt notes
    // when it started.
    let p = s.pipeline(
        "[agents.limited]\nkind = \"command\"\n\
         command = [\"sh\", \"-c\", \"date +%s%N >> starts; [ -e seen ] && exit 0; touch seen; \
         echo 'API Error: 429 Too Many Requests. Please retry in 4s.' >&2; exit 1\"]\n\
         [[phases]]\nname = \"limited\"\nagents = [\"limited\"]\nretries = 1\n",
    );
    let (out, report) = s.report(&p, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["phases"][0]["agents"][0]["attempts"], 2);
    let starts: Vec<u128> = std::fs::read_to_string(s.path().join("starts"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let gap = Duration::from_nanos((starts[1] - starts[0]) as u64);
    assert!(gap >= Duration::from_millis(3900), "waited only {gap:?}");
    assert!(
        stderr(&out).contains("limited/limited: rate limited until"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn timeouts_stalls_crashes_floods() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.slow]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"while true; do echo tick; sleep 0.1; done\"]\n\
         [agents.stall]\nkind = \"command\"\ncommand = [\"sleep\", \"30\"]\n\
         [agents.crash]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"kill -SEGV $$\"]\n\
         [agents.flood]\nkind = \"command\"\n\
         command = [\"python3\", \"-c\", \"import sys; sys.stdout.write('x' * 10_000_000 + '\\\\n'); sys.stdout.write('\\\\x00\\\\xff garbage \\\\x1b[2J\\\\n')\"]\n\
         [[phases]]\nname = \"slow\"\nagents = [\"slow\"]\ntimeout = \"1s\"\nrequired = false\n\
         [[phases]]\nname = \"stall\"\nagents = [\"stall\"]\nstall_timeout = \"1s\"\nrequired = false\n\
         [[phases]]\nname = \"crash\"\nagents = [\"crash\"]\nrequired = false\n\
         [[phases]]\nname = \"flood\"\nagents = [\"flood\"]\n",
    );
    let start = Instant::now();
    let (out, report) = s.report(&p, &["--grace", "1"]);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "limits were enforced"
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(phase_status(&report, "slow"), "timed_out");
    assert_eq!(phase_status(&report, "stall"), "timed_out");
    assert_eq!(phase_status(&report, "crash"), "failed");
    assert_eq!(phase_status(&report, "flood"), "succeeded");
    let crash = phase_of(&report, "crash");
    assert!(
        crash["reason"].as_str().unwrap().contains("signal"),
        "{crash}"
    );
}

/// Processes whose command line mentions `marker`.
fn survivors(marker: &str) -> Vec<String> {
    let out = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(marker) && !l.contains("ps -eo"))
        .map(str::to_string)
        .collect()
}

#[test]
fn grandchildren_that_ignore_term_do_not_survive() {
    let s = Space::new();
    let marker = format!("orch-orphan-{}", std::process::id());
    let p = s.pipeline(&format!(
        "[agents.parent]\nkind = \"command\"\n\
         command = [\"bash\", \"-c\", \"(trap '' TERM; touch gc-up; exec -a {marker} sleep 60) & sleep 0.3; echo started; exit 0\"]\n\
         [[phases]]\nname = \"p\"\nagents = [\"parent\"]\n"
    ));
    let out = s.run(&["run", p.to_str().unwrap(), "--grace", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(s.path().join("gc-up").exists(), "the grandchild ran");
    std::thread::sleep(Duration::from_millis(200));
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));
}

#[test]
fn a_missing_binary_is_an_error_before_anything_starts() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.ok]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"touch started\"]\n\
         [agents.gone]\nkind = \"command\"\ncommand = [\"no-such-program-orch\"]\n\
         [[phases]]\nname = \"a\"\nagents = [\"ok\"]\n\
         [[phases]]\nname = \"b\"\nagents = [\"gone\"]\ndepends_on = [\"a\"]\n",
    );
    let out = s.run(&["run", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not found on PATH: `no-such-program-orch` (for b/gone)"),
        "{}",
        stderr(&out)
    );
    assert!(!s.path().join("started").exists(), "nothing was started");
}

fn spawn_run(s: &Space, file: &Path) -> Child {
    s.cmd(&["run", file.to_str().unwrap(), "--grace", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Poll until `done` holds; after `limit`, fail saying `why()`.
fn wait_until(limit: Duration, done: impl Fn() -> bool, why: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{}", why());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for(path: &Path) {
    wait_until(
        Duration::from_secs(20),
        || path.exists(),
        || format!("{} never appeared", path.display()),
    );
}

/// Wait until both of the test's `marker` processes run.
fn wait_for_two(marker: &str) {
    wait_until(
        Duration::from_secs(10),
        || survivors(marker).len() >= 2,
        || format!("{:?}", survivors(marker)),
    );
}

/// Ctrl-C, as a terminal sends it.
fn interrupt(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

#[test]
fn ctrl_c_stops_every_agent_and_records_the_run_as_interrupted() {
    let s = Space::new();
    let marker = format!("orch-sigint-{}", std::process::id());
    let p = s.pipeline(&format!(
        "[agents.a]\nkind = \"command\"\ncommand = [\"bash\", \"-c\", \"touch up-a; exec -a {marker} sleep 60\"]\n\
         [agents.b]\nkind = \"command\"\ncommand = [\"bash\", \"-c\", \"trap '' TERM; touch up-b; (exec -a {marker} sleep 60); sleep 60\"]\n\
         [[phases]]\nname = \"a\"\nagents = [\"a\"]\n\
         [[phases]]\nname = \"b\"\nagents = [\"b\"]\n"
    ));
    let mut child = spawn_run(&s, &p);
    wait_for(&s.path().join("up-a"));
    wait_for(&s.path().join("up-b"));
    wait_for_two(&marker);
    let sent = Instant::now();
    interrupt(&child);
    let status = child.wait().unwrap();
    // Grace period (1 s) plus one second.
    assert!(
        sent.elapsed() < Duration::from_secs(2) + Duration::from_millis(500),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    assert!(survivors(&marker).is_empty(), "{:?}", survivors(&marker));
    let runs = s.runs();
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
}

#[test]
fn sigkill_then_resume_continues_without_redoing_work() {
    let s = Space::new();
    let marker = format!("orch-sigkill-{}", std::process::id());
    let p = s.pipeline(&format!(
        "[agents.first]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo x >> first-ran; echo '{{\\\"line\\\": 1}}'\"]\n\
         [agents.second]\nkind = \"command\"\ncommand = [\"bash\", \"-c\", \"if [ -e go ]; then echo done > second-done; else (trap '' TERM; exec -a {marker} sleep 60) & touch second-up; exec -a {marker} sleep 60; fi\"]\n\
         [[phases]]\nname = \"first\"\nagents = [\"first\"]\n\
         [[phases]]\nname = \"second\"\nagents = [\"second\"]\ndepends_on = [\"first\"]\n",
    ));
    let mut child = spawn_run(&s, &p);
    wait_for(&s.path().join("second-up"));
    wait_for_two(&marker);
    child.kill().unwrap(); // SIGKILL: orch gets no chance to clean up
    child.wait().unwrap();
    // The keeper kills the agent's whole process group, the child that
    // ignores TERM included.
    wait_until(
        Duration::from_secs(2),
        || survivors(&marker).is_empty(),
        || format!("outlived orch: {:?}", survivors(&marker)),
    );

    let runs = s.runs();
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_string();
    // The line the finished phase's agent printed, as recorded.
    let first_printed = || {
        let (_, events) = s.json(&[
            "runs", "events", &run_id, "--phase", "first", "--format", "json",
        ]);
        let printed = events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["raw"] == r#"{"line": 1}"#);
        (printed, events)
    };
    let (printed, events) = first_printed();
    assert!(printed, "events of finished phases are kept: {events}");

    std::fs::write(s.path().join("go"), "").unwrap();
    let (out, report) = s.report(&p, &["--resume"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["run_id"], run_id.as_str(), "the same run continues");
    assert_eq!(
        std::fs::read_to_string(s.path().join("first-ran")).unwrap(),
        "x\n",
        "first did not run again"
    );
    assert!(s.path().join("second-done").exists());
    // The report goes on from the run as recorded: `first` as it ran
    // before the kill, `second` over both its attempts (the killed one
    // marked cancelled), as `orch runs show` has them.
    let first = phase_of(&report, "first");
    assert_eq!(first["status"], "succeeded", "{report}");
    assert!(first["started_ms"].is_u64(), "{report}");
    assert_eq!(first["agents"][0]["attempts"], 1, "{report}");
    let second = &phase_of(&report, "second")["agents"][0];
    assert_eq!(second["attempts"], 2, "{report}");
    assert_eq!(second["status"], "succeeded", "{report}");
    let (_, shown) = s.json(&["runs", "show", &run_id, "--format", "json"]);
    let attempts: Vec<&str> = shown["phases"][1]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(attempts, ["cancelled", "succeeded"], "{shown}");
    let (printed, events) = first_printed();
    assert!(printed, "still there after the resume: {events}");
    let runs = s.runs();
    assert_eq!(runs[0]["status"], "succeeded");

    // A changed pipeline refuses to resume without --force.
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{text}\n# changed\n")).unwrap();
    let out = s.run(&["run", p.to_str().unwrap(), "--resume"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("p.toml` changed"), "{}", stderr(&out));
    let out = s.run(&["run", p.to_str().unwrap(), "--resume", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_second_run_on_a_busy_state_dir_is_refused() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.wait]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"touch up; sleep 5\"]\n\
         [[phases]]\nname = \"w\"\nagents = [\"wait\"]\n",
    );
    let mut first = spawn_run(&s, &p);
    wait_for(&s.path().join("up"));
    let out = s.run(&["run", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("another orch run"),
        "{}",
        stderr(&out)
    );
    interrupt(&first);
    first.wait().unwrap();
    let runs = s.runs();
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "the refused run recorded nothing: {runs}"
    );
}

#[test]
fn max_parallel_caps_agent_processes() {
    let s = Space::new();
    // Six agents that each record when they start and stop; at most two
    // may overlap.
    let mut body = String::from("[defaults]\nmax_parallel = 2\n");
    let mut names = Vec::new();
    for i in 0..6 {
        body.push_str(&format!(
            "[agents.a{i}]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo start >> log; sleep 0.3; echo stop >> log\"]\n"
        ));
        names.push(format!("\"a{i}\""));
    }
    body.push_str(&format!(
        "[[phases]]\nname = \"wide\"\nagents = [{}]\nparallel = true\n",
        names.join(", ")
    ));
    let p = s.pipeline(&body);
    let out = s.run(&["run", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = std::fs::read_to_string(s.path().join("log")).unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for line in log.lines() {
        running += if line == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(log.lines().count(), 12);
    assert_eq!(most, 2, "{log}");
}

#[test]
fn a_terminal_gets_the_live_view_and_a_pipe_gets_plain_lines() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.a]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"sleep 0.6\"]\n\
         [[phases]]\nname = \"first\"\nagents = [\"a\"]\n",
    );
    // `script` gives orch a pseudo-terminal.
    let line = format!(
        "{} --state-dir {} run {}",
        env!("CARGO_BIN_EXE_orch"),
        s.state().display(),
        p.display()
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(s.path())
        .env_remove("CI")
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    // A spinner line for the running agent, redrawn in place.
    assert!(
        tty.contains("first/a") && tty.contains("\u{1b}[2K"),
        "{tty:?}"
    );
    assert!(tty.contains("first/a: attempt 1 succeeded"), "{tty:?}");
    assert!(
        tty.contains("run ") && tty.contains("succeeded (1 of 1 phases succeeded)"),
        "{tty:?}"
    );

    // Not a terminal: plain timestamped lines, no redraws.
    let out = s.run(&["run", p.to_str().unwrap()]);
    let plain = stderr(&out);
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    let first = plain.lines().next().unwrap();
    assert!(
        first.starts_with('[') && first.ends_with("] phase first: started"),
        "{first}"
    );
}

/// A failed attempt's reason carries the last line the process wrote on
/// stderr (capped), so "exited with status 41" comes with the CLI's own
/// explanation in the log, `runs show` and the report.
#[test]
fn a_failure_says_what_the_process_said() {
    let ws = tempfile::tempdir().unwrap();
    let long = "x".repeat(1000);
    write(
        ws.path(),
        "p.toml",
        &format!(
            "version = 1\nname = \"p\"\n[agents.t]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo out; echo 'error: set GEMINI_API_KEY' >&2; echo >&2; exit 41\"]\n\
             [agents.l]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo {long} >&2; exit 3\"]\n\
             [[phases]]\nname = \"a\"\nagents = [\"t\"]\n[[phases]]\nname = \"b\"\nagents = [\"l\"]\n"
        ),
    );
    let out = run_in(
        ws.path(),
        &["--state-dir", ".s", "run", "p.toml", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let shown = run_in(
        ws.path(),
        &[
            "--state-dir",
            ".s",
            "runs",
            "show",
            "latest",
            "--format",
            "json",
        ],
    );
    let v = json_of(&shown);
    let reason = |phase: &str| -> String {
        v["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == phase)
            .unwrap()["agents"][0]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        reason("a"),
        "exited with status 41; its last stderr line: error: set GEMINI_API_KEY"
    );
    let b = reason("b");
    assert!(
        b.starts_with("exited with status 3; its last stderr line: xxx"),
        "{b}"
    );
    assert!(b.len() < 400, "capped: {}", b.len());
}

/// `--dry-run` prints every process the run would start, the phase's
/// judge included (after its workers, marked as the judge).
#[test]
fn dry_run_lists_the_judge_too() {
    let out = crate::support::run(&[
        "run",
        "pipelines/judged-fix.toml",
        "--dry-run",
        "--input",
        "ticket=BUG-7",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let heads: Vec<String> = stdout(&out)
        .lines()
        .filter(|l| l.starts_with("# stage"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        heads,
        [
            "# stage 1 / implement / claude",
            "# stage 1 / implement / tests (judge)"
        ]
    );
    assert!(
        stdout(&out).contains("cargo test --quiet"),
        "{}",
        stdout(&out)
    );
}

/// orch killed with SIGKILL: a process its agent detached from its group
/// and session dies too, by the attempt's cgroup, which the keeper kills.
/// (The agent detaches it once it runs, as any agent's work does; see
/// `confinement::an_agent_is_in_its_attempts_cgroup_before_it_runs` for
/// one that detaches it at once.)
#[test]
fn a_process_that_left_its_group_dies_with_a_killed_orch() {
    if !cgroups_here() {
        skipped("no cgroups here: orch falls back to process groups, which this process left");
        return;
    }
    let s = Space::new();
    let marker = format!("orch-detached-{}", std::process::id());
    let p = s.pipeline(&format!(
        "[agents.a]\nkind = \"command\"\ncommand = [\"bash\", \"-c\", \"sleep 0.2; setsid bash -c 'exec -a {marker} sleep 60' </dev/null >/dev/null 2>&1 & touch up; sleep 60\"]\n\
         [[phases]]\nname = \"p\"\nagents = [\"a\"]\n",
    ));
    let mut child = spawn_run(&s, &p);
    wait_for(&s.path().join("up"));
    wait_until(
        Duration::from_secs(5),
        || !survivors(&marker).is_empty(),
        || "the detached process did not start".into(),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        Duration::from_secs(3),
        || survivors(&marker).is_empty(),
        || format!("outlived orch: {:?}", survivors(&marker)),
    );
}

/// An agent that leaves a process in a session of its own (`setsid`)
/// holding its stdout, then exits, or is stopped at its timeout (it
/// starts the process once it runs, as any agent's work does, so the
/// process is in the attempt's cgroup): the attempt ends when the agent's
/// process does (the escaped process is killed with the attempt's cgroup,
/// or as an orphan orch adopted where it has no cgroup; orch would stop
/// reading the pipes after a short grace anyway), and the run with it.
/// Before, orch waited for the pipes to close, for ever.
#[test]
fn a_process_that_left_its_group_holding_the_output_does_not_keep_the_run() {
    let cases = [
        ("on", "echo done", "succeeded"),
        ("off", "echo done", "succeeded"),
        ("on", "exec sleep 600", "timed_out"),
    ];
    for (i, (cgroups, then, status)) in cases.into_iter().enumerate() {
        let s = Space::new();
        let marker = format!("orch-holds-output-{}-{i}", std::process::id());
        let p = s.pipeline(&format!(
            "[agents.a]\nkind = \"command\"\ncommand = [\"bash\", \"-c\", \"sleep 0.2; setsid bash -c 'exec -a {marker} sleep 600' & touch up; {then}\"]\n\
             [[phases]]\nname = \"p\"\nagents = [\"a\"]\ntimeout = \"2s\"\nrequired = false\n",
        ));
        let child = s
            .cmd(&[
                "run",
                p.to_str().unwrap(),
                "--format",
                "json",
                "--grace",
                "1",
            ])
            .env("ORCH_CGROUPS", cgroups)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let what = format!("orch run (cgroups {cgroups}, then `{then}`)");
        let out = crate::support::finish_within(child, Duration::from_secs(30), &what);
        let took = started.elapsed();
        let left = survivors(&marker);
        for l in &left {
            if let Some(pid) = l.split_whitespace().next().and_then(|p| p.parse().ok()) {
                // SAFETY: the test's own leftover.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        assert!(s.path().join("up").exists(), "{what}: the agent ran");
        let report = json_of(&out);
        assert_eq!(phase_status(&report, "p"), status, "{what}: {report}");
        assert!(took < Duration::from_secs(15), "{what}: took {took:?}");
        assert!(
            left.is_empty(),
            "{what} (cgroups here: {}): outlived its attempt: {left:?}",
            cgroups_here()
        );
    }
}

/// A run left marked running, under the number of a process that is alive
/// (pid 1), by an orch that is gone: it does not hold the state directory
/// (liveness is the run lock, not a process number), the next run goes on
/// and marks it interrupted.
#[test]
fn a_run_left_running_under_a_live_number_blocks_nothing() {
    let s = Space::new();
    let p = s.pipeline(
        "[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"p\"\nagents = [\"a\"]\n",
    );
    let (out, _) = s.report(&p, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let conn = rusqlite::Connection::open(s.state().join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO runs (run_id, pipeline_name, pipeline_path, digest, digests_json, selection, pid, status, started_ms, ended_ms)
         VALUES ('ghost', 't', 'p.toml', 'd', '{}', 'all', 1, 'running', 1, NULL)",
        [],
    )
    .unwrap();
    drop(conn);
    let (out, report) = s.report(&p, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["status"], "succeeded");
    let runs = s.runs();
    let ghost = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "ghost")
        .cloned()
        .unwrap();
    assert_eq!(ghost["status"], "interrupted", "{runs}");
}

/// `--junit` asked to write where an agent planted a link (a folder of
/// the workspace made a link to elsewhere): orch refuses, the target is
/// untouched, and the run says the report could not be written; a plain
/// path works (the control).
#[test]
fn a_report_is_not_written_through_a_link_an_agent_planted() {
    let s = Space::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("junit.xml"), "keep").unwrap();
    let p = s.pipeline(&format!(
        "[agents.a]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"ln -s {} reports 2>/dev/null; true\"]\n[[phases]]\nname = \"p\"\nagents = [\"a\"]\n\
         [phases.tools]\npermission = \"workspace-write\"\n",
        outside.path().display()
    ));
    let out = s.run(&["run", p.to_str().unwrap(), "--junit", "reports/junit.xml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot write the JUnit report"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("junit.xml")).unwrap(),
        "keep"
    );
    let out = s.run(&["run", p.to_str().unwrap(), "--junit", "junit.xml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(s.path().join("junit.xml").is_file());
}

/// A contract's artifact is taken as it was accepted: a later phase that
/// rewrites the file does not change what the phases after it are given
/// (the accepted text), and the change is reported.
#[test]
fn an_accepted_artifact_changed_later_is_reported_and_not_passed_on() {
    let s = Space::new();
    let stand_in = crate::support::root().join("tests/mcp/stand_in_cli.py");
    std::fs::write(
        s.path().join("client.json"),
        serde_json::json!(["sh", "-c", "cat > prompt-seen.txt"]).to_string(),
    )
    .unwrap();
    let p = s.pipeline(&format!(
        "[agents.writer]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"run=$(head -n1 \\\"$ORCH_PROMPT_FILE\\\"); mkdir -p out; printf '# Plan\\\\n\\\\n## Steps\\\\n\\\\nACCEPTED-TEXT\\\\n' > out/plan-$run.md\"]\n\
         [agents.tamper]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"for f in out/plan-*.md; do echo TAMPERED-TEXT > $f; done\"]\n\
         [agents.claude]\nkind = \"claude\"\nbinary = \"{}\"\n\
         [[phases]]\nname = \"plan\"\nagents = [\"writer\"]\nprompt = \"{{{{run_id}}}}\"\nartifact = \"out/{{phase}}-{{run}}.md\"\nrequired_sections = [\"Steps\"]\n\
         [[phases]]\nname = \"tamper\"\nagents = [\"tamper\"]\ndepends_on = [\"plan\"]\n\
         [[phases]]\nname = \"use\"\nagents = [\"claude\"]\ndepends_on = [\"tamper\", \"plan\"]\nmode = \"fix\"\nprompt = \"Use the plan.\"\n\
         [phases.tools]\ninternal = [\"Read\", \"Write\"]\npermission = \"workspace-write\"\n",
        stand_in.display()
    ));
    let (out, report) = s.report(&p, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(report["status"], "succeeded");
    let seen = std::fs::read_to_string(s.path().join("prompt-seen.txt")).unwrap();
    assert!(seen.contains("ACCEPTED-TEXT"), "{seen}");
    assert!(!seen.contains("TAMPERED-TEXT"), "{seen}");
    assert!(
        stderr(&out).contains("changed after it was accepted"),
        "{}",
        stderr(&out)
    );
}
