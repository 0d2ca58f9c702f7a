//! `orch explain --format json` describes each process completely: a test
//! rebuilds every invocation from the JSON alone (argv, working directory,
//! environment, standard input, the files written first) and compares it
//! with what `orch run` really starts, seen by a recorder standing in for
//! each agent CLI.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::support::*;

/// Stands in for an agent CLI: prints, as one line, what it was started
/// with, and every regular file in its attempt's directory (the parent of
/// `TMPDIR`; orch's endpoint there is a socket, not a file it wrote).
const RECORDER: &str = r#"#!/usr/bin/python3
import json, os, stat, sys
argv = sys.argv
if len(argv) > 1 and argv[1].startswith("\x01argv0="):
    argv = [argv[1][len("\x01argv0="):]] + argv[2:]
st = os.fstat(0)
stdin = None if stat.S_ISCHR(st.st_mode) else sys.stdin.read()
files = {}
links = {}
tmp = os.environ.get("TMPDIR", "")
root = os.path.dirname(tmp) if "/attempts/" in tmp else None
if root:
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.basename(d) == "bin" and os.path.basename(os.path.dirname(d)) == "orch":
                links[p] = "shell"
                continue
            if not os.path.isfile(p):
                continue
            with open(p, encoding="utf-8", errors="replace") as f:
                files[p] = f.read()
print("ORCH-REC " + json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
      "stdin": stdin, "files": files, "links": links}), flush=True)
"#;

/// Stands in for Codex, which orch starts from a copy of its own program
/// that no one may read (docs/confinement.md, "Codex"), so not a script:
/// a program that runs the recorder (at `{recorder}`) with what it got,
/// its own name first, as a child (executing it in its place would make
/// the process dumpable, and orch stops a Codex that is).
const NATIVE_RECORDER: &str = r#"fn main() {
    let mut args = std::env::args_os();
    let mut first = std::ffi::OsString::from("\u{1}argv0=");
    first.push(args.next().unwrap());
    let status = std::process::Command::new("/usr/bin/python3")
        .arg("{recorder}")
        .arg(first)
        .args(args)
        .status()
        .unwrap();
    std::process::exit(status.code().unwrap_or(1));
}
"#;

const KINDS: [&str; 5] = ["claude", "codex", "gemini", "opencode", "copilot"];

fn pipeline() -> String {
    let mut p = String::from(
        "version = 1\nname = \"repro\"\n\
         [agents.script]\nkind = \"command\"\ncommand = [\"./rec\", \"--as\", \"command\"]\n\
         [agents.script.env]\nGREETING = \"hello\"\n",
    );
    for kind in KINDS {
        p.push_str(&format!(
            "[[phases]]\nname = \"p-{kind}\"\nagents = [\"{kind}\"]\nmode = \"audit\"\n\
             prompt = \"Look at {{{{inputs.topic}}}} in run {{{{run_id}}}}.\"\nretries = 0\n"
        ));
    }
    p.push_str(
        "[[phases]]\nname = \"p-script\"\nagents = [\"script\"]\nprompt = \"Count {{inputs.topic}}.\"\n\
         [phases.tools]\npermission = \"read-only\"\n",
    );
    p
}

/// orch's environment in this test: the test's, changed as `orch()`
/// changes it, with `TZ` set and `LC_ALL` removed.
fn orch_env() -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    let mut cmd = orch();
    cmd.env("TZ", "UTC").env_remove("LC_ALL");
    for (k, v) in cmd.get_envs() {
        let k = k.to_str().unwrap().to_string();
        match v {
            Some(v) => env.insert(k, v.to_str().unwrap().to_string()),
            None => env.remove(&k),
        };
    }
    env
}

/// `${NAME}` is NAME from orch's environment, left out when unset.
fn expected_env(inv: &Value, fill: &dyn Fn(&str) -> String) -> BTreeMap<String, String> {
    let outer = orch_env();
    let mut env = if inv["inherit_env"].as_bool().unwrap() {
        outer.clone()
    } else {
        BTreeMap::new()
    };
    for (k, v) in inv["env"].as_object().unwrap() {
        let v = v.as_str().unwrap();
        if let Some(name) = v.strip_prefix("${").and_then(|r| r.strip_suffix(":-}")) {
            // Passed through, else set empty.
            env.insert(k.clone(), outer.get(name).cloned().unwrap_or_default());
        } else if let Some(name) = v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
            match outer.get(name) {
                Some(val) => env.insert(k.clone(), val.clone()),
                None => env.remove(k),
            };
        } else {
            // A template: each `${NAME}` in it filled from orch's
            // environment (empty when orch has none).
            let mut out = String::new();
            let mut rest = v;
            while let Some((before, after)) = rest.split_once("${") {
                let (name, tail) = after.split_once('}').unwrap();
                out.push_str(before);
                out.push_str(outer.get(name).map_or("", String::as_str));
                rest = tail;
            }
            out.push_str(rest);
            env.insert(k.clone(), fill(&out));
        }
    }
    env
}

