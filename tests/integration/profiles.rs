//! Profiles: `profiles/<name>.md` with TOML (`+++`) or YAML (`---`) front
//! matter; a Claude Code sub-agent file loads unchanged; the profiles orch
//! ships validate; a profile's model and tools reach the command line.

use serde_json::Value;

use crate::support::{flat_stderr, json_of, orch, root, run_in, stderr, write};

fn phase_with(profile: &str, agent: &str) -> String {
    format!(
        "version = 1\nname = \"p\"\n[[phases]]\nname = \"review\"\nagents = [\"{agent}\"]\nmode = \"audit\"\nprofile = \"{profile}\"\nprompt = \"Review the last change.\"\n"
    )
}

#[test]
fn a_claude_code_sub_agent_file_loads_unchanged() {
    // tests/fixtures/profiles/claude-code/profiles/security-reviewer.md is
    // a sub-agent file as Claude Code reads it (YAML, `tools` as a string,
    // `model`, and keys orch leaves alone: `color`, `permissionMode`).
    let dir = root().join("tests/fixtures/profiles/claude-code");
    let scratch = tempfile::tempdir().unwrap();
    write(
        scratch.path(),
        "p.toml",
        &phase_with("security-reviewer", "claude"),
    );
    std::fs::create_dir(scratch.path().join("profiles")).unwrap();
    std::fs::copy(
        dir.join("profiles/security-reviewer.md"),
        scratch.path().join("profiles/security-reviewer.md"),
    )
    .unwrap();
    let out = run_in(scratch.path(), &["explain", "p.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_of(&out);
    let inv = &v["invocations"][0];
    let internal: Vec<&str> = inv["toolset"]["internal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(internal, ["Read", "Grep", "Glob", "Bash"]);
    assert_eq!(inv["provenance"]["internal"]["layer"], "profile");
    assert!(
        inv["provenance"]["internal"]["at"]
            .as_str()
            .unwrap()
            .ends_with("profiles/security-reviewer.md:7:8"),
        "{}",
        inv["provenance"]["internal"]
    );
    assert_eq!(inv["toolset"]["mcp"][0], "mcp__orch__add_finding");
    let argv: Vec<&str> = inv["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = argv.iter().position(|a| *a == "--model").expect("--model");
    assert_eq!(argv[at + 1], "sonnet", "the profile's model");
}

#[test]
fn yaml_front_matter_problems_point_into_the_profile() {
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), "p.toml", &phase_with("broken", "claude"));
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    for (front, says, line) in [
        (
            "name: broken\ntoolz: Read\n",
            "unknown key `toolz`: did you mean `tools`?",
            3,
        ),
        ("tools: [Read\n", "it is not YAML", 3),
        ("disallowedTools: Bash\n", "without `tools`", 2),
    ] {
        write(
            ws.path(),
            "profiles/broken.md",
            &format!("---\n{front}---\nYou review.\n"),
        );
        let out = run_in(ws.path(), &["validate", "--format", "json", "p.toml"]);
        assert_eq!(out.status.code(), Some(2), "{front}");
        let d = &json_of(&out)["diagnostics"][0];
        assert_eq!(d["code"], "orch::pipeline::profile_front_matter", "{d}");
        assert!(d["message"].as_str().unwrap().contains(says), "{d}");
        assert_eq!(d["file"], "profiles/broken.md", "{d}");
        assert_eq!(d["line"], line, "{d}");
    }
}

#[test]
fn a_profiles_model_must_suit_every_agent_that_uses_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    write(
        ws.path(),
        "profiles/fast.md",
        "---\ntools: Read\nmodel: sonnet\n---\nYou are quick.\n",
    );
    write(ws.path(), "p.toml", &phase_with("fast", "opencode"));
    let out = run_in(ws.path(), &["validate", "p.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = flat_stderr(&out);
    assert!(
        err.contains("bad_model")
            && err.contains("profiles/fast.md:3:8")
            && err.contains("provider/model"),
        "{err}"
    );
    // `inherit` (Claude Code's word for "the caller's model") sets none.
    write(
        ws.path(),
        "profiles/fast.md",
        "---\ntools: Read\nmodel: inherit\n---\nYou are quick.\n",
    );
    let out = run_in(ws.path(), &["explain", "p.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let argv = json_of(&out)["invocations"][0]["argv"].to_string();
    assert!(!argv.contains("\"-m\""), "{argv}");
}

#[test]
fn every_profile_orch_ships_validates_for_every_cli() {
    let names: Vec<String> = std::fs::read_dir(root().join("profiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "worker",
        "researcher",
        "architect",
        "planner",
        "judge",
        "scanner",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "profiles/{want}.md is missing"
        );
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    for name in &names {
        std::fs::copy(
            root().join(format!("profiles/{name}.md")),
            ws.path().join(format!("profiles/{name}.md")),
        )
        .unwrap();
    }
    for name in &names {
        for agent in ["claude", "codex", "gemini", "opencode", "copilot"] {
            write(
                ws.path(),
                "p.toml",
                &phase_with(name, agent).replace("mode = \"audit\"", "mode = \"fix\""),
            );
            let out = run_in(ws.path(), &["validate", "--format", "json", "p.toml"]);
            let report: Value = json_of(&out);
            if out.status.success() {
                continue;
            }
            // Codex's shell cannot be taken away at workspace-write: a
            // profile that writes files but grants no shell is refused for
            // it, and says why (docs/capabilities.md).
            let diags = report["diagnostics"].as_array().unwrap();
            assert!(
                agent == "codex"
                    && diags
                        .iter()
                        .all(|d| d["code"] == "orch::pipeline::unenforceable"
                            && d["message"].as_str().unwrap().contains("codex's shell")),
                "profiles/{name}.md with {agent}: {report:#}"
            );
        }
    }
}

#[test]
fn the_model_comes_from_the_phase_then_the_profile_then_the_agent_then_the_settings() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    write(
        ws.path(),
        "profiles/fast.md",
        "---\ntools: Read\nmodel: haiku\n---\nYou are quick.\n",
    );
    let file = |phase_model: &str, profile: &str| {
        format!(
            "version = 1\nname = \"m\"\n[agents.claude]\nmodel = \"opus\"\n[[phases]]\nname = \"p\"\nagents = [\"claude\"]\nprompt = \"x\"\n{profile}{phase_model}"
        )
    };
    let chosen = |text: &str, env: &[(&str, &str)]| {
        write(ws.path(), "p.toml", text);
        let out = orch()
            .current_dir(ws.path())
            .envs(env.iter().copied())
            .args(["explain", "p.toml", "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let inv = json_of(&out)["invocations"][0].clone();
        let argv: Vec<String> = serde_json::from_value(inv["argv"].clone()).unwrap();
        let flag = argv
            .iter()
            .position(|a| a == "--model")
            .map(|i| argv[i + 1].clone());
        (
            inv["model"]["value"].as_str().map(str::to_string),
            inv["model"]["layer"].as_str().unwrap().to_string(),
            inv["model"]["at"].as_str().map(str::to_string),
            flag,
        )
    };
    let (v, layer, at, flag) = chosen(&file("model = \"sonnet\"\n", "profile = \"fast\"\n"), &[]);
    assert_eq!(
        (v.as_deref(), layer.as_str(), flag.as_deref()),
        (Some("sonnet"), "phase", Some("sonnet"))
    );
    assert_eq!(at.as_deref(), Some("p.toml:10:9"));
    let (v, layer, at, _) = chosen(&file("", "profile = \"fast\"\n"), &[]);
    assert_eq!((v.as_deref(), layer.as_str()), (Some("haiku"), "profile"));
    assert!(at.unwrap().ends_with("profiles/fast.md:3:8"));
    let (v, layer, at, _) = chosen(&file("", ""), &[]);
    assert_eq!(
        (v.as_deref(), layer.as_str(), at.as_deref()),
        (Some("opus"), "agent", Some("p.toml:4:9"))
    );
    let bare = "version = 1\nname = \"m\"\n[[phases]]\nname = \"p\"\nagents = [\"claude\"]\nprompt = \"x\"\n";
    let (v, layer, at, flag) = chosen(
        bare,
        &[("ORCH_AGENTS__CLAUDE__MODEL", "sonnet-from-settings")],
    );
    assert_eq!(
        (v.as_deref(), layer.as_str(), at.as_deref(), flag.as_deref()),
        (
            Some("sonnet-from-settings"),
            "settings",
            Some("agents.claude.model"),
            Some("sonnet-from-settings")
        )
    );
    let (v, layer, _, flag) = chosen(bare, &[]);
    assert_eq!((v, layer.as_str(), flag), (None, "cli default", None));

    // A phase model every agent's CLI must accept.
    write(
        ws.path(),
        "p.toml",
        "version = 1\nname = \"m\"\n[[phases]]\nname = \"p\"\nagents = [\"opencode\"]\nprompt = \"x\"\nmodel = \"sonnet\"\n",
    );
    let out = orch()
        .current_dir(ws.path())
        .args(["validate", "p.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        flat_stderr(&out).contains("p.toml:7:9"),
        "{}",
        flat_stderr(&out)
    );
}

#[test]
fn prompt_variables_are_filled_checked_and_never_left_empty() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("prompts")).unwrap();
    write(
        ws.path(),
        "prompts/fix.md",
        "Fix {{inputs.ticket}} using {{artifacts.plan}} in run {{run_id}}, phase {{phase}}.\n",
    );
    // A command agent gets its prompt in the file ORCH_PROMPT_FILE names.
    let pipeline = "version = 1\nname = \"t\"\n\
        [agents.plan]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"echo '# Plan' > plan.md\"]\n\
        [agents.show]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"cp \\\"$ORCH_PROMPT_FILE\\\" sent.txt\"]\n\
        [[phases]]\nname = \"plan\"\nagents = [\"plan\"]\nartifacts = [\"plan.md\"]\n\
        [[phases]]\nname = \"fix\"\nagents = [\"show\"]\ndepends_on = [\"plan\"]\nprompt_file = \"prompts/fix.md\"\n";
    write(ws.path(), "p.toml", pipeline);
    let run = |extra: &[&str]| {
        let mut args = vec!["--state-dir", ".orch", "run", "p.toml", "--format", "json"];
        args.extend_from_slice(extra);
        run_in(ws.path(), &args)
    };
    // Without the input: refused before anything starts.
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = flat_stderr(&out);
    assert!(
        err.contains("`{{inputs.ticket}}`") && err.contains("--input ticket="),
        "{err}"
    );
    assert!(!ws.path().join("plan.md").exists(), "nothing ran");

    let out = run(&["--input", "ticket=BUG-7"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run_id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let sent = std::fs::read_to_string(ws.path().join("sent.txt")).unwrap();
    assert_eq!(
        sent,
        format!("Fix BUG-7 using plan.md in run {run_id}, phase fix.\n")
    );
    // The size of what was sent is kept with the attempt.
    let shown = run_in(
        ws.path(),
        &[
            "--state-dir",
            ".orch",
            "runs",
            "show",
            &run_id,
            "--format",
            "json",
        ],
    );
    let attempt = &json_of(&shown)["phases"][1]["agents"][0];
    assert_eq!(
        attempt["prompt"]["user"],
        sent.chars().count().div_ceil(4),
        "{attempt}"
    );
    assert_eq!(
        attempt["prompt"]["system"], 0,
        "a command gets no system prompt"
    );

    // `{{artifacts.X}}` needs X upstream; an unknown variable points into
    // the prompt file.
    write(
        ws.path(),
        "p.toml",
        &pipeline.replace("depends_on = [\"plan\"]\n", ""),
    );
    let out = run_in(ws.path(), &["validate", "--format", "json", "p.toml"]);
    let d = &json_of(&out)["diagnostics"][0];
    assert_eq!(d["code"], "orch::pipeline::template", "{d}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("does not depend on `plan`"),
        "{d}"
    );
    assert_eq!(
        (d["file"].as_str(), d["line"].as_u64(), d["column"].as_u64()),
        (Some("prompts/fix.md"), Some(1), Some(29))
    );
    write(ws.path(), "prompts/fix.md", "Fix {{ticket}}.\n");
    write(ws.path(), "p.toml", pipeline);
    let out = run_in(ws.path(), &["validate", "--format", "json", "p.toml"]);
    let d = &json_of(&out)["diagnostics"][0];
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("`{{ticket}}` is not a variable"),
        "{d}"
    );
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(1), Some(5))
    );
}
