//! The subcommands as a user sees them: plan, explain, validate, config.

use serde_json::{Value, json};

use crate::support::{flat_stderr, json_of, orch, root, run, run_in, stderr, stdout, write};

/// `orch ARGS` that succeeds, its stdout as JSON.
fn json_ok(args: &[&str]) -> Value {
    let out = run(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    json_of(&out)
}

/// `orch plan pipelines/demo.toml --format json EXTRA...`.
fn demo_plan(extra: &[&str]) -> Value {
    let mut args = vec!["plan", "pipelines/demo.toml", "--format", "json"];
    args.extend_from_slice(extra);
    json_ok(&args)
}

#[test]
fn plan_json_has_stages_and_edges() {
    let v = demo_plan(&[]);
    assert_eq!(v["pipeline"], "demo");
    assert_eq!(
        v["stages"],
        json!([["prepare"], ["count", "shout"], ["report"]])
    );
    assert_eq!(
        v["edges"],
        json!([
            {"from": "prepare", "to": "count"},
            {"from": "prepare", "to": "shout"},
            {"from": "count", "to": "report"}
        ])
    );
    let shout = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "shout")
        .unwrap();
    assert_eq!(shout["stage"], 2);
    assert_eq!(shout["required"], false);
}

#[test]
fn plan_text() {
    let out = run(&["plan", "pipelines/demo.toml"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "pipeline `demo`: 4 phases in 3 stages

stage 1
  prepare  prepare (fix)

stage 2
  count    count-words, count-letters (fix, parallel)  after prepare
  shout    shout (fix, optional)  after prepare

stage 3
  report   report (fix)  after count
"
    );
}

#[test]
fn plan_mermaid_and_dot() {
    let out = run(&["plan", "pipelines/demo.toml", "--format", "mermaid"]);
    let m = stdout(&out);
    assert!(m.starts_with("flowchart TD\n"), "{m}");
    assert!(
        m.contains("  p0 --> p1\n") && m.contains("  p1 --> p3\n"),
        "{m}"
    );
    let out = run(&["plan", "pipelines/demo.toml", "--format", "dot"]);
    let d = stdout(&out);
    assert!(d.starts_with("digraph \"demo\" {\n"), "{d}");
    assert!(d.contains("  \"prepare\" -> \"count\";\n"), "{d}");
    assert!(
        d.contains("style=dashed"),
        "optional phases are dashed: {d}"
    );
    assert!(d.trim_end().ends_with('}'));
}

#[test]
fn plan_selection() {
    let v = demo_plan(&["--from", "count"]);
    assert_eq!(v["stages"], json!([["count"], ["report"]]));
    assert_eq!(v["edges"], json!([{"from": "count", "to": "report"}]));
    let v = demo_plan(&["--phase", "shout"]);
    assert_eq!(v["stages"], json!([["shout"]]));
}

#[test]
fn unknown_phase_is_a_usage_error_with_a_suggestion() {
    let out = run(&["plan", "pipelines/demo.toml", "--from", "cuont"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean `count`?"),
        "{}",
        stderr(&out)
    );
    let out = run(&["explain", "pipelines/demo.toml", "--phase", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&[
        "explain",
        "pipelines/research-audit.toml",
        "--phase",
        "audit",
        "--agent",
        "claude",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no agent `claude` in phase `audit`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn mode_layer_applies_when_the_phase_sets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "p.toml",
        r#"version = 1
name = "modes"

[agents.claude.modes.review]
internal = ["Read", "Grep"]
max_turns = 7

[[phases]]
name = "look"
agents = ["claude", "gemini"]
mode = "review"
prompt = "Review."
[phases.tools]
max_turns = 9
"#,
    );
    let v = json_ok(&["explain", file.to_str().unwrap(), "--format", "json"]);
    let claude = &v["invocations"][0];
    assert_eq!(claude["toolset"]["internal"], json!(["Read", "Grep"]));
    assert_eq!(claude["provenance"]["internal"]["layer"], "mode");
    assert!(
        claude["provenance"]["internal"]["at"]
            .as_str()
            .unwrap()
            .ends_with("p.toml:5:12")
    );
    assert_eq!(
        claude["toolset"]["max_turns"], 9,
        "the phase layer beats the mode layer"
    );
    assert_eq!(claude["provenance"]["permission"]["layer"], "default");
    let gemini = &v["invocations"][1];
    assert_eq!(
        gemini["toolset"]["internal"],
        json!(["Read", "Glob", "Grep"])
    );
    assert_eq!(gemini["provenance"]["internal"]["layer"], "default");
}

#[test]
fn validate_many_files_reports_each() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.toml",
        "version = 1\nname = \"x\"\n[[phases]]\nname = \"a\"\nagents = [\"claud\"]\nprompt = \"p\"\n",
    );
    let out = run(&["validate", "pipelines/demo.toml", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("ok: `pipelines/demo.toml`"));
    let err = stderr(&out);
    assert!(
        err.contains("unknown agent `claud`") && err.contains("did you mean `claude`?"),
        "{err}"
    );
    assert!(err.contains("bad.toml:5:11"), "{err}");

    let out = run(&[
        "validate",
        "--format",
        "json",
        "pipelines/demo.toml",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let v = json_of(&out);
    assert_eq!(v["valid"], false);
    assert_eq!(v["files"][0]["valid"], true);
    assert_eq!(v["files"][1]["errors"], 1);
    let d = &v["diagnostics"][0];
    assert_eq!(d["code"], "orch::pipeline::unknown_agent");
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(5), Some(11))
    );
    assert_eq!(d["help"], "did you mean `claude`?");
}

#[test]
fn missing_file_is_exit_2() {
    let out = run(&["validate", "no/such/pipeline.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("could not read `no/such/pipeline.toml`: no such file"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["validate"]).status.code(), Some(2));
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        run(&["plan", "pipelines/demo.toml", "--format", "pdf"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn config_layers_and_sources() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("orch")).unwrap();
    write(
        &home.path().join("orch"),
        "config.toml",
        "state_dir = \"/from/user\"\nmax_parallel = 3\n[agents.codex]\nbinary = \"/user/codex\"\n",
    );
    write(project.path(), "orch.toml", "max_parallel = 5\n");
    let rows = |extra_env: &[(&str, &str)], args: &[&str]| -> Vec<Value> {
        let mut c = orch();
        c.current_dir(project.path())
            .env("XDG_CONFIG_HOME", home.path())
            .args(["config", "--format", "json"])
            .args(args);
        for (k, v) in extra_env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    };
    let get = |rows: &[Value], key: &str| -> (String, String) {
        let r = rows
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("{key}"));
        (
            r["value"].as_str().unwrap().into(),
            r["source"].as_str().unwrap().into(),
        )
    };
    let r = rows(&[], &[]);
    assert_eq!(get(&r, "state_dir").0, "/from/user");
    assert!(get(&r, "state_dir").1.starts_with("user config"));
    assert_eq!(get(&r, "max_parallel").0, "5");
    assert!(get(&r, "max_parallel").1.starts_with("project config"));
    assert_eq!(get(&r, "agents.codex.binary").0, "/user/codex");
    assert_eq!(get(&r, "confinement"), ("auto".into(), "default".into()));
    assert_eq!(
        get(&r, "agents.gemini.binary"),
        ("gemini".into(), "default".into())
    );

    let r = rows(
        &[
            ("ORCH_MAX_PARALLEL", "6"),
            ("ORCH_AGENTS__GEMINI__BINARY", "/env/gemini"),
        ],
        &[],
    );
    assert_eq!(get(&r, "max_parallel").0, "6");
    assert!(
        get(&r, "max_parallel").1.contains("ORCH_"),
        "{:?}",
        get(&r, "max_parallel")
    );
    assert_eq!(get(&r, "agents.gemini.binary").0, "/env/gemini");

    let r = rows(
        &[("ORCH_MAX_PARALLEL", "6")],
        &[
            "--max-parallel",
            "7",
            "--state-dir",
            "/flag",
            "--agent-binary",
            "codex=/flag/codex",
        ],
    );
    assert_eq!(get(&r, "max_parallel"), ("7".into(), "command line".into()));
    assert_eq!(
        get(&r, "state_dir"),
        ("/flag".into(), "command line".into())
    );
    assert_eq!(get(&r, "agents.codex.binary").0, "/flag/codex");
}

#[test]
fn a_repository_settings_file_cannot_choose_what_runs() {
    // A pull request adding `./orch.toml` must not swap an agent's binary,
    // widen what it inherits or turn confinement off.
    let project = tempfile::tempdir().unwrap();
    for (text, key) in [
        (
            "[agents.claude]\nbinary = \"./evil\"\n",
            "agents.claude.binary",
        ),
        (
            "[agents.claude]\npass_env = [\"AWS_SECRET_ACCESS_KEY\"]\n",
            "agents.claude.pass_env",
        ),
        ("confinement = \"off\"\n", "confinement"),
    ] {
        write(project.path(), "orch.toml", text);
        let out = run_in(
            project.path(),
            &[
                "validate",
                &root().join("pipelines/demo.toml").display().to_string(),
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{key}");
        let err = flat_stderr(&out);
        assert!(
            err.contains(&format!("`{key}`")) && err.contains("your user config"),
            "{err}"
        );
    }
}

#[test]
fn config_rejects_bad_settings() {
    let project = tempfile::tempdir().unwrap();
    write(project.path(), "orch.toml", "max_paralel = 5\n");
    let out = run_in(project.path(), &["config"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("max_paralel"), "{}", stderr(&out));
    let out = run(&["config", "--agent-binary", "nope=/x"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn toolsets_for_plain_commands_are_refused_only_when_aimed_at_them() {
    let dir = tempfile::tempdir().unwrap();
    // `orch validate` of a pipeline with one command agent, `tests`, and `rest`.
    let validate = |name: &str, rest: &str| {
        let head = "version = 1\nname = \"cmds\"\n[agents.tests]\nkind = \"command\"\ncommand = [\"true\"]\n";
        let file = write(dir.path(), name, &format!("{head}{rest}"));
        run(&["validate", file.to_str().unwrap()])
    };
    // Phase tools in a phase of commands only: a tool list is a
    // restriction orch cannot honour for a command...
    let out = validate(
        "only.toml",
        "[[phases]]\nname = \"t\"\nagents = [\"tests\"]\n[phases.tools]\ninternal = [\"Read\"]\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`tools` is not enforced for agent `tests` (a command agent)")
            && stderr(&out).contains("only `permission` is"),
        "{}",
        stderr(&out)
    );
    // ... but a permission is: orch confines the command by it.
    let read_only = "[[phases]]\nname = \"t\"\nagents = [\"tests\"]\n[phases.tools]\npermission = \"read-only\"\n";
    let out = validate("permission.toml", read_only);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    // Where nothing can confine it, that is refused, with the reason.
    let file = write(
        dir.path(),
        "off.toml",
        &format!(
            "version = 1\nname = \"cmds\"\n[agents.tests]\nkind = \"command\"\ncommand = [\"true\"]\n{read_only}"
        ),
    );
    let out = orch()
        .env("ORCH_CONFINEMENT", "off")
        .args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        flat_stderr(&out)
            .contains("`permission` is not enforced for agent `tests` (a command agent)")
            && flat_stderr(&out).contains("confinement = \"off\""),
        "{}",
        stderr(&out)
    );
    // In a mixed phase, the phase's tools are for the LLM agent: not even a
    // warning.
    let out = validate(
        "mixed.toml",
        "[[phases]]\nname = \"t\"\nagents = [\"claude\", \"tests\"]\nmode = \"audit\"\nprompt = \"p\"\n[phases.tools]\npermission = \"read-only\"\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    // Best-effort turns the refusal into a warning.
    let out = validate(
        "soft.toml",
        "[defaults]\nenforcement = \"best-effort\"\n[[phases]]\nname = \"t\"\nagents = [\"tests\"]\n[phases.agent_tools.tests]\nmax_turns = 3\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("⚠ `tools` is not enforced for agent `tests` (a command agent)"),
        "{}",
        stderr(&out)
    );
}

/// Exit code of `orch ARGS` with stderr closed before it writes anything.
fn exit_with_stderr_closed(args: &[&str], dir: &std::path::Path) -> Option<i32> {
    let mut child = orch()
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    child.wait().unwrap().code()
}

#[test]
fn a_closed_stderr_does_not_change_the_exit_code() {
    // Diagnostics, progress and summaries go to stderr; the exit code is the
    // command's verdict whether or not anyone reads them.
    let dir = tempfile::tempdir().unwrap();
    let invalid = crate::support::root().join("tests/fixtures/invalid/bad_name.toml");
    assert_eq!(
        exit_with_stderr_closed(&["validate", invalid.to_str().unwrap()], dir.path()),
        Some(2)
    );
    let failing = write(
        dir.path(),
        "p.toml",
        "version = 1\nname = \"t\"\n[agents.no]\nkind = \"command\"\ncommand = [\"false\"]\n\
         [[phases]]\nname = \"a\"\nagents = [\"no\"]\n",
    );
    let state = dir.path().join("state");
    assert_eq!(
        exit_with_stderr_closed(
            &[
                "--state-dir",
                state.to_str().unwrap(),
                "run",
                failing.to_str().unwrap()
            ],
            dir.path()
        ),
        Some(1)
    );
}

/// Without a FILE, run, validate, plan, explain and prompt use
/// `pipeline.toml` here, else the only file in `pipelines/` or
/// `.orch/pipelines/`; none or several is an error that lists them.
#[test]
fn a_pipeline_is_found_without_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let at = |args: &[&str]| run_in(d.path(), &[&["--state-dir", ".state"][..], args].concat());
    let one = |name: &str| {
        format!(
            "version = 1\nname = \"{name}\"\n[agents.say]\nkind = \"command\"\ncommand = [\"true\"]\n\
             [[phases]]\nname = \"only\"\nagents = [\"say\"]\nprompt = \"hi\"\n"
        )
    };
    let o = at(&["validate"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(
            "none found: looked for pipeline.toml, then pipelines/*.toml and .orch/pipelines/*.toml"
        ),
        "{e}"
    );
    assert!(e.contains("orch init"), "{e}");

    write(d.path(), ".orch/pipelines/ci.toml", &one("hidden"));
    for args in [
        &["validate"][..],
        &["plan"],
        &["explain"],
        &["prompt", "--phase", "only", "--agent", "say"],
        &["run"],
    ] {
        let o = at(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = at(&["plan", "--format", "json"]);
    assert_eq!(json_of(&o)["pipeline"], "hidden", "{}", stdout(&o));
    assert_eq!(stderr(&o), "using .orch/pipelines/ci.toml\n");

    write(d.path(), "pipelines/a.toml", &one("a"));
    let o = at(&["run"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("2 were found: pipelines/a.toml, .orch/pipelines/ci.toml"),
        "{e}"
    );
    // Naming one still works; pipeline.toml here wins over the folders.
    assert!(at(&["validate", "pipelines/a.toml"]).status.success());
    write(d.path(), "pipeline.toml", &one("top"));
    let o = at(&["plan", "--format", "json"]);
    assert_eq!(json_of(&o)["pipeline"], "top", "{}", stdout(&o));
}

/// Bash completions from `orch completions bash` complete orch's real
/// subcommands and options (sourced into bash and asked, as a user's
/// shell would); the other shells' scripts name them too.
#[test]
fn completions_complete_the_real_commands() {
    let o = run(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = stdout(&o);
    let ask = |line: &str| -> Vec<String> {
        let words: Vec<&str> = line.split(' ').collect();
        let probe = format!(
            "{script}\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n_orch orch '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            words = words
                .iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" "),
            cword = words.len() - 1,
            cur = words[words.len() - 1],
            prev = words[words.len() - 2],
        );
        let o = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &probe])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).lines().map(str::to_string).collect()
    };
    let subs = ask("orch ex");
    assert!(subs.contains(&"explain".to_string()), "{subs:?}");
    assert!(subs.contains(&"export".to_string()), "{subs:?}");
    let opts = ask("orch export github-actions --orch-");
    for want in ["--orch-git", "--orch-rev", "--orch-binary", "--orch-sha256"] {
        assert!(opts.iter().any(|o| o == want), "{want}: {opts:?}");
    }
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let o = run(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let s = stdout(&o);
        assert!(
            s.contains("explain") && s.contains("orch-sha256"),
            "{shell}"
        );
    }
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `orch man` renders a page groff reads without a warning, and `--dir`
/// writes one per command, every visible subcommand included.
#[test]
fn man_pages_render_for_every_command() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["man", "--dir", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut pages: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
        .collect();
    pages.sort();
    for want in [
        "orch.1",
        "orch-run.1",
        "orch-runs-show.1",
        "orch-export-github-actions.1",
        "orch-state-import.1",
        "orch-completions.1",
    ] {
        assert!(pages.contains(&want.to_string()), "{want}: {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.contains("keep-groups")),
        "{pages:?}"
    );
    let o = run(&["man"]);
    assert!(o.status.success());
    std::fs::write(d.path().join("stdout.1"), o.stdout).unwrap();
    for page in ["stdout.1", "orch-run.1", "orch-explain.1"] {
        let text = std::fs::read_to_string(d.path().join(page)).unwrap();
        assert!(text.contains(".TH ") && text.contains(".SH NAME"), "{page}");
        // groff, where the machine has it, reads it without a warning.
        let Ok(o) = std::process::Command::new("groff")
            .args(["-man", "-ww", "-z"])
            .arg(d.path().join(page))
            .output()
        else {
            eprintln!("groff is not installed: {page} checked for its sections only");
            continue;
        };
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{page}: {}",
            stderr(&o)
        );
    }
    let text = std::fs::read_to_string(d.path().join("orch-run.1")).unwrap();
    let footer = format!("\"orch {}\"", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&footer), "{}", &text[..200]);
    assert!(text.contains("\\-\\-max\\-parallel") || text.contains("max-parallel"));
}

/// `orch init` writes a starter that validates here under strict
/// enforcement for every agent CLI and for all of them together, with the
/// audit read-only and every field enforced by someone; it overwrites
/// nothing; `--settings` writes an `orch.toml` that orch reads.
#[test]
fn init_writes_a_starter_that_validates_for_every_agent() {
    let all = "claude,codex,gemini,opencode,copilot";
    for confinement in ["auto", "off"] {
        for agents in ["claude", "codex", "gemini", "opencode", "copilot", all] {
            let d = tempfile::tempdir().unwrap();
            let at = |args: &[&str]| {
                orch()
                    .current_dir(d.path())
                    .env("ORCH_CONFINEMENT", confinement)
                    .args(args)
                    .output()
                    .unwrap()
            };
            let o = at(&["init", "--agents", agents]);
            assert!(o.status.success(), "{agents}/{confinement}: {}", stderr(&o));
            assert!(stdout(&o).contains("orch validate"), "{}", stdout(&o));
            let text = std::fs::read_to_string(d.path().join("pipeline.toml")).unwrap();
            assert!(text.starts_with("#:schema .orch/pipeline.schema.json\n"));
            // Its comments say who holds read-only, truly for this machine;
            // a shell only where something holds it.
            let confines = confinement == "auto" && landlock_here();
            assert_eq!(text.contains("# held by the OS"), confines, "{text}");
            assert_eq!(
                text.contains("# held by each CLI's own rules"),
                !confines,
                "{text}"
            );
            let bash = text.contains(r#""Write", "Bash"]"#);
            assert_eq!(
                bash,
                confines || agents == "codex" || agents.starts_with("codex,"),
                "{agents}/{confinement}: {text}"
            );
            assert!(d.path().join(".orch/pipeline.schema.json").is_file());
            assert!(!d.path().join("orch.toml").exists());
            let o = at(&["validate"]);
            assert!(o.status.success(), "{agents}/{confinement}: {}", stderr(&o));
            assert_eq!(
                stderr(&o),
                "using pipeline.toml\n",
                "{agents}/{confinement}: a warning"
            );
            let o = at(&["explain", "--format", "json"]);
            let v = json_of(&o);
            let invs = v["invocations"].as_array().unwrap();
            assert_eq!(invs.len(), agents.split(',').count() + 1);
            for inv in invs {
                let where_ = format!("{agents}/{confinement}: {}/{}", inv["phase"], inv["agent"]);
                let want = if inv["phase"] == "audit" {
                    "read-only"
                } else {
                    "workspace-write"
                };
                assert_eq!(inv["toolset"]["permission"], want, "{where_}");
                for (field, e) in inv["enforcement"].as_object().unwrap() {
                    assert_ne!(e["by"], "none", "{where_}: {field}: {e}");
                }
            }
            // Nothing is overwritten.
            std::fs::write(d.path().join("pipeline.toml"), "# mine\n").unwrap();
            let o = at(&["init", "--agents", agents]);
            assert_eq!(o.status.code(), Some(2));
            assert!(stderr(&o).contains("does not overwrite"), "{}", stderr(&o));
            assert_eq!(
                std::fs::read_to_string(d.path().join("pipeline.toml")).unwrap(),
                "# mine\n"
            );
        }
    }
    let d = tempfile::tempdir().unwrap();
    let o = orch()
        .current_dir(d.path())
        .args(["init", "proj", "--agents", "codex,claude", "--settings"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("cd proj && orch run"), "{}", stdout(&o));
    // Its commented-out keys, switched on, are settings orch accepts.
    let settings = d.path().join("proj/orch.toml");
    let on: String = std::fs::read_to_string(&settings)
        .unwrap()
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.contains(" = ") || rest.starts_with('[') => format!("{rest}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    assert!(
        on.contains("\nmax_parallel = 2\n") && on.contains("\n[instructions]\n"),
        "{on}"
    );
    std::fs::write(&settings, on).unwrap();
    let o = orch()
        .current_dir(d.path().join("proj"))
        .args(["config", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = json_of(&o);
    for key in ["state_dir", "max_parallel", "knowledge", "prompt_tokens"] {
        let row = shown
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap();
        assert_eq!(row["source"], "project config (orch.toml)", "{key}");
    }
    // A file where a folder must go: refused before anything is written.
    std::fs::write(d.path().join("blocked"), "").unwrap();
    std::fs::create_dir_all(d.path().join("half")).unwrap();
    std::fs::write(d.path().join("half/.orch"), "").unwrap();
    for (dir, says) in [
        ("blocked", "`blocked` is not a folder"),
        ("half", "`half/.orch` is not a folder"),
    ] {
        let o = orch()
            .current_dir(d.path())
            .args(["init", dir, "--agents", "codex"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    assert!(!d.path().join("half/pipeline.toml").exists());
    // A folder name with a space is quoted in the next steps.
    let o = orch()
        .current_dir(d.path())
        .args(["init", "my dir", "--agents", "codex"])
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains("cd 'my dir' && orch run"),
        "{}",
        stdout(&o)
    );
    for bad in ["bogus", "command", ","] {
        let o = orch()
            .current_dir(d.path())
            .args(["init", "other", "--agents", bad])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&o).contains("choose from: claude, codex"),
            "{}",
            stderr(&o)
        );
        assert!(!d.path().join("other/pipeline.toml").exists());
    }
}

/// Whether orch can confine agents on this machine (`orch doctor`).
fn landlock_here() -> bool {
    let o = run(&["doctor", "--format", "json"]);
    json_of(&o)["confinement"]["state"] == "available"
}
