//! OS confinement through the built `orch`: what validates where orch can
//! confine (this machine: the suite needs Landlock) and what fails closed
//! where it cannot (`ORCH_CONFINEMENT=off`), and what a confined plain
//! command can and cannot do. The real agent CLIs under confinement are in
//! `e2e/confined.rs`.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::{
    cgroups_here, flat_stderr, json_of, orch, rooms, run_in, skipped, stderr, stdout, write,
};

/// `orch validate FILE` with confinement on (the machine's) or off.
fn validate(file: &Path, confined: bool) -> Output {
    let mut c = orch();
    if !confined {
        c.env("ORCH_CONFINEMENT", "off");
    }
    c.args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap()
}

/// `orch explain --format json` of a file.
fn explain(file: &Path) -> Value {
    let out = orch()
        .args(["explain", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)
}

/// The four pipelines of the issue that brought confinement: each valid
/// where orch confines, each refused with its reason where it cannot.
#[test]
fn what_confinement_makes_enforceable_and_what_fails_closed_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, String, &str); 4] = [
        (
            // 1. A command pattern under read-only: a write boundary only
            //    where the OS holds it.
            "pattern",
            "version = 1\nname = \"p\"\n[[phases]]\nname = \"audit\"\nagents = [\"claude\", \"gemini\", \"opencode\", \"copilot\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n[phases.tools]\ninternal = [\"Read\", \"Grep\", \"Bash(python3 *)\"]\npermission = \"read-only\"\n".into(),
            "`Bash(python3 *)` starts programs",
        ),
        (
            // 2. The most common pipeline: the built-in `fix` defaults.
            "fix-defaults",
            ["claude", "codex", "gemini", "opencode", "copilot"]
                .iter()
                .map(|a| format!("[[phases]]\nname = \"fix-{a}\"\nagents = [\"{a}\"]\nprompt = \"Fix the bug.\"\n"))
                .fold("version = 1\nname = \"d\"\n".to_string(), |acc, p| acc + &p),
            "`Bash` starts programs",
        ),
        (
            // 3. One phase-level ToolSet for Codex and the others.
            "one-toolset",
            "version = 1\nname = \"o\"\n[[phases]]\nname = \"fix\"\nagents = [\"claude\", \"codex\", \"gemini\", \"opencode\", \"copilot\"]\nmode = \"fix\"\nprompt = \"Fix.\"\n[phases.tools]\ninternal = [\"Read\", \"Write\", \"Edit\", \"Glob\", \"Grep\", \"Bash\"]\npermission = \"workspace-write\"\n".into(),
            "`Bash` starts programs",
        ),
        (
            // 4. A stdio MCP server's tool under read-only.
            "mcp-server",
            "version = 1\nname = \"m\"\n[mcp_servers.fs]\ncommand = [\"fs-mcp\"]\n[[phases]]\nname = \"audit\"\nagents = [\"claude\", \"codex\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n[phases.tools]\nmcp = [\"mcp__fs__write_file\"]\n".into(),
            "MCP server `fs` runs with every right of its user",
        ),
    ];
    for (name, text, reason) in cases {
        let file = write(dir.path(), &format!("{name}.toml"), &text);
        let out = validate(&file, true);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{name}");
        // Every agent's permission is held by the OS, and explain says so.
        for inv in explain(&file)["invocations"].as_array().unwrap() {
            assert_eq!(
                inv["enforcement"]["permission"]["by"], "os",
                "{name}: {inv:#}"
            );
            assert!(
                inv["confinement"]["policy"]["writable"].is_array(),
                "{name}"
            );
        }
        let out = validate(&file, false);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = flat_stderr(&out);
        assert!(
            err.contains(reason)
                && err.contains("nothing confines it")
                && err.contains("OS confinement is off"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_server_the_pipeline_vouches_for_is_taken_at_its_word_without_confinement() {
    let dir = tempfile::tempdir().unwrap();
    let text = "version = 1\nname = \"m\"\n[mcp_servers.docs]\ncommand = [\"docs-mcp\"]\nread_only = true\n[[phases]]\nname = \"audit\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n[phases.tools]\nmcp = [\"mcp__docs__search\"]\n";
    let file = write(dir.path(), "vouched.toml", text);
    let out = validate(&file, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // `Bash(*)` is plain `Bash`: a pattern that matches everything is none.
    let text = "version = 1\nname = \"s\"\n[[phases]]\nname = \"audit\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n[phases.tools]\ninternal = [\"Read\", \"Bash(*)\"]\n";
    let file = write(dir.path(), "star.toml", text);
    let v = explain(&file);
    assert_eq!(
        v["invocations"][0]["toolset"]["internal"],
        serde_json::json!(["Read", "Bash"]),
        "{v:#}"
    );
}

/// A pipeline of one command agent, run by `orch run` in `work` with
/// `home` as the real home and attempts under `cache`.
fn run_command(
    work: &Path,
    home: &Path,
    cache: &Path,
    command: &str,
    permission: Option<&str>,
) -> (Output, Value) {
    run_command_with(work, home, cache, command, permission, &[])
}

/// [`run_command`] with more variables in orch's environment.
fn run_command_with(
    work: &Path,
    home: &Path,
    cache: &Path,
    command: &str,
    permission: Option<&str>,
    env: &[(&str, String)],
) -> (Output, Value) {
    let tools = permission.map_or(String::new(), |p| {
        format!("[phases.tools]\npermission = \"{p}\"\n")
    });
    let text = format!(
        "version = 1\nname = \"c\"\n[agents.sh]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {}]\n[[phases]]\nname = \"run\"\nagents = [\"sh\"]\n{tools}",
        serde_json::to_string(command).unwrap()
    );
    let file = write(work, "pipeline.toml", &text);
    let out = orch()
        .current_dir(work)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", cache)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["run", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

#[test]
fn a_read_only_command_cannot_change_the_sources_nor_read_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    for d in [&work, &home.join(".ssh"), &cache] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(work.join("src.rs"), "fn main() {}\n").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "stand-in secret\n").unwrap();

    // A "linter" that rewrites the sources, in a read-only phase: refused.
    let (out, report) = run_command(
        &work,
        &home,
        &cache,
        "echo changed > src.rs",
        Some("read-only"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(report["phases"][0]["status"], "failed", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(work.join("src.rs")).unwrap(),
        "fn main() {}\n"
    );
    // Its own directory and temporary folder are writable; the home is not readable.
    let script = format!(
        "case \"$TMPDIR\" in {}/orch/attempts/run-sh-*/tmp) ;; *) exit 9 ;; esac; echo x > \"$TMPDIR/t\" && ! cat \"$HOME/.ssh/id_ed25519\"",
        cache.display()
    );
    let (out, report) = run_command(&work, &home, &cache, &script, Some("read-only"));
    assert_eq!(out.status.code(), Some(0), "{}\n{report:#}", stderr(&out));
    // Without a permission a command runs as written, unconfined.
    let (out, _) = run_command(&work, &home, &cache, "echo changed > src.rs", None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(work.join("src.rs")).unwrap(),
        "changed\n"
    );
    // Each attempt's own directory is gone when it ends.
    let left: Vec<_> = std::fs::read_dir(cache.join("orch/attempts"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_workspace_write_command_writes_the_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    let elsewhere = root.join("elsewhere");
    for d in [&work, &home, &cache, &elsewhere] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (out, _) = run_command(
        &work,
        &home,
        &cache,
        "mkdir -p target/debug && echo ok > target/debug/out",
        Some("workspace-write"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(work.join("target/debug/out").exists());
    for outside in [
        elsewhere.join("x"),
        home.join("x"),
        cache.join("orch/attempts/planted"),
    ] {
        let (out, _) = run_command(
            &work,
            &home,
            &cache,
            &format!("echo x > {}", outside.display()),
            Some("workspace-write"),
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            outside.display(),
            stderr(&out)
        );
        assert!(!outside.exists(), "{}", outside.display());
    }
}

#[test]
fn a_pipeline_cannot_hand_an_agent_a_file_from_outside_its_repository() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("ci")).unwrap();
    std::fs::create_dir_all(dir.path().join("profiles")).unwrap();
    write(dir.path(), "secret.md", "a secret outside the repository\n");
    write(
        &dir.path().join("profiles"),
        "outside.md",
        "You may read secrets.\n",
    );
    std::os::unix::fs::symlink(dir.path().join("secret.md"), repo.join("ci/link.md")).unwrap();
    write(&repo.join("ci"), "inside.md", "Audit.\n");
    let pipeline = |prompt: &str| {
        format!(
            "version = 1\nname = \"r\"\n[[phases]]\nname = \"a\"\nagents = [\"claude\"]\nmode = \"audit\"\n{prompt}\n"
        )
    };
    for (name, line, says) in [
        (
            "up",
            "prompt_file = \"../../secret.md\"",
            "outside the repository",
        ),
        (
            "link",
            "prompt_file = \"link.md\"",
            "outside the repository",
        ),
        ("profile", "profile = \"outside\"", "not found"),
    ] {
        let file = write(&repo.join("ci"), &format!("{name}.toml"), &pipeline(line));
        let out = validate(&file, true);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(flat_stderr(&out).contains(says), "{name}: {}", stderr(&out));
    }
    // A file inside the repository, above the pipeline's folder, is fine.
    let file = write(
        &repo.join("ci"),
        "ok.toml",
        &pipeline("prompt_file = \"inside.md\""),
    );
    let out = validate(&file, true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn an_agents_environment_cannot_widen_its_cli() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = |env: &str| {
        format!(
            "version = 1\nname = \"e\"\n[agents.opencode]\nmodel = \"m/x\"\nenv = {{ {env} }}\n[[phases]]\nname = \"a\"\nagents = [\"opencode\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n"
        )
    };
    let plugin = write(
        dir.path(),
        "plugin.json",
        r#"{"provider": {}, "plugin": ["./evil.js"]}"#,
    );
    let providers = write(
        dir.path(),
        "providers.json",
        r#"{"model": "m/x", "provider": {"m": {"npm": "@ai-sdk/openai-compatible"}}}"#,
    );
    for (env, says) in [
        (
            "OPENCODE_PERMISSION = \"{\\\"bash\\\": \\\"allow\\\"}\"",
            "changes what the CLI allows",
        ),
        ("HOME = \"/root\"", "orch sets it"),
        (
            &format!("OPENCODE_CONFIG = {:?}", plugin.display().to_string()),
            "may only hold provider settings",
        ),
    ] {
        let file = write(dir.path(), "p.toml", &pipeline(env));
        let out = validate(&file, true);
        assert_eq!(out.status.code(), Some(2), "{env}");
        assert!(flat_stderr(&out).contains(says), "{env}: {}", stderr(&out));
    }
    // Provider settings are taken into orch's own configuration; the file
    // itself is not handed to opencode.
    let file = write(
        dir.path(),
        "p.toml",
        &pipeline(&format!(
            "OPENCODE_CONFIG = {:?}",
            providers.display().to_string()
        )),
    );
    let v = explain(&file);
    let env = &v["invocations"][0]["env"];
    assert!(env.get("OPENCODE_CONFIG").is_none(), "{env}");
    let content: Value =
        serde_json::from_str(env["OPENCODE_CONFIG_CONTENT"].as_str().unwrap()).unwrap();
    assert!(content["provider"]["m"].is_object(), "{content}");
    assert!(content.get("plugin").is_none());
}

/// A descriptor open in whatever started orch (a file, a socket, the
/// terminal) does not reach an agent, confined or not: through it, an
/// agent could write where its confinement refuses to open the path.
#[test]
fn an_agent_gets_no_descriptor_orch_inherited() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (_dir, root, [work, home, cache]) = rooms();
    let outside = root.join("outside");
    let file = std::fs::File::create(&outside).unwrap();
    let raw = file.as_raw_fd();
    for permission in [Some("read-only"), None] {
        let tools = permission.map_or(String::new(), |p| {
            format!("[phases.tools]\npermission = \"{p}\"\n")
        });
        let text = format!(
            "version = 1\nname = \"c\"\n[agents.sh]\nkind = \"command\"\ncommand = [\"python3\", \"-c\", \"import os; os.write(47, b'leaked')\"]\n[[phases]]\nname = \"run\"\nagents = [\"sh\"]\n{tools}"
        );
        let pipeline = write(&work, "pipeline.toml", &text);
        let mut cmd = orch();
        cmd.current_dir(&work)
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", &cache)
            .args(["run", pipeline.to_str().unwrap()]);
        // SAFETY: dup2 is async-signal-safe; it runs in the child before exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(raw, 47) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{permission:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "",
            "{permission:?}"
        );
    }
}

/// orch killed with SIGKILL removes nothing itself: its keeper removes
/// the attempt's own directory (what the agent wrote there: sessions,
/// temporary files), once the agent is killed. Another run's folder in
/// the same attempts' folder stays.
#[test]
fn a_killed_run_leaves_no_attempt_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    let attempts = cache.join("orch/attempts");
    let other = attempts.join("other-sh-0123456789abcdef");
    for d in [&work, &home, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    let text = "version = 1\nname = \"c\"\n[agents.sh]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo session > \\\"$TMPDIR/kept\\\"; touch up; exec sleep 60\"]\n[[phases]]\nname = \"run\"\nagents = [\"sh\"]\n[phases.tools]\npermission = \"workspace-write\"\n";
    let file = write(&work, "pipeline.toml", text);
    let mut child = orch()
        .current_dir(&work)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", &cache)
        .args(["run", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let entries = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&attempts)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let started = std::time::Instant::now();
    while !work.join("up").exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The control: the attempt's folder is there, with what the agent wrote.
    let during = entries();
    assert!(
        during.iter().any(|n| n.starts_with("run-sh-")),
        "{during:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let started = std::time::Instant::now();
    while entries() != ["other-sh-0123456789abcdef"] {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "left after a killed run: {:?}",
            entries()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Other attempts' directories stay hidden with the cache folder outside
/// the home, and the home stays hidden with the home itself on PATH.
#[test]
fn other_attempts_and_the_home_stay_hidden_whatever_the_folders() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    let other = cache.join("orch/attempts/other-sh-0123456789abcdef");
    for d in [&work, &home.join(".ssh"), &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(other.join("token"), "another agent's session\n").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "stand-in secret\n").unwrap();
    let path = format!("{}:{}", home.display(), std::env::var("PATH").unwrap());
    for (what, script) in [
        ("another attempt", format!("cat {}/token", other.display())),
        (
            "the attempts",
            format!("ls {}", other.parent().unwrap().display()),
        ),
        (
            "the home",
            format!("cat {}/.ssh/id_ed25519", home.display()),
        ),
        ("the home's names", format!("ls {}", home.display())),
    ] {
        for permission in ["read-only", "workspace-write"] {
            let (out, _) = run_command_with(
                &work,
                &home,
                &cache,
                &script,
                Some(permission),
                &[("PATH", path.clone())],
            );
            assert_eq!(
                out.status.code(),
                Some(1),
                "{what} ({permission}) was readable: {}",
                stderr(&out)
            );
        }
    }
    // The command itself still runs, and its own directory is its own.
    let (out, _) = run_command_with(
        &work,
        &home,
        &cache,
        "ls \"$TMPDIR\" >/dev/null",
        Some("read-only"),
        &[("PATH", path)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A process an agent detaches (a double fork into a session of its own,
/// out of reach of the group kill) does not outlive its attempt.
#[test]
fn nothing_an_agent_starts_outlives_its_attempt() {
    let (_dir, _root, [work, home, cache]) = rooms();
    let script = "(setsid sh -c 'echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 60' </dev/null >/dev/null 2>&1 &); while [ ! -f pid ]; do sleep 0.05; done";
    for permission in [Some("workspace-write"), None] {
        let _ = std::fs::remove_file(work.join("pid"));
        let (out, _) = run_command(&work, &home, &cache, script, permission);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{permission:?}: {}",
            stderr(&out)
        );
        let pid: i32 = std::fs::read_to_string(work.join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "{permission:?}: process {pid} outlived its attempt");
    }
}

/// A process that may write the run database (no agent can: here a plain
/// command with no permission, which runs with its user's rights) plants a
/// trigger that refuses orch's writes: the run does not pass with an
/// incomplete record, and the next orch removes the trigger. The same
/// planting from a confined command cannot even open the database.
#[test]
fn a_run_whose_record_is_sabotaged_fails_and_the_sabotage_goes() {
    let (_dir, root, [work, home, cache]) = rooms();
    let state = root.join("state");
    let env = [("ORCH_STATE_DIR", state.display().to_string())];
    let plant = format!(
        "python3 -c \"import sqlite3; c = sqlite3.connect('{}/state.db'); c.execute(\\\"CREATE TRIGGER refuse BEFORE UPDATE ON runs BEGIN SELECT RAISE(ABORT, 'refused'); END\\\"); c.commit()\"",
        state.display()
    );
    for permission in ["read-only", "workspace-write"] {
        let (out, _) = run_command_with(&work, &home, &cache, &plant, Some(permission), &env);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            flat_stderr(&out).contains("unable to open database file"),
            "{permission}: {}",
            stderr(&out)
        );
    }
    let (out, _) = run_command_with(&work, &home, &cache, &plant, None, &env);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        flat_stderr(&out).contains("recording the run failed"),
        "{}",
        stderr(&out)
    );
    let (out, _) = run_command_with(&work, &home, &cache, "true", None, &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        flat_stderr(&out).contains("removed trigger `refuse`"),
        "{}",
        stderr(&out)
    );
}

/// orch's state directory (every run's logs and database, with what agents
/// printed, and the judges' verdicts) is out of every confined agent's
/// reach, at every level: the default one (the repository's own, outside
/// it), one set elsewhere, and one inside the workspace of a read-only
/// phase. One inside the workspace of a phase that may write it is refused.
#[test]
fn the_run_history_is_hidden_from_confined_agents() {
    let (_dir, root, [work, home, cache]) = rooms();
    let touch = |state: &Path| {
        format!(
            "cat {s}/state.db >/dev/null || ls {s}/runs >/dev/null || touch {s}/planted",
            s = state.display()
        )
    };
    let read = |state: &Path| {
        format!(
            "cat {s}/state.db >/dev/null && ls {s}/runs >/dev/null",
            s = state.display()
        )
    };
    // An earlier run leaves its history in the default state directory.
    let (out, _) = run_command(&work, &home, &cache, "echo secret-output", None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let states: Vec<PathBuf> = std::fs::read_dir(home.join(".local/state/orch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(states.len(), 1, "{states:?}");
    let default = &states[0];
    assert!(
        default
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("work-")
    );
    for permission in ["read-only", "workspace-write"] {
        let (out, _) = run_command(&work, &home, &cache, &touch(default), Some(permission));
        assert_eq!(out.status.code(), Some(1), "{permission}: {}", stderr(&out));
        assert!(!default.join("planted").exists());
    }
    let elsewhere = root.join("state");
    let env = [("ORCH_STATE_DIR", elsewhere.display().to_string())];
    for permission in ["read-only", "workspace-write"] {
        let (out, _) = run_command_with(&work, &home, &cache, "true", None, &env);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(elsewhere.join("state.db").exists());
        let (out, _) = run_command_with(
            &work,
            &home,
            &cache,
            &touch(&elsewhere),
            Some(permission),
            &env,
        );
        assert_eq!(out.status.code(), Some(1), "{permission}: {}", stderr(&out));
        assert!(!elsewhere.join("planted").exists());
    }
    // Inside the workspace: hidden from a read-only phase...
    let inside = work.join(".orch");
    let env = [("ORCH_STATE_DIR", inside.display().to_string())];
    let (out, _) = run_command_with(&work, &home, &cache, "true", None, &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, _) = run_command_with(
        &work,
        &home,
        &cache,
        &touch(&inside),
        Some("read-only"),
        &env,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // ...and refused to one that may write the workspace, before it starts.
    let (out, _) = run_command_with(
        &work,
        &home,
        &cache,
        "touch ran",
        Some("workspace-write"),
        &env,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        flat_stderr(&out).contains("is inside the workspace"),
        "{}",
        stderr(&out)
    );
    assert!(!work.join("ran").exists());
    // Without confinement it is readable (the control).
    let (out, _) = run_command(&work, &home, &cache, &read(default), None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Code a confined agent wrote never runs with more than its rights. The
/// worker of a judged phase (a stand-in for Claude Code, at
/// `workspace-write`) writes the check script its judge runs: it reads the
/// home and writes outside the workspace. The judge, a plain command with
/// no `permission` (like `cargo test` in the README's example), runs after
/// the worker, so orch holds it at `workspace-write`: it can do neither.
/// `permission = "full-access"` on the judge is the explicit way to run it
/// with all the user's rights (the control: there the script does both).
#[test]
fn a_judge_command_runs_what_the_worker_wrote_with_no_more_than_its_rights() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    let outside = root.join("outside");
    for d in [&work, &home.join(".ssh"), &cache, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "stand-in secret\n").unwrap();
    let script = format!(
        "cat {home}/.ssh/id_ed25519 > leaked.txt; touch {outside}/written; exit 0\n",
        home = home.display(),
        outside = outside.display()
    );
    let report = format!(
        "# Report\n\n## Changes\n\n{}\n",
        "Wrote the check. ".repeat(10)
    );
    // The run id is in the prompt, on standard input, as the contract's
    // artifact path needs it.
    let write_both = format!(
        "run=$(grep -o 'RUN=[0-9a-z-]*' | head -n 1 | cut -d= -f2); mkdir -p reports && \
         printf '%s' {} > check.sh && printf '%s' {} > \"reports/$run-implement.md\"",
        shell_quote(&script),
        shell_quote(&report)
    );
    std::fs::write(
        work.join("client.json"),
        serde_json::json!(["sh", "-c", write_both]).to_string(),
    )
    .unwrap();
    let stand_in = crate::support::root().join("tests/mcp/stand_in_cli.py");
    for widened in [false, true] {
        let _ = std::fs::remove_file(work.join("leaked.txt"));
        let _ = std::fs::remove_file(outside.join("written"));
        let widen = if widened {
            "[agents.check.modes.review]\npermission = \"full-access\"\n"
        } else {
            ""
        };
        let text = format!(
            "version = 1\nname = \"w\"\n[agents.claude]\nkind = \"claude\"\nbinary = \"{}\"\n\
             [agents.check]\nkind = \"command\"\ncommand = [\"sh\", \"check.sh\"]\n{widen}\
             [[phases]]\nname = \"implement\"\nagents = [\"claude\"]\nmode = \"fix\"\nprompt = \"RUN={{{{run_id}}}}\"\n\
             artifact = \"reports/{{run}}-{{phase}}.md\"\njudge = \"check\"\n\
             [phases.tools]\ninternal = [\"Read\", \"Write\"]\npermission = \"workspace-write\"\n",
            stand_in.display()
        );
        let file = write(&work, "pipeline.toml", &text);
        let out = orch()
            .current_dir(&work)
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", &cache)
            .args(["run", file.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{widened}: {}", stderr(&out));
        let leaked = std::fs::read_to_string(work.join("leaked.txt")).unwrap_or_default();
        assert_eq!(
            (
                leaked.contains("stand-in secret"),
                outside.join("written").exists()
            ),
            (widened, widened),
            "widened: {widened}"
        );
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A chain of 400 processes, each started by the one before in a session
/// of its own and all at work (writing the workspace): when the attempt
/// ends, none is left, whether orch tracks the attempt by a cgroup or (as
/// where it cannot make one) by adopting orphans until none is left.
#[test]
fn a_chain_of_processes_in_sessions_of_their_own_ends_with_its_attempt() {
    let (_dir, _root, [work, home, cache]) = rooms();
    std::fs::write(
        work.join("level.sh"),
        "n=$1\necho $$ >> pids\nif [ \"$n\" -gt 0 ]; then setsid sh level.sh $((n - 1)) </dev/null >/dev/null 2>&1 & fi\n\
         i=0\nwhile [ $i -lt 120 ]; do sleep 1; echo $$ >> beat; i=$((i + 1)); done\n",
    )
    .unwrap();
    // The agent starts the chain and ends once every level is running.
    let script = "sh level.sh 400 & while [ \"$(cat pids 2>/dev/null | wc -l)\" -lt 401 ]; do sleep 0.05; done";
    for cgroups in ["on", "off"] {
        let _ = std::fs::remove_file(work.join("pids"));
        let env = [("ORCH_CGROUPS", cgroups.to_string())];
        let (out, _) =
            run_command_with(&work, &home, &cache, script, Some("workspace-write"), &env);
        let pids: Vec<i32> = std::fs::read_to_string(work.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        // SAFETY: signal 0 only asks whether the process exists.
        let alive: Vec<i32> = pids
            .iter()
            .copied()
            .filter(|p| unsafe { libc::kill(*p, 0) } == 0)
            .collect();
        for p in &alive {
            // SAFETY: the test's own leftovers.
            unsafe {
                libc::kill(*p, libc::SIGKILL);
            }
        }
        assert_eq!(out.status.code(), Some(0), "{cgroups}: {}", stderr(&out));
        assert_eq!(pids.len(), 401, "{cgroups}: the whole chain ran");
        assert_eq!(
            alive,
            Vec::<i32>::new(),
            "cgroups {cgroups}: outlived their attempt"
        );
    }
}

/// A judge given `workspace-write` (in its `review` mode settings) writes
/// the workspace like a worker: a state directory inside the workspace is
/// refused, and a later plain command is held at the writer's level (it
/// would run what the judge wrote). Without the judge's `workspace-write`
/// (the control) neither happens.
#[test]
fn a_judge_that_may_write_counts_as_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("ws")).unwrap();
    let pipeline = |judge_writes: bool| {
        format!(
            "version = 1\nname = \"j\"\n\
             [agents.writer]\nkind = \"command\"\ncommand = [\"true\"]\n\
             [agents.judge]\nkind = \"claude\"\n{}\
             [agents.deploy]\nkind = \"command\"\ncommand = [\"sh\", \"build.sh\"]\n\
             [[phases]]\nname = \"plan\"\nagents = [\"writer\"]\nprompt = \"x\"\n\
             artifact = \"out/{{phase}}-{{run}}.md\"\nrequired_sections = [\"Steps\"]\njudge = \"judge\"\n\
             [[phases]]\nname = \"ship\"\nagents = [\"deploy\"]\ndepends_on = [\"plan\"]\n",
            if judge_writes {
                "[agents.judge.modes.review]\npermission = \"workspace-write\"\n"
            } else {
                ""
            }
        )
    };
    for judge_writes in [true, false] {
        std::fs::write(d.join("p.toml"), pipeline(judge_writes)).unwrap();
        let o = run_in(
            &d.join("ws"),
            &["--state-dir", ".orch", "validate", "../p.toml"],
        );
        let refused = flat_stderr(&o).contains("which agent `judge` of phase `plan` may write");
        assert_eq!(refused, judge_writes, "{}", stderr(&o));
        assert_eq!(o.status.code(), Some(if judge_writes { 2 } else { 0 }));
        let o = run_in(&d.join("ws"), &["explain", "../p.toml", "--phase", "ship"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let held = stdout(&o).contains("after phase `plan`");
        assert_eq!(held, judge_writes, "{}", stdout(&o));
    }
}

#[test]
fn a_judge_that_may_start_programs_after_the_work_is_written_is_refused() {
    // What a writer of the phase (or before it) planted, a build script a
    // judge's `cargo test` runs, would run in the judge's process tree,
    // which holds its verdict tools. Codex reads through its shell.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pipeline = |judge: &str, review: &str, worker: &str, enforcement: &str| {
        format!(
            "version = 1\nname = \"j\"\n[defaults]\nenforcement = \"{enforcement}\"\n\
             [agents.{judge}.modes.review]\n{review}\n\
             [agents.script]\nkind = \"command\"\ncommand = [\"true\"]\n\
             [[phases]]\nname = \"fix\"\nagents = [\"{worker}\"]\nmode = \"fix\"\nprompt = \"x\"\n\
             artifact = \"out/{{phase}}-{{run}}.md\"\njudge = \"{judge}\"\n"
        )
    };
    let refusal = "may start programs";
    for (judge, review, worker, enforcement, refused, code) in [
        (
            "gemini",
            "internal = [\"Read\", \"Bash(cargo test *)\"]",
            "claude",
            "strict",
            true,
            2,
        ),
        (
            "gemini",
            "internal = [\"Read\", \"Bash\"]",
            "claude",
            "strict",
            true,
            2,
        ),
        ("codex", "max_turns = 5", "claude", "strict", true, 2),
        // Warned, and run, when the file says best-effort.
        (
            "gemini",
            "internal = [\"Read\", \"Bash\"]",
            "claude",
            "best-effort",
            true,
            0,
        ),
        // No shell: the judge reads what it is shown.
        (
            "gemini",
            "internal = [\"Read\", \"Glob\", \"Grep\"]",
            "claude",
            "strict",
            false,
            0,
        ),
        ("codex", "internal = []", "claude", "strict", false, 0),
        // Nothing of the work was written by an LLM agent.
        (
            "gemini",
            "internal = [\"Read\", \"Bash\"]",
            "script",
            "strict",
            false,
            0,
        ),
    ] {
        let text = pipeline(judge, review, worker, enforcement);
        std::fs::write(d.join("p.toml"), &text).unwrap();
        let o = run_in(d, &["validate", "p.toml"]);
        let said = flat_stderr(&o);
        assert_eq!(said.contains(refusal), refused, "{text}\n{}", stderr(&o));
        assert_eq!(o.status.code(), Some(code), "{text}\n{}", stderr(&o));
    }
}

/// orch's own git (unconfined) reads the work tree orch finds, not the
/// one the repository's config names. A confined worker
/// (`workspace-write`, a plain command) points its repository's
/// `core.worktree` at the home it cannot read and stages
/// `.ssh/id_ed25519` there; the judge's prompt shows the workspace's
/// changes (`git diff`): it must not hold the key (before, it did), and
/// says why there is no diff. The judge stands in for Claude Code and
/// prints its prompt, which orch keeps in the attempt's log.
#[test]
fn a_worker_cannot_point_orchs_git_at_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache) = (root.join("work"), root.join("home"), root.join("cache"));
    for d in [&work, &home.join(".ssh"), &cache] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "stand-in private key\n").unwrap();
    std::fs::write(work.join("README.md"), "hi\n").unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(&work)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README.md"],
        &["commit", "-qm", "first"],
    ] {
        let out = git(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let worker = format!(
        "set -e; run=$(head -n1 \"$ORCH_PROMPT_FILE\"); mkdir -p out; printf '# Plan\\n\\n## Steps\\n\\n1. Do it.\\n' > \"out/plan-$run.md\"; \
         ! cat {home}/.ssh/id_ed25519; export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1; \
         e=$(git hash-object -w /dev/null); git update-index --add --cacheinfo \"100644,$e,.ssh/id_ed25519\"; \
         git config core.worktree {home}; echo more >> README.md",
        home = home.display()
    );
    let judge = write(
        &root,
        "judge.py",
        "#!/usr/bin/env python3\nimport json, sys\nprompt = sys.stdin.read()\n\
         print(json.dumps({\"type\": \"assistant\", \"message\": {\"content\": [{\"type\": \"text\", \"text\": prompt}]}}))\n\
         print(json.dumps({\"type\": \"result\", \"subtype\": \"success\", \"is_error\": False, \"num_turns\": 1, \"result\": \"done\", \"session_id\": \"s\"}))\n",
    );
    std::fs::set_permissions(&judge, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let text = format!(
        "version = 1\nname = \"g\"\n\
         [agents.worker]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {}]\n\
         [agents.judge]\nkind = \"claude\"\nbinary = \"{}\"\n\
         [[phases]]\nname = \"plan\"\nagents = [\"worker\"]\nprompt = \"{{{{run_id}}}}\\nWrite the plan.\"\n\
         artifact = \"out/{{phase}}-{{run}}.md\"\njudge = \"judge\"\nmax_attempts = 1\n\
         [phases.tools]\npermission = \"workspace-write\"\n",
        serde_json::to_string(&worker).unwrap(),
        judge.display(),
    );
    let file = write(&root, "pipeline.toml", &text);
    let state = root.join("state");
    let out = orch()
        .current_dir(&work)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", &cache)
        .arg("--state-dir")
        .arg(&state)
        .args(["run", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    // The judge gave no verdict (it has no tools): the phase fails.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let runs: Vec<PathBuf> = std::fs::read_dir(state.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let log = runs[0].join("plan/judge/attempt-1.stdout");
    let prompt = std::fs::read_to_string(&log).unwrap();
    assert!(prompt.contains("You judge phase `plan`"), "{prompt}");
    // The worker did plant it: git as the repository says reads the home.
    let planted = git(&["diff", "HEAD"]);
    assert!(
        String::from_utf8_lossy(&planted.stdout).contains("stand-in private key"),
        "{}",
        stderr(&planted)
    );
    assert!(!prompt.contains("stand-in private key"), "{prompt}");
    assert!(!prompt.contains("id_ed25519"), "{prompt}");
    // The judge and the user are told why there is no diff.
    assert!(
        prompt.contains("No diff: orch does not read this workspace's git repository")
            && prompt.contains("reads another work tree"),
        "{prompt}"
    );
    assert!(
        stderr(&out).contains("warning: orch does not read this git repository"),
        "{}",
        stderr(&out)
    );
}

/// The standard output of every attempt of a run under `state`.
fn attempt_outputs(state: &Path) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.file_name().is_some_and(|n| n == "attempt-1.stdout") {
                found.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut found = Vec::new();
    walk(&state.join("runs"), &mut found);
    found
}

/// `orch run` of `agents` command agents, each `sh -c script`, side by
/// side in one phase (at `permission`, if any), with its state in `state`.
fn run_agents(root: &Path, agents: usize, script: &str, permission: Option<&str>) -> Output {
    let mut text = String::from("version = 1\nname = \"c\"\n");
    for i in 0..agents {
        text += &format!(
            "[agents.a{i}]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(script).unwrap()
        );
    }
    let names: Vec<String> = (0..agents).map(|i| format!("\"a{i}\"")).collect();
    text += &format!(
        "[[phases]]\nname = \"p\"\nagents = [{}]\nmode = \"fix\"\n",
        names.join(", ")
    );
    if let Some(p) = permission {
        text += &format!("[phases.tools]\npermission = \"{p}\"\n");
    }
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let file = write(root, "pipeline.toml", &text);
    orch()
        .current_dir(&work)
        .env("HOME", root.join("home"))
        .env("XDG_CACHE_HOME", root.join("cache"))
        .args(["--state-dir", root.join("state").to_str().unwrap()])
        .args(["run", file.to_str().unwrap(), "--max-parallel", "4"])
        .output()
        .unwrap()
}

/// An agent's process is in its attempt's cgroup from its first
/// instruction, and so is the first process it forks, at once: it moved
/// itself in before it executed. (orch once moved it from outside, some
/// ten milliseconds after it started, the time a cgroup move takes: what
/// it forked meanwhile stayed in orch's own cgroup, and a process
/// detached there outlived an orch killed with SIGKILL.)
#[test]
fn an_agent_is_in_its_attempts_cgroup_before_it_runs() {
    if !cgroups_here() {
        skipped("no cgroups here: orch tracks attempts by their processes' parents");
        return;
    }
    // The shell reads its own cgroup (`read` is built in), then forks `cat`.
    let script = "while read l; do case $l in 0::*) echo \"shell $l\";; esac; done < /proc/self/cgroup; cat /proc/self/cgroup";
    for permission in [Some("workspace-write"), None] {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let out = run_agents(&root, 8, script, permission);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{permission:?}: {}",
            stderr(&out)
        );
        let outputs = attempt_outputs(&root.join("state"));
        assert_eq!(outputs.len(), 8, "{permission:?}: {outputs:?}");
        for (path, text) in outputs {
            let agent = path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap();
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("0::") || l.starts_with("shell 0::"))
                .collect();
            assert_eq!(lines.len(), 2, "{permission:?} {agent}: {text}");
            // The shell and what it forked, in one cgroup.
            assert_eq!(
                lines[0].strip_prefix("shell "),
                Some(lines[1]),
                "{permission:?} {agent}: {text}"
            );
            for line in lines {
                // `0::<orch's cgroup>/orch-<pid>/attempt-<n>`.
                let at = line.rsplit('/').collect::<Vec<_>>();
                assert!(
                    at.len() >= 3
                        && at[0]
                            .strip_prefix("attempt-")
                            .is_some_and(|n| n.parse::<u32>().is_ok())
                        && at[1]
                            .strip_prefix("orch-")
                            .is_some_and(|p| p.parse::<u32>().is_ok()),
                    "{permission:?} {agent}: outside an attempt's cgroup: {line}"
                );
            }
        }
    }
}

/// A confined agent cannot signal any thread of orch's (signal 0 to each
/// of them, by `tgkill`, is refused): none is in the agent's Landlock
/// domain, not even the one that started it.
#[test]
fn an_agent_cannot_signal_any_thread_of_orchs() {
    let (_dir, _root, [work, home, cache]) = rooms();
    let script = "exec python3 -c 'import ctypes,os,sys\n\
        libc=ctypes.CDLL(None,use_errno=True)\n\
        nr={\"x86_64\":234,\"aarch64\":131}[os.uname().machine]\n\
        orch=int(sys.argv[1])\n\
        seen={}\n\
        for tid in os.listdir(\"/proc/%d/task\" % orch):\n\
        \x20 r=libc.syscall(nr,orch,int(tid),0)\n\
        \x20 e=\"reached\" if r==0 else os.strerror(ctypes.get_errno())\n\
        \x20 seen[e]=seen.get(e,0)+1\n\
        print(seen)\n\
        sys.exit(0 if list(seen)==[os.strerror(1)] else 1)' $PPID > signals.txt";
    let (out, _) = run_command(&work, &home, &cache, script, Some("workspace-write"));
    let seen = std::fs::read_to_string(work.join("signals.txt")).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{seen} {}", stderr(&out));
}

/// A process of one attempt cannot be born in another attempt's cgroup
/// and so outlive its own: `clone3` with `CLONE_INTO_CGROUP` needs only
/// write permission on the target's `cgroup.procs`, which a root agent
/// has without a capability (an attacker's review had such a process
/// run in a parallel phase's cgroup, then in a later phase's, after its
/// own attempt ended). Here `pa`'s agent finds `pb`'s cgroup (running
/// beside it) and asks for a child there that would write `beats` for
/// five seconds: `clone3` looks absent, and nothing writes.
#[test]
fn no_process_is_born_in_another_attempts_cgroup() {
    if !cgroups_here() {
        skipped("no cgroups here: orch tracks attempts by their processes' parents");
        return;
    }
    let (_dir, root, [work, home, cache]) = rooms();
    std::fs::write(
        work.join("hop.py"),
        [
            "import ctypes, os, time",
            "c = ctypes.CDLL(None, use_errno=True)",
            "me = [l[3:].strip() for l in open('/proc/self/cgroup') if l.startswith('0::')][0]",
            "mount = [l.split()[4] for l in open('/proc/self/mountinfo') if ' - cgroup2 ' in l][0]",
            "mine = mount + me",
            "base = os.path.dirname(mine)",
            "other = None",
            "for _ in range(200):",
            "    for d in os.listdir(base):",
            "        p = os.path.join(base, d)",
            "        if p != mine and os.path.isdir(p) and 'populated 1' in open(p + '/cgroup.events').read():",
            "            other = p",
            "    if other: break",
            "    time.sleep(0.02)",
            "fd = os.open(other, os.O_PATH | os.O_DIRECTORY)",
            "args = (ctypes.c_uint64 * 11)()",
            "args[0] = 0x200000000",
            "args[4] = 17",
            "args[10] = fd",
            "r = c.syscall(435, args, 88)",
            "if r == 0:",
            "    os.execvp('sh', ['sh', '-c', 'i=0; while [ $i -lt 50 ]; do echo beat >> beats; sleep 0.1; i=$((i+1)); done'])",
            "open('hop-result', 'w').write('%d %d %s' % (r, ctypes.get_errno(), other))",
        ]
        .join("\n"),
    )
    .unwrap();
    let pipeline = "version = 1\nname = \"c\"\n[defaults]\nmax_parallel = 2\n\
         [agents.a]\nkind = \"command\"\ncommand = [\"python3\", \"hop.py\"]\n\
         [agents.b]\nkind = \"command\"\ncommand = [\"sleep\", \"2\"]\n\
         [[phases]]\nname = \"pa\"\nagents = [\"a\"]\n[phases.tools]\npermission = \"workspace-write\"\n\
         [[phases]]\nname = \"pb\"\nagents = [\"b\"]\n[phases.tools]\npermission = \"workspace-write\"\n";
    std::fs::write(work.join("p.toml"), pipeline).unwrap();
    let out = orch()
        .current_dir(&work)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", &cache)
        .args(["--state-dir", root.join("state").to_str().unwrap()])
        .args(["run", "p.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = std::fs::read_to_string(work.join("hop-result")).unwrap_or_default();
    assert!(
        result.starts_with(&format!("-1 {} ", libc::ENOSYS)),
        "clone3 into another cgroup: {result}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!work.join("beats").exists(), "a process was born elsewhere");
}

/// Codex runs the model's commands in its own domain, so where orch
/// confines it, orch starts it from a copy of its own program that no one
/// may read, which the kernel starts undumpable (docs/confinement.md,
/// "Codex"; the real CLI's case is `e2e::forged::
/// a_codex_command_cannot_reach_into_codex`). A native program is copied
/// into orch's cache and `explain` names the copy; a script (a version
/// manager's shim), which cannot run from such a copy, or a program in the
/// workspace, is refused before anything starts.
#[test]
fn codex_starts_from_an_unreadable_copy_of_its_own_program_or_not_at_all() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (work, home, cache, bin) = (
        root.join("work"),
        root.join("home"),
        root.join("cache"),
        root.join("bin"),
    );
    for d in [&work, &home, &cache, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    // A native program (`true`, which prints nothing: the attempt then
    // fails for want of Codex's events, after it started).
    let native = bin.join("codex");
    std::fs::copy(which::which("true").unwrap(), &native).unwrap();
    let shim = bin.join("codex-shim");
    std::fs::write(&shim, "#!/bin/sh\nexec true\n").unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let in_work = work.join("codex");
    std::fs::copy(&native, &in_work).unwrap();
    let pipeline = |binary: &Path| {
        write(
            &work,
            "pipeline.toml",
            &format!(
                "version = 1\nname = \"c\"\n[agents.codex]\nbinary = {}\n[[phases]]\nname = \"audit\"\nagents = [\"codex\"]\nmode = \"audit\"\nprompt = \"Audit.\"\n[phases.tools]\npermission = \"read-only\"\n",
                serde_json::to_string(binary.to_str().unwrap()).unwrap()
            ),
        )
    };
    let run = |file: &Path| {
        orch()
            .current_dir(&work)
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", &cache)
            .env("OPENAI_API_KEY", "sk-stand-in")
            .args(["run", file.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap()
    };
    let programs = cache.join("orch").join("programs");

    // The native program: `explain` names the copy, the run makes it.
    let file = pipeline(&native);
    let shown = explain_with(&file, &home, &cache);
    let program = shown["invocations"][0]["argv"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{shown:#}"))
        .to_string();
    assert!(
        program.starts_with(programs.to_str().unwrap()) && program.ends_with("/codex"),
        "{program}"
    );
    let out = run(&file);
    let said = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert!(!said.contains("neither Codex's own program"), "{said}");
    let copy = std::fs::symlink_metadata(&program).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(copy.permissions().mode() & 0o7777, 0o100, "{said}");

    // A shim, and a program in the workspace: refused, with why.
    for (binary, why) in [
        (&shim, "neither Codex's own program"),
        (&in_work, "may write"),
    ] {
        let out = run(&pipeline(binary));
        let said = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains(why), "{binary:?}: {said}");
    }
    // Nothing but the native program's copy (and the lock) was made.
    let made: Vec<_> = std::fs::read_dir(&programs)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(made.len(), 2, "{made:?}");
}

/// `explain --format json` of `file` with orch's home and cache.
fn explain_with(file: &Path, home: &Path, cache: &Path) -> Value {
    let out = orch()
        .env("HOME", home)
        .env("XDG_CACHE_HOME", cache)
        .args(["explain", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)
}