#[test]
fn explain_json_rebuilds_the_process_orch_run_starts() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    write(d, "p.toml", &pipeline());
    write(d, "rec", RECORDER);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.join("rec"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rec = d.join("rec");
    // Codex's stand-in, a program outside the workspace.
    let native = tempfile::tempdir().unwrap();
    let source = native.path().join("rec.rs");
    std::fs::write(
        &source,
        NATIVE_RECORDER.replace("{recorder}", rec.to_str().unwrap()),
    )
    .unwrap();
    let built = std::process::Command::new("rustc")
        .args(["--edition", "2021", "-o"])
        .arg(native.path().join("codex"))
        .arg(&source)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let mut common: Vec<String> = vec!["--state-dir".into(), ".orch".into()];
    for kind in KINDS {
        let program = if kind == "codex" {
            native.path().join("codex")
        } else {
            rec.clone()
        };
        common.push("--agent-binary".into());
        common.push(format!("{kind}={}", program.display()));
    }
    let with = |extra: &[&str]| -> Vec<String> {
        common
            .iter()
            .cloned()
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
    };
    let orch_at = |args: Vec<String>| {
        orch()
            .current_dir(d)
            .args(args)
            .env("TZ", "UTC")
            .env_remove("LC_ALL")
            .output()
            .unwrap()
    };
    let out = orch_at(with(&[
        "explain",
        "p.toml",
        "--input",
        "topic=the parser",
        "--format",
        "json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let explained = json_of(&out);
    let attempt_id = explained["placeholders"]["attempt_id"]
        .as_str()
        .unwrap()
        .to_string();
    let preview_run = explained["placeholders"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();

    // The run: each recorder prints what it got (the CLIs then fail: no
    // final result event; that is not what is checked here).
    let out = orch_at(with(&["run", "p.toml", "--input", "topic=the parser"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = orch_at(with(&["runs", "events", "latest", "--format", "json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    let shown = orch_at(with(&["runs", "show", "latest", "--format", "json"]));
    let run_id = json_of(&shown)["run_id"].as_str().unwrap().to_string();
    let events = json_of(&out);
    for ev in events.as_array().expect("an array of events") {
        if let Some(rec) = ev["raw"].as_str().and_then(|r| r.strip_prefix("ORCH-REC ")) {
            seen.insert(
                ev["phase"].as_str().unwrap().to_string(),
                serde_json::from_str(rec).unwrap(),
            );
        }
    }
    let invocations = explained["invocations"].as_array().unwrap();
    assert_eq!(seen.len(), KINDS.len() + 1, "{seen:#?}");
    assert_eq!(invocations.len(), seen.len());

    for inv in invocations {
        let phase = inv["phase"].as_str().unwrap();
        let got = &seen[phase];
        // The attempt's real directory, from the one placeholder the JSON
        // names: the recorder saw it in the environment or its argv.
        let dir = inv["dir"].as_str().unwrap();
        let prefix = dir.strip_suffix(&attempt_id).unwrap();
        let real_dir = got["env"]
            .as_object()
            .unwrap()
            .values()
            .chain(got["argv"].as_array().unwrap())
            .filter_map(|v| v.as_str())
            .find_map(|v| {
                let at = v.find(prefix)?;
                Some(v[at..at + prefix.len() + attempt_id.len()].to_string())
            });
        let fill = |s: &str| -> String {
            let s = s.replace(&preview_run, &run_id);
            match &real_dir {
                Some(real) => s.replace(dir, real),
                None => s,
            }
        };
        let fill_value = |v: &Value| -> Value {
            match v {
                Value::String(s) => Value::String(fill(s)),
                other => other.clone(),
            }
        };
        let argv: Vec<Value> = inv["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(fill_value)
            .collect();
        let mut got_argv = got["argv"].as_array().unwrap().clone();
        // argv[0]: the recorder runs as a script, so Python names the
        // script; orch started the program the JSON names.
        assert_eq!(
            Path::new(got_argv[0].as_str().unwrap()).file_name(),
            Path::new(argv[0].as_str().unwrap()).file_name(),
            "{phase}"
        );
        got_argv[0] = argv[0].clone();
        assert_eq!(got_argv, argv, "{phase}: argv");
        assert_eq!(
            Path::new(got["cwd"].as_str().unwrap())
                .canonicalize()
                .unwrap(),
            Path::new(&fill(inv["cwd"].as_str().unwrap()))
                .canonicalize()
                .unwrap(),
            "{phase}: cwd"
        );
        assert_eq!(
            fill_value(&inv["stdin"]),
            got["stdin"].clone(),
            "{phase}: stdin"
        );
        let env: BTreeMap<String, String> = serde_json::from_value(got["env"].clone()).unwrap();
        assert_eq!(env, expected_env(inv, &fill), "{phase}: env");
        let files: BTreeMap<String, String> = inv["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    fill(f["path"].as_str().unwrap()),
                    fill(f["content"].as_str().unwrap()),
                )
            })
            .collect();
        let got_files: BTreeMap<String, String> =
            serde_json::from_value(got["files"].clone()).unwrap();
        assert_eq!(got_files, files, "{phase}: files");
        // The shells: orch's program under each name, and the folder's mark.
        let links: BTreeMap<String, String> = match inv["shells"].as_object() {
            Some(shells) => {
                let folder = fill(shells["folder"].as_str().unwrap());
                assert!(shells["program"].is_string(), "{phase}: {shells:?}");
                shells["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap())
                    .chain([".orch-shells"])
                    .map(|n| (format!("{folder}/{n}"), "shell".to_string()))
                    .collect()
            }
            None => BTreeMap::new(),
        };
        let got_links: BTreeMap<String, String> =
            serde_json::from_value(got["links"].clone()).unwrap();
        assert_eq!(got_links, links, "{phase}: links");
        assert!(real_dir.is_some(), "{phase}: no attempt directory seen");
    }
    // The prompt went somewhere for every CLI: on stdin or in argv.
    for kind in KINDS {
        let got = &seen[&format!("p-{kind}")];
        let text = format!("{}{}", got["stdin"], got["argv"]);
        assert!(text.contains("Look at the parser in run"), "{kind}: {text}");
    }
}
