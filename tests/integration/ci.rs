//! Running in CI: exported workflows (validated by check-jsonschema's
//! vendored schemas and zizmor), the job graph equal to the phase graph,
//! state carried across simulated jobs, and the reports CI users read
//! (JUnit, the step summary, annotations, log groups).

use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;
use saphyr::{LoadableYamlNode, YamlOwned};
use serde_json::Value;

use super::support::*;

fn examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("pipelines"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            (p.extension()? == "toml").then(|| format!("pipelines/{name}"))
        })
        .collect();
    v.sort();
    v
}

/// A pinned orch for the jobs (export has no default source). The docs'
/// examples use the same placeholder.
const SOURCE: [&str; 4] = [
    "--orch-git",
    "https://git.example.com/orch.git",
    "--orch-rev",
    "0123456789abcdef0123456789abcdef01234567",
];

/// An exported file read back with saphyr (orch's one YAML stack).
fn yaml(text: &str) -> YamlOwned {
    YamlOwned::load_from_str(text)
        .unwrap()
        .into_iter()
        .next()
        .unwrap()
}

fn export(target: &str, file: &str) -> String {
    let o = run(&[&["export", target, file][..], &SOURCE].concat());
    assert!(o.status.success(), "{file}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn exported_workflows_validate_and_pass_zizmor() {
    let validators = require!(Tool::CiValidators).join("venv/bin");
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(".github/workflows");
    let gl = dir.path().join("gitlab");
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::create_dir_all(&gl).unwrap();
    let mut gh_files = Vec::new();
    let mut gl_files = Vec::new();
    for f in examples() {
        let name = Path::new(&f)
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let p = wf.join(format!("{name}.yml"));
        std::fs::write(&p, export("github-actions", &f)).unwrap();
        gh_files.push(p);
        let p = gl.join(format!("{name}.yml"));
        std::fs::write(&p, export("gitlab-ci", &f)).unwrap();
        gl_files.push(p);
    }
    // The other pinned source: a binary checked by its SHA-256.
    let sum = "a".repeat(64);
    let bin = [
        "--orch-binary",
        "https://example.com/dl/orch",
        "--orch-sha256",
        &sum,
    ];
    for (target, dir, files) in [
        ("github-actions", &wf, &mut gh_files),
        ("gitlab-ci", &gl, &mut gl_files),
    ] {
        let o = run(&[&["export", target, "pipelines/demo.toml"][..], &bin].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        let p = dir.join("demo-binary.yml");
        std::fs::write(&p, stdout(&o)).unwrap();
        files.push(p);
    }
    assert!(gh_files.len() >= 5);
    for (schema, files) in [
        ("vendor.github-workflows", &gh_files),
        ("vendor.gitlab-ci", &gl_files),
    ] {
        let o = Command::new(validators.join("check-jsonschema"))
            .arg("--builtin-schema")
            .arg(schema)
            .args(files)
            .output()
            .unwrap();
        assert!(o.status.success(), "{schema}: {}{}", stdout(&o), stderr(&o));
    }
    let o = Command::new(validators.join("zizmor"))
        .args(["--offline", "--no-progress", "--format", "plain"])
        .arg(dir.path())
        .output()
        .unwrap();
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        o.status.success() && out.contains("No findings to report"),
        "zizmor: {out}"
    );
}

/// Phase names a YAML 1.1 reader (GitLab's) would take for a boolean, a
/// number or a date, and artifact paths with YAML's indicators, quotes, a
/// line break and characters YAML 1.1 reads as line breaks: saphyr reads
/// every one back as written, ruamel in YAML 1.1 mode reads the same
/// document, and the files validate.
#[test]
fn hostile_names_and_paths_read_back_as_written() {
    let names = [
        "on",
        "no",
        "y",
        "true",
        "null",
        "1_000",
        "2014-12-31",
        "0x1f",
        "08",
        "1e3",
        "123",
    ];
    let paths = [
        "a: b",
        "#x",
        "x #y",
        "*star",
        "&amp",
        "- dash",
        "? q",
        "!tag",
        "%pct",
        "@at",
        "`tick`",
        "{flow}",
        "[seq]",
        "'single'",
        "\"double\"",
        "back\\slash",
        " lead",
        "trail ",
        "---",
        "line\nbreak",
        "nel\u{85}x",
        "ls\u{2028}x",
        "ps\u{2029}x",
        "bom\u{feff}x",
        "c1\u{80}x",
        "é ünïcode",
    ];
    let toml_str = |s: &str| serde_json::to_string(s).unwrap();
    let mut t = String::from(
        "version = 1\nname = \"hostile\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for (i, n) in names.iter().enumerate() {
        t.push_str(&format!("[[phases]]\nname = \"{n}\"\nagents = [\"a\"]\n"));
        if i == 0 {
            let list: Vec<String> = paths.iter().map(|p| toml_str(p)).collect();
            t.push_str(&format!("artifacts = [{}]\n", list.join(", ")));
        } else {
            t.push_str(&format!("depends_on = [\"{}\"]\n", names[i - 1]));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.toml", &t);
    let mut files = Vec::new();
    for target in ["github-actions", "gitlab-ci"] {
        let o = run_in(
            dir.path(),
            &[&["export", target, "p.toml"][..], &SOURCE].concat(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        let wf = yaml(&text);
        let jobs = if target == "github-actions" {
            wf["jobs"].clone()
        } else {
            wf.clone()
        };
        let mut phases: Vec<String> = Vec::new();
        let mut scripts = String::new();
        for (_, job) in jobs.as_mapping().unwrap() {
            let mut strings = Vec::new();
            collect_strings(job, &mut strings);
            phases.extend(
                job.as_mapping_get("variables")
                    .and_then(|v| v.as_mapping_get("ORCH_PHASE"))
                    .into_iter()
                    .chain(job.as_mapping_get("steps").into_iter().flat_map(|s| {
                        s.as_sequence()
                            .unwrap()
                            .iter()
                            .filter_map(|s| s.as_mapping_get("env")?.as_mapping_get("ORCH_PHASE"))
                    }))
                    .map(|v| v.as_str().expect("a phase name is a string").to_string()),
            );
            scripts.push_str(&strings.join("\n"));
        }
        phases.sort();
        let mut want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        want.sort();
        assert_eq!(phases, want, "{target}: {text}");
        for p in paths {
            // As the save script quotes it for the shell (`*` left to match).
            let quoted = p
                .split('*')
                .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
                .collect::<Vec<_>>()
                .join("*");
            assert!(scripts.contains(&quoted), "{target}: {p:?} in {scripts}");
        }
        let path = dir.path().join(format!("{target}.yml"));
        std::fs::write(&path, &text).unwrap();
        files.push((target, path, wf));
    }

    let validators = require!(Tool::CiValidators).join("venv/bin");
    for (target, path, wf) in &files {
        // YAML 1.1, as GitLab's Psych reads: the same document, every
        // scalar orch wrote as a string still one.
        let o = Command::new(validators.join("python"))
            .args([
                "-c",
                "import sys, json\nfrom ruamel.yaml import YAML\ny = YAML(typ='safe', pure=True)\ny.version = (1, 1)\nprint(json.dumps(y.load(open(sys.argv[1], encoding='utf-8'))))",
            ])
            .arg(path)
            .output()
            .unwrap();
        assert!(o.status.success(), "{target}: {}", stderr(&o));
        let read: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(read, to_json(wf), "{target}");
        let schema = match *target {
            "github-actions" => "vendor.github-workflows",
            _ => "vendor.gitlab-ci",
        };
        let o = Command::new(validators.join("check-jsonschema"))
            .args(["--builtin-schema", schema])
            .arg(path)
            .output()
            .unwrap();
        assert!(o.status.success(), "{schema}: {}{}", stdout(&o), stderr(&o));
    }
}

/// Every string of a YAML node, in order.
fn collect_strings(node: &YamlOwned, out: &mut Vec<String>) {
    if let Some(s) = node.as_str() {
        out.push(s.to_string());
    } else if let Some(seq) = node.as_sequence() {
        seq.iter().for_each(|n| collect_strings(n, out));
    } else if let Some(map) = node.as_mapping() {
        map.values().for_each(|n| collect_strings(n, out));
    }
}

/// A YAML node as JSON (strings, booleans, integers, lists, mappings with
/// string keys: what an export holds).
fn to_json(node: &YamlOwned) -> Value {
    if let Some(s) = node.as_str() {
        Value::String(s.to_string())
    } else if let Some(b) = node.as_bool() {
        Value::Bool(b)
    } else if let Some(i) = node.as_integer() {
        Value::from(i)
    } else if let Some(seq) = node.as_sequence() {
        Value::Array(seq.iter().map(to_json).collect())
    } else if let Some(map) = node.as_mapping() {
        Value::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().unwrap().to_string(), to_json(v)))
                .collect(),
        )
    } else {
        panic!("not in an export: {node:?}")
    }
}

#[test]
fn export_check_compares_with_the_checked_in_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("wf.yml");
    let p = p.to_str().unwrap();
    let args = [
        &["export", "github-actions", "pipelines/demo.toml", "-o", p][..],
        &SOURCE,
    ]
    .concat();
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let check = [&args[..], &["--check"]].concat();
    let o = run(&check);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The header's own command line is the one to run.
    let header = std::fs::read_to_string(p).unwrap();
    assert!(
        header.contains(&format!("{} --check -o <this file>", SOURCE.join(" "))),
        "{header}"
    );
    std::fs::write(p, header + "# edited\n").unwrap();
    let o = run(&check);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is not what `orch export` writes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn golden_exports_of_the_demo() {
    insta::assert_snapshot!(
        "github_demo",
        export("github-actions", "pipelines/demo.toml")
    );
    insta::assert_snapshot!("gitlab_demo", export("gitlab-ci", "pipelines/demo.toml"));
}

#[test]
fn secrets_go_only_to_the_jobs_whose_agents_read_them() {
    let y = export("github-actions", "pipelines/research-audit.toml");
    let wf = yaml(&y);
    for (id, job) in wf["jobs"].as_mapping().unwrap() {
        let text = format!("{job:?}");
        let id = id.as_str().unwrap();
        for step in job["steps"].as_sequence().unwrap() {
            if step.as_mapping_get("id").and_then(|v| v.as_str()) != Some("run") {
                assert!(
                    !format!("{step:?}").contains("secrets."),
                    "{id}: a secret outside the run step"
                );
            }
        }
        assert_eq!(
            job["permissions"]["contents"].as_str(),
            Some("read"),
            "{id}: {text}"
        );
    }
    assert!(y.starts_with("# Generated by `orch export github-actions"));
    assert!(y.contains("#   ANTHROPIC_API_KEY:"), "{y}");
}

/// A pipeline of command phases with these dependencies (phase i may only
/// depend on phases before it).
fn dag_pipeline(deps: &[Vec<usize>]) -> String {
    let mut t = String::from(
        "version = 1\nname = \"dag\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for (i, d) in deps.iter().enumerate() {
        let names: Vec<String> = d.iter().map(|j| format!("\"p{j}\"")).collect();
        t.push_str(&format!(
            "[[phases]]\nname = \"p{i}\"\nagents = [\"a\"]\ndepends_on = [{}]\n",
            names.join(", ")
        ));
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// For generated DAGs, the exported jobs' `needs` are exactly the
    /// phases' `depends_on`, in both CI systems; the summary job needs all.
    #[test]
    fn the_job_graph_is_the_phase_graph(raw in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..4), 1..9)) {
        let deps: Vec<Vec<usize>> = raw.iter().enumerate().map(|(i, idx)| {
            let mut d: Vec<usize> = if i == 0 { Vec::new() } else { idx.iter().map(|x| x.index(i)).collect() };
            d.sort();
            d.dedup();
            d
        }).collect();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, dag_pipeline(&deps)).unwrap();
        for target in ["github-actions", "gitlab-ci"] {
            let o = orch().current_dir(dir.path()).args(["export", target, "p.toml"]).args(SOURCE).output().unwrap();
            prop_assert!(o.status.success(), "{}", stderr(&o));
            let wf = yaml(&stdout(&o));
            let jobs = if target == "github-actions" { wf["jobs"].clone() } else { wf.clone() };
            for (i, d) in deps.iter().enumerate() {
                let job = &jobs[format!("p{i}").as_str()];
                let mut needs: Vec<String> = job.as_mapping_get("needs").and_then(|n| n.as_sequence()).map(|s| s.iter().map(|v| v.as_str().unwrap().to_string()).collect()).unwrap_or_default();
                needs.sort();
                let mut want: Vec<String> = d.iter().map(|j| format!("p{j}")).collect();
                want.sort();
                prop_assert_eq!(needs, want, "{} p{}", target, i);
            }
            let summary = &jobs["orch-summary"]["needs"];
            prop_assert_eq!(summary.as_sequence().unwrap().len(), deps.len());
        }
    }
}

/// A pipeline with a required phase that fails, an optional one that
/// fails, and phases after each.
const MIXED: &str = r#"
version = 1
name = "mixed"
[agents.ok]
kind = "command"
command = ["sh", "-c", "mkdir -p made && echo made > made/file.txt && echo done"]
[agents.bad]
kind = "command"
command = ["sh", "-c", "echo 'something broke' >&2; exit 3"]
[[phases]]
name = "first"
agents = ["ok"]
[[phases]]
name = "flaky"
agents = ["bad"]
required = false
depends_on = ["first"]
[[phases]]
name = "after-flaky"
agents = ["ok"]
depends_on = ["flaky"]
[[phases]]
name = "broken"
agents = ["bad"]
depends_on = ["first"]
[[phases]]
name = "after-broken"
agents = ["ok"]
depends_on = ["broken"]
"#;

/// `orch --state-dir STATE ARGS` in `dir`: one CI job's view.
fn job_in(dir: &Path, state: &str, args: &[&str]) -> std::process::Output {
    run_in(dir, &[&["--state-dir", state][..], args].concat())
}

fn phases_of(dir: &Path, state: &str, run: &str) -> Vec<(String, String, Option<String>)> {
    let o = job_in(dir, state, &["runs", "show", run, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut p: Vec<(String, String, Option<String>)> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["status"].as_str().unwrap().to_string(),
                p["reason"].as_str().map(str::to_string),
            )
        })
        .collect();
    p.sort();
    p
}

/// Every phase as its own job would run it (own state directory,
/// `--phase`, state export/import between them, dependencies first, a job
/// skipped when a required dependency failed, as CI's `needs` does), then
/// the merge job: the merged run shows every phase with the outcome one
/// local `orch run` gives.
#[test]
fn a_simulated_ci_run_merges_into_the_local_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("p.toml"), MIXED).unwrap();
    let run_id = "gh-42";
    let order = ["first", "flaky", "broken", "after-flaky", "after-broken"];
    let deps = |p: &str| -> Vec<&str> {
        match p {
            "first" => vec![],
            "flaky" | "broken" => vec!["first"],
            "after-flaky" => vec!["flaky"],
            _ => vec!["broken"],
        }
    };
    let mut outcome: std::collections::HashMap<&str, bool> = Default::default();
    for phase in order {
        // CI skips a job whose required dependency failed.
        if deps(phase).iter().any(|u| *u == "broken" && !outcome[u]) {
            continue;
        }
        let state = format!("jobs/{phase}");
        let mut ups: Vec<&str> = Vec::new();
        let mut todo = deps(phase);
        while let Some(u) = todo.pop() {
            if !ups.contains(&u) {
                ups.push(u);
                todo.extend(deps(u));
            }
        }
        for u in ups {
            let o = job_in(d, &state, &["state", "import", &format!("out/{u}.db")]);
            assert!(o.status.success(), "{phase} imports {u}: {}", stderr(&o));
        }
        let o = job_in(
            d,
            &state,
            &["run", "p.toml", "--phase", phase, "--run-id", run_id],
        );
        outcome.insert(phase, o.status.success());
        let o = job_in(
            d,
            &state,
            &[
                "state",
                "export",
                "--run",
                run_id,
                "-o",
                &format!("out/{phase}.db"),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let files: Vec<String> = std::fs::read_dir(d.join("out"))
        .unwrap()
        .map(|e| format!("out/{}", e.unwrap().file_name().to_str().unwrap()))
        .collect();
    let mut args = vec!["state", "import", "--pipeline", "p.toml"];
    args.extend(files.iter().map(String::as_str));
    let o = job_in(d, "merged", &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let merged = phases_of(d, "merged", run_id);
    let before = job_in(d, "merged", &["runs", "show", run_id, "--format", "json"]);
    // Importing again changes nothing.
    let o = job_in(d, "merged", &args);
    assert!(o.status.success());
    let again = job_in(d, "merged", &["runs", "show", run_id, "--format", "json"]);
    assert_eq!(stdout(&before), stdout(&again));

    let o = job_in(d, "local", &["run", "p.toml"]);
    assert_eq!(o.status.code(), Some(1));
    let local = phases_of(d, "local", "latest");
    assert_eq!(merged.len(), 5, "{merged:?}");
    let strip = |v: &[(String, String, Option<String>)]| -> Vec<(String, String)> {
        v.iter().map(|(n, s, _)| (n.clone(), s.clone())).collect()
    };
    assert_eq!(strip(&merged), strip(&local));
    // The skipped phase says why, as the local run does.
    let skipped = |v: &[(String, String, Option<String>)]| {
        v.iter().find(|p| p.0 == "after-broken").unwrap().2.clone()
    };
    assert_eq!(skipped(&merged), skipped(&local));
    let status = |state: &str, run: &str| {
        let o = job_in(d, state, &["runs", "show", run, "--format", "json"]);
        serde_json::from_str::<Value>(&stdout(&o)).unwrap()["status"].clone()
    };
    assert_eq!(status("merged", run_id), status("local", "latest"));
    assert_eq!(status("merged", run_id), "failed");
    // The merge job fails with the run (GitLab's summary job runs this).
    let o = job_in(d, "merged", &["runs", "show", run_id, "--exit-status"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = job_in(d, "out-ok", &["run", "p.toml", "--phase", "first"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = job_in(d, "out-ok", &["runs", "show", "latest", "--exit-status"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn python_junit_cases(path: &Path) -> Vec<(String, String, String)> {
    let o = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, xml.etree.ElementTree as E\n\
             for c in E.parse(sys.argv[1]).getroot().iter('testcase'):\n\
             \x20 k = 'failure' if c.find('failure') is not None else 'skipped' if c.find('skipped') is not None else 'ok'\n\
             \x20 print(c.get('classname'), c.get('name'), k, sep='\\t')",
        )
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].into(), f[1].into(), f[2].into())
        })
        .collect()
}

/// `orch run --junit`, the step summary and the job output with GitHub's
/// variables set; the same JUnit from `orch runs show` after an import.
#[test]
fn junit_step_summary_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("p.toml"), MIXED).unwrap();
    std::fs::write(d.join("summary.md"), "").unwrap();
    let o = orch()
        .current_dir(d)
        .args(["--state-dir", "st", "run", "p.toml", "--junit", "live.xml"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", d.join("summary.md"))
        .env("GITHUB_OUTPUT", d.join("output.txt"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    // One group per phase that ran, none nested.
    let mut open = false;
    let mut groups = 0;
    for l in err.lines() {
        if l.starts_with("::group::") {
            assert!(!open, "nested group: {err}");
            open = true;
            groups += 1;
        } else if l == "::endgroup::" {
            assert!(open);
            open = false;
        }
    }
    assert!(!open);
    assert_eq!(groups, 5, "{err}");

    let cases = python_junit_cases(&d.join("live.xml"));
    // A case per phase and one per agent that ran.
    assert_eq!(cases.len(), 5 + 4, "{cases:?}");
    assert!(cases.contains(&("broken".into(), "bad".into(), "failure".into())));
    assert!(cases.contains(&("after-broken".into(), "phase".into(), "skipped".into())));
    assert!(cases.contains(&("first".into(), "ok".into(), "ok".into())));
    let xml = std::fs::read_to_string(d.join("live.xml")).unwrap();
    assert!(xml.contains("something broke"), "the output's tail: {xml}");

    let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(
        md.contains("| Phase | Agent | Outcome | Duration | Turns | Tokens | Cost |"),
        "{md}"
    );
    assert!(md.contains("| **broken** | | ❌ failed"), "{md}");
    assert!(md.contains("something broke"), "{md}");
    assert!(md.len() < 1024 * 1024);
    assert_eq!(
        std::fs::read_to_string(d.join("output.txt")).unwrap(),
        "outcome=failed\n"
    );

    // The same report from the stored run, after an export and import.
    let o = job_in(
        d,
        "st",
        &["state", "export", "--run", "latest", "-o", "run.db"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = job_in(d, "other", &["state", "import", "run.db"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = job_in(
        d,
        "other",
        &["runs", "show", "latest", "--junit", "stored.xml"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(d.join("stored.xml")).unwrap(),
        xml,
        "a stored run reports as the live one"
    );
    let o = job_in(d, "other", &["runs", "show", "latest", "--markdown"]);
    assert_eq!(stdout(&o), md);
}

/// With `GITHUB_ACTIONS=true`, diagnostics become annotations at their
/// file, line and column: errors first, at most 10 of each kind, then a
/// notice of how many were left out.
#[test]
fn diagnostics_become_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut t = String::from("version = 1\nname = \"x\"\n");
    for i in 0..12 {
        t.push_str(&format!(
            "[[phases]]\nname = \"p{i}\"\nagents = [\"missing{i}\"]\n"
        ));
    }
    std::fs::write(d.join("bad.toml"), t).unwrap();
    let o = orch()
        .current_dir(d)
        .args(["validate", "bad.toml"])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 10, "{err}");
    assert!(
        errors[0].starts_with("::error file=bad.toml,line=5,col="),
        "{}",
        errors[0]
    );
    let notice: Vec<&str> = err.lines().filter(|l| l.starts_with("::notice")).collect();
    assert_eq!(notice.len(), 1, "{err}");
    assert!(notice[0].contains("2 more diagnostics"), "{}", notice[0]);
    // Without GITHUB_ACTIONS, none.
    let o = orch()
        .current_dir(d)
        .args(["validate", "bad.toml"])
        .output()
        .unwrap();
    assert!(!stderr(&o).contains("::error"));
}

/// The README's workflow and the examples are what export writes now.
#[test]
fn the_documented_exports_are_current() {
    let gh = export("github-actions", "pipelines/demo.toml");
    let gl = export("gitlab-ci", "pipelines/demo.toml");
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    assert_eq!(
        read("examples/ci/demo.github.yml"),
        gh,
        "write it again with the command in its header, -o examples/ci/demo.github.yml"
    );
    assert_eq!(read("examples/ci/demo.gitlab-ci.yml"), gl);
    assert!(
        read("README.md").contains(&format!("```yaml\n{gh}```")),
        "README.md: paste examples/ci/demo.github.yml into \"Running in CI\""
    );
}

/// What is not an export, or not there, is a clear error naming the file.
#[test]
fn state_import_and_export_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("notes.db"), "hello\n").unwrap();
    let o = job_in(d, "st", &["state", "import", "notes.db"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        flat_stderr(&o).contains("`notes.db` is not an orch state export"),
        "{}",
        stderr(&o)
    );
    let o = job_in(d, "st", &["state", "import", "missing.db"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        flat_stderr(&o).contains("`missing.db` is not a file"),
        "{}",
        stderr(&o)
    );
    let o = job_in(d, "st", &["state", "export", "--run", "nope", "-o", "x.db"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(flat_stderr(&o).contains("no run `nope`"), "{}", stderr(&o));
    assert!(!d.join("x.db").exists());
}

/// Export has no default orch for the jobs: a name on a public registry
/// could be anyone's. Without a pinned source, or with a loose one, it
/// refuses and says how to pin.
#[test]
fn export_refuses_an_unpinned_orch() {
    let sha = "0".repeat(64);
    let rev = "0".repeat(40);
    for (args, says) in [
        (vec![], "say which orch the jobs install"),
        (
            vec![
                "--orch-git",
                "https://git.example.com/o.git",
                "--orch-rev",
                "main",
            ],
            "is not a full commit SHA",
        ),
        (
            vec![
                "--orch-binary",
                "http://example.com/orch",
                "--orch-sha256",
                &sha,
            ],
            "is not a plain https URL",
        ),
        (
            vec![
                "--orch-binary",
                "https://example.com/orch",
                "--orch-sha256",
                "abc",
            ],
            "is not a SHA-256",
        ),
        // A line separator YAML readers honour would end the header's
        // comment and start a job; quotes, `$` and other schemes are out.
        (
            vec![
                "--orch-binary",
                "https://e.com/o\u{2028}evil:",
                "--orch-sha256",
                &sha,
            ],
            "is not a plain https URL",
        ),
        (
            vec![
                "--orch-binary",
                "https://e.com/o\u{85}x",
                "--orch-sha256",
                &sha,
            ],
            "is not a plain https URL",
        ),
        (
            vec!["--orch-git", "https://e.com/$(id)", "--orch-rev", &rev],
            "is not a plain https:// or ssh:// URL",
        ),
        (
            vec!["--orch-git", "ext::sh -c touch% /tmp/x", "--orch-rev", &rev],
            "is not a plain https:// or ssh:// URL",
        ),
        (
            vec!["--orch-git", "file:///srv/orch", "--orch-rev", &rev],
            "is not a plain https:// or ssh:// URL",
        ),
        (
            vec![
                "--orch-git",
                "https://e.com/o.git",
                "--orch-rev",
                &rev,
                "--on",
                "push",
            ],
            "--on is for GitHub Actions",
        ),
    ] {
        let o = run(&[&["export", "gitlab-ci", "pipelines/demo.toml"][..], &args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

/// `--orch-binary` jobs install orch only when the download has the given
/// SHA-256: the exported step is run with a `curl` that serves a local
/// file, once with the right sum and once with a wrong one.
#[test]
fn a_binary_orch_is_installed_only_with_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let payload = d.join("payload");
    std::fs::write(&payload, "#!/bin/sh\necho orch-from-release\n").unwrap();
    let sum = {
        let o = Command::new("sha256sum").arg(&payload).output().unwrap();
        stdout(&o).split_whitespace().next().unwrap().to_string()
    };
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // curl ... -o FILE URL: copy the payload to FILE.
    let curl = bin.join("curl");
    std::fs::write(
        &curl,
        format!(
            "#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\ncp '{}' \"$out\"\n",
            payload.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&curl, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (sum, installs) in [(sum.clone(), true), ("f".repeat(64), false)] {
        let y = run(&[
            "export",
            "github-actions",
            "pipelines/demo.toml",
            "--orch-binary",
            "https://example.com/orch",
            "--orch-sha256",
            &sum,
        ]);
        assert!(y.status.success(), "{}", stderr(&y));
        let wf = yaml(&stdout(&y));
        let (_, job) = wf["jobs"].as_mapping().unwrap().iter().next().unwrap();
        let step = job["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|s| s["name"].as_str() == Some("Install orch"))
            .unwrap();
        let script = step["run"].as_str().unwrap();
        assert!(script.contains(&sum), "{script}");
        // The header repeats the pinned source for --check.
        assert!(
            stdout(&y).contains("--orch-binary https://example.com/orch --orch-sha256"),
            "{}",
            stdout(&y)
        );
        let home = d.join(format!("home-{installs}"));
        let tmp = d.join(format!("tmp-{installs}"));
        std::fs::create_dir_all(&tmp).unwrap();
        let o = Command::new("bash")
            .args(["-e", "-c", script])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("HOME", &home)
            .env("RUNNER_TEMP", &tmp)
            .env_remove("CARGO_HOME")
            .output()
            .unwrap();
        let installed = home.join(".cargo/bin/orch");
        assert_eq!(o.status.success(), installs, "{}", stderr(&o));
        assert_eq!(installed.exists(), installs);
        if installs {
            let o = Command::new(&installed).output().unwrap();
            assert_eq!(stdout(&o).trim(), "orch-from-release");
        }
    }
}

/// Each phase's outcome reaches the summary job's check under a variable
/// of its own: `a-b` and `a_b` would otherwise share one, and one phase's
/// success could hide the other's failure.
#[test]
fn the_summary_reads_each_phases_outcome_apart() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.toml",
        "version = 1\nname = \"p\"\n[agents.t]\nkind = \"command\"\ncommand = [\"true\"]\n\
         [[phases]]\nname = \"a-b\"\nagents = [\"t\"]\n[[phases]]\nname = \"a_b\"\nagents = [\"t\"]\n",
    );
    let o = run_in(
        dir.path(),
        &[&["export", "github-actions", "p.toml"][..], &SOURCE].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let wf = yaml(&stdout(&o));
    let steps = wf["jobs"]["orch-summary"]["steps"].as_sequence().unwrap();
    let check = steps.last().unwrap();
    let env = check["env"].as_mapping().unwrap();
    assert_eq!(env.len(), 2, "{env:?}");
    let script = check["run"].as_str().unwrap();
    for (k, v) in env {
        let k = k.as_str().unwrap();
        assert!(
            script.contains(&format!("\"${k}\" != succeeded")),
            "{k}: {script}"
        );
        assert!(v.as_str().unwrap().contains("needs.a"), "{v:?}");
    }
}

/// The git steps as orch exported them before they were hardened: git as
/// the repository, the runner's user and system configure it.
const OLD_RESTORE: &str = "set -eu\nmkdir -p \"$RUNNER_TEMP/orch-out\"\nfor job in prepare; do\n  dir=\"$RUNNER_TEMP/orch-in/$job\"\n  if [ -s \"$dir/changes.patch\" ]; then git apply --index \"$dir/changes.patch\"; fi\n  if [ -f \"$dir/files.tar\" ]; then tar -xf \"$dir/files.tar\"; fi\n  orch --state-dir \"$RUNNER_TEMP/orch-state\" state import \"$dir/state.db\"\ndone\ngit add -A\ngit write-tree > \"$RUNNER_TEMP/orch-base\"\n";
const OLD_SAVE: &str = "set -u\nmkdir -p \"$RUNNER_TEMP/orch-out\"\ngit add -A\ngit diff --cached --binary \"$(cat \"$RUNNER_TEMP/orch-base\")\" > \"$RUNNER_TEMP/orch-out/changes.patch\"\n";

/// What an agent plants in the job's repository: each program leaves a
/// marker in `$M`, outside it.
const PLANT_IN_REPO: &str = r#"
git config core.fsmonitor "touch $M/fsmonitor; :"
git config filter.f.clean "touch $M/clean; cat"
git config filter.f.smudge "touch $M/smudge; cat"
git config diff.t.textconv "touch $M/textconv; cat"
git config diff.t.command "touch $M/diff-command; :"
git config diff.external "touch $M/diff-external; :"
printf '[core]\n\tfsmonitor = "touch %s/include; :"\n' "$M" > "$PWD/../inc-$$.cfg"; git config include.path "$PWD/../inc-$$.cfg"
for h in post-index-change reference-transaction pre-auto-gc; do printf '#!/bin/sh\ntouch "%s/hook-%s"\n' "$M" "$h" > ".git/hooks/$h"; chmod +x ".git/hooks/$h"; done
mkdir -p "$PWD/../hooks-$$"; cp .git/hooks/post-index-change "$PWD/../hooks-$$/"; git config core.hooksPath "$PWD/../hooks-$$"
"#;

/// What the agent of the first job changes, attributes naming the planted
/// drivers included (the runner's own filters too: the home's and the
/// system's config are planted as well).
const AGENT_EDITS: &str = r#"
printf 'agent\n' >> a.txt; printf 'b2\n' > b.txt; rm c.txt; printf 'new\n' > new.txt; printf '\000\001\002' > bin.dat
printf 'a.txt filter=f diff=t\nb.txt filter=g diff=s\nnew.txt filter=g diff=s\n' > .gitattributes
"#;

/// bash as a GitHub step runs it, in `dir`, with `env`; `$M` is where
/// planted programs leave markers.
fn step_bash(dir: &Path, script: &str, env: &[(&str, PathBuf)]) -> std::process::Output {
    Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("ORCH_RUN_ID", "gh-1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The exported steps that run git in a job's work tree (restoring
/// upstream work before the agents, saving theirs after) start no program
/// the repository's config, its hooks, an included file, the runner
/// user's or the system's config names, though the agent wrote
/// attributes naming them; the old steps start them all. On clean copies
/// the new steps make the same patch and the same tree as the old.
#[test]
fn the_exported_git_steps_start_no_planted_program() {
    let wf = yaml(&export("github-actions", "pipelines/demo.toml"));
    let step = |job: &str, name: &str| -> String {
        wf["jobs"][job]["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .unwrap()["run"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let restore_first = step("prepare", "Restore upstream work");
    let save_first = step("prepare", "Save state and files");
    let restore_next = step("count", "Restore upstream work");
    assert!(
        restore_next.contains("orch_git apply --index"),
        "{restore_next}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().canonicalize().unwrap();
    let marks = t.join("marks");
    let bin = t.join("bin");
    for d in [&marks, &bin, &t.join("home-planted"), &t.join("home-clean")] {
        std::fs::create_dir_all(d).unwrap();
    }
    // orch itself is not what this is about: a stand-in that writes its -o.
    let stub = bin.join("orch");
    std::fs::write(
        &stub,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        t.join("home-planted/.gitconfig"),
        format!(
            "[filter \"g\"]\n\tclean = \"touch {m}/home-clean; cat\"\n\tsmudge = \"touch {m}/home-smudge; cat\"\n",
            m = marks.display()
        ),
    )
    .unwrap();
    std::fs::write(
        t.join("system-planted"),
        format!(
            "[diff \"s\"]\n\ttextconv = \"touch {}/system-textconv; cat\"\n",
            marks.display()
        ),
    )
    .unwrap();
    std::fs::write(t.join("system-clean"), "").unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // (workspace, RUNNER_TEMP, planted runner config?) -> environment
    let env = |rt: &Path, planted: bool| -> Vec<(&str, PathBuf)> {
        let which = if planted { "planted" } else { "clean" };
        vec![
            ("RUNNER_TEMP", rt.to_path_buf()),
            ("HOME", t.join(format!("home-{which}"))),
            ("XDG_CONFIG_HOME", t.join(format!("home-{which}/.config"))),
            ("GIT_CONFIG_SYSTEM", t.join(format!("system-{which}"))),
            ("M", marks.clone()),
            ("PATH", PathBuf::from(&path)),
        ]
    };
    let ok = |o: std::process::Output, what: &str| {
        assert!(
            o.status.success(),
            "{what}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let sh = |dir: &Path, script: &str| ok(step_bash(dir, script, &env(&t, false)), script);
    let marks_left = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&marks)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    sh(
        &t,
        "git init -q -b main origin && cd origin && printf 'a\\n' > a.txt && printf 'b\\n' > b.txt && printf 'c\\n' > c.txt && git add -A && git commit -qm init",
    );

    // The first job: restore (nothing upstream), the agent, save.
    let (j1, rt1) = (t.join("j1"), t.join("rt1"));
    sh(&t, "git clone -q origin j1 && mkdir rt1");
    ok(step_bash(&j1, &restore_first, &env(&rt1, true)), "restore");
    sh(&j1, AGENT_EDITS);
    sh(&t, "cp -a j1 j1-clean && cp -a rt1 rt1-clean");
    sh(&j1, PLANT_IN_REPO);
    ok(step_bash(&j1, &save_first, &env(&rt1, true)), "save");
    assert_eq!(
        marks_left(),
        Vec::<String>::new(),
        "the save step started a planted program"
    );
    let patch = std::fs::read(rt1.join("orch-out/changes.patch")).unwrap();
    let text = String::from_utf8_lossy(&patch);
    for part in [
        "new.txt",
        "+agent",
        "deleted file mode",
        "GIT binary patch",
        ".gitattributes",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(
        !j1.join(".git/index.lock").exists() && std::fs::read_dir(j1.join(".git/objects")).is_ok()
    );
    // The old step on a clean copy makes the same patch.
    let (j1c, rt1c) = (t.join("j1-clean"), t.join("rt1-clean"));
    ok(step_bash(&j1c, OLD_SAVE, &env(&rt1c, false)), "old save");
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(rt1c.join("orch-out/changes.patch")).unwrap()),
        text
    );
    // The old step on the planted repository starts them.
    step_bash(&j1, OLD_SAVE, &env(&rt1, true));
    let started = marks_left();
    // (The included file's fsmonitor comes last: it is the one git runs;
    // the external diff takes the textconv's place.)
    for m in [
        "include",
        "clean",
        "smudge",
        "home-clean",
        "diff-external",
        "hook-post-index-change",
    ] {
        assert!(started.iter().any(|s| s == m), "{m}: {started:?}");
    }
    std::fs::remove_dir_all(&marks).unwrap();
    std::fs::create_dir(&marks).unwrap();

    // The next job restores that patch in a fresh checkout whose config is
    // planted too, with the runner's planted.
    // (Clones, not copies: a copied index no longer matches its files.)
    for (j, rt) in [
        ("j2", "rt2"),
        ("j2-clean", "rt2-clean"),
        ("j2-old", "rt2-old"),
    ] {
        sh(
            &t,
            &format!(
                "git clone -q origin {j} && mkdir -p {rt}/orch-in/prepare && : > {rt}/orch-in/prepare/state.db"
            ),
        );
        std::fs::write(t.join(rt).join("orch-in/prepare/changes.patch"), &patch).unwrap();
    }
    let j2 = t.join("j2");
    sh(&j2, PLANT_IN_REPO);
    sh(&t.join("j2-old"), PLANT_IN_REPO);
    let rt2 = t.join("rt2");
    ok(step_bash(&j2, &restore_next, &env(&rt2, true)), "restore");
    assert_eq!(
        marks_left(),
        Vec::<String>::new(),
        "the restore step started a planted program"
    );
    // The old step on a clean copy restores the same tree.
    let (j2c, rt2c) = (t.join("j2-clean"), t.join("rt2-clean"));
    ok(
        step_bash(&j2c, OLD_RESTORE, &env(&rt2c, false)),
        "old restore",
    );
    let base = std::fs::read_to_string(rt2.join("orch-base")).unwrap();
    assert_eq!(
        base,
        std::fs::read_to_string(rt2c.join("orch-base")).unwrap()
    );
    for f in ["a.txt", "b.txt", "new.txt", "bin.dat", ".gitattributes"] {
        assert_eq!(
            std::fs::read(j2.join(f)).ok(),
            std::fs::read(j2c.join(f)).ok(),
            "{f}"
        );
        assert!(j2.join(f).exists(), "{f}");
    }
    assert!(!j2.join("c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(j2.join("a.txt")).unwrap(),
        "a\nagent\n"
    );
    // The old step on the planted copy starts them.
    step_bash(
        &t.join("j2-old"),
        OLD_RESTORE,
        &env(&t.join("rt2-old"), true),
    );
    let started = marks_left();
    for m in ["include", "clean", "home-clean", "hook-post-index-change"] {
        assert!(started.iter().any(|s| s == m), "{m}: {started:?}");
    }

    // A base that is not a tree id is never given to git (on GitLab
    // `$RUNNER_TEMP` is in the workspace, the agents' to write).
    let out = t.join("written");
    std::fs::write(
        rt1.join("orch-base"),
        format!("--output={}\n", out.display()),
    )
    .unwrap();
    let o = step_bash(&j1, &save_first, &env(&rt1, true));
    assert!(!out.exists());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a tree id"));
}

/// The "Save state and files" step as orch exported it before it was
/// hardened, for a job whose files are `dist/*`, `logs` and `notes/*`.
const OLD_SAVE_FILES: &str = "for f in 'dist/'* 'logs' 'notes/'*; do if [ -e \"$f\" ]; then printf '%s\\n' \"$f\"; fi; done > \"$RUNNER_TEMP/orch-files\"\nif [ -s \"$RUNNER_TEMP/orch-files\" ]; then tar -cf \"$RUNNER_TEMP/orch-out/files.tar\" -T \"$RUNNER_TEMP/orch-files\"; fi\n";

/// The exported step that saves a job's files runs unconfined after the
/// agents, so it must follow no link they planted: `dist` a link to a
/// folder outside (the runner's `~/.ssh`), a link inside a folder saved
/// whole, a name GNU tar would unquote into `../..`, a name whose line
/// break makes a second name (`..`). Each planted alone; the old step archives
/// the secret outside the workspace (or a link, which the next job's
/// restore would make), the new one neither, and says what it left out.
/// The agent's own files are saved all the same.
#[test]
fn the_save_step_follows_no_link_an_agent_planted() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().canonicalize().unwrap();
    write(
        &t,
        "p.toml",
        "version = 1\nname = \"x\"\n[[phases]]\nname = \"build\"\nagents = [\"claude\"]\nmode = \"fix\"\n\
         prompt = \"Build it.\"\nartifacts = [\"dist/*\", \"logs\", \"notes/*\"]\n\
         [phases.tools]\npermission = \"workspace-write\"\n",
    );
    let o = run_in(
        &t,
        &[&["export", "github-actions", "p.toml"][..], &SOURCE].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let wf = yaml(&stdout(&o));
    let save = wf["jobs"]["build"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Save state and files"))
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_string();
    let old_save = format!("set -u\nmkdir -p \"$RUNNER_TEMP/orch-out\"\n{OLD_SAVE_FILES}");

    // The runner's secret, outside the workspace; orch a stand-in.
    let bin = t.join("bin");
    std::fs::create_dir_all(t.join("secret")).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(t.join("secret/key"), "RUNNER-SECRET\n").unwrap();
    let stub = bin.join("orch");
    std::fs::write(
        &stub,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

    // (what, bash in the workspace `ws` beside `secret`)
    let plants: &[(&str, &str)] = &[
        (
            "dist a link to a folder outside",
            r#"ln -s "$T/secret" dist"#,
        ),
        (
            "a link in a folder saved whole",
            r#"ln -s "$T/secret/key" logs/leak; ln -s "$T/secret" logs/sub"#,
        ),
        (
            "a name tar unquotes into ../..",
            r#"touch 'notes/\056\056\057\056\056\057secret\057key'"#,
        ),
        (
            // The second line, `..`, is the folder around the workspace.
            "a name with a line break",
            "touch 'notes/x\n..'",
        ),
    ];
    for (i, (what, plant)) in plants.iter().enumerate() {
        for old in [true, false] {
            let (ws, rt) = (
                t.join(format!("ws{i}-{old}")),
                t.join(format!("rt{i}-{old}")),
            );
            std::fs::create_dir_all(&rt).unwrap();
            let env = vec![
                ("RUNNER_TEMP", rt.clone()),
                ("T", t.clone()),
                ("HOME", t.join("home")),
                ("PATH", PathBuf::from(&path)),
            ];
            let setup = format!(
                "git init -q {ws} && cd {ws} && printf 'a\\n' > a.txt && git add a.txt && git commit -qm init && git write-tree > {rt}/orch-base\n\
                 mkdir logs notes && printf 'log\\n' > logs/ok.log && printf 'note\\n' > notes/good.md\n{plant}",
                ws = ws.display(),
                rt = rt.display()
            );
            let o = step_bash(&t, &setup, &env);
            assert!(
                o.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let o = step_bash(&ws, if old { &old_save } else { &save }, &env);
            // (The old step's tar also fails on the line break's first
            // half, after archiving the second.)
            assert!(
                old || o.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let tar = rt.join("orch-out/files.tar");
            let bytes = std::fs::read(&tar).unwrap();
            let listing = Command::new("tar").arg("-tvf").arg(&tar).output().unwrap();
            let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
            let unsafe_ = String::from_utf8_lossy(&bytes).contains("RUNNER-SECRET")
                || listing.lines().any(|l| l.starts_with('l'));
            if old {
                assert!(
                    unsafe_,
                    "{what}: the old step did not leak either, so this proves nothing: {listing}"
                );
                continue;
            }
            assert!(!unsafe_, "{what}: {listing}");
            let names = Command::new("tar").arg("-tf").arg(&tar).output().unwrap();
            let names = String::from_utf8_lossy(&names.stdout).into_owned();
            for saved in ["./logs/ok.log", "./notes/good.md"] {
                assert!(
                    names.lines().any(|l| l == saved),
                    "{what}: {saved} not saved: {names}"
                );
            }
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            if i < 2 {
                assert!(err.contains("orch: not saved: "), "{what}: {err}");
            }
        }
    }
}

/// The exported step that restores upstream work runs as the runner
/// before the agents, on patches and archives that hostile agents of
/// upstream jobs made: one job's patch makes `reports` a link to a folder
/// outside, a parallel job's `files.tar` holds a real `reports/x.md`
/// (without a `reports` folder member), and GNU tar writes it through the
/// link. Each case plants one such thing (the patch is made as a job
/// makes it, applied by the real step); the old step writes outside the
/// workspace, or leaves a link or a hard link to a file outside, or
/// writes in `.git`, where it says so (the others it already refused or
/// kept in the workspace); the new one fails the job naming the file and
/// writes none of it. An honest archive is restored as before.
#[test]
fn the_restore_step_writes_nothing_through_a_link() {
    let wf = yaml(&export("github-actions", "pipelines/demo.toml"));
    let restore = wf["jobs"]["count"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Restore upstream work"))
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_string();
    // The step as it was: `tar -xf` in the workspace.
    let (start, end) = (
        restore
            .find("  if [ -f \"$dir/files.tar\" ]; then\n")
            .unwrap(),
        restore.find("  orch --state-dir").unwrap(),
    );
    let old_restore = format!(
        "{}  if [ -f \"$dir/files.tar\" ]; then tar -xf \"$dir/files.tar\"; fi\n{}",
        &restore[..start],
        &restore[end..]
    );

    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().canonicalize().unwrap();
    let bin = t.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let stub = bin.join("orch");
    std::fs::write(&stub, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());

    // `link_patch NAME TARGET` writes the patch of a job that made NAME a
    // link (in the workspace `$W`, left as it was).
    const LINK_PATCH: &str = r#"link_patch() { mkdir -p "$(dirname "$1")" && ln -s "$2" "$1" && git add "$1" && git diff --cached --binary > "$P" && git rm -q --cached "$1" && rm "$1"; }"#;
    // (what, the patch (bash in `$W`), the archive (bash in an empty
    // folder, writes `$F`), the link the patch makes, the old step unsafe,
    // what the new step says)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        bool,
        &'static [&'static str],
    );
    let cases: &[Case] = &[
        (
            "a folder link and a file member without its folder",
            r#"link_patch reports "$O""#,
            r#"mkdir reports && echo EVIL > reports/x.md && tar -cf "$F" --no-recursion ./reports/x.md"#,
            "reports",
            true,
            &["./reports/x.md", "./reports is a link in the workspace"],
        ),
        (
            "the file itself a link",
            r#"link_patch reports/x.md "$O/x.md""#,
            r#"mkdir reports && echo EVIL > reports/x.md && tar -cf "$F" --no-recursion ./reports/x.md"#,
            "reports/x.md",
            false,
            &["./reports/x.md is a link in the workspace"],
        ),
        (
            "a member ../x",
            "",
            r#"mkdir d && echo EVIL > x && cd d && tar -cPf "$F" ../x"#,
            "",
            false,
            &["../x", "names a file outside the workspace"],
        ),
        (
            "an absolute member",
            "",
            r#"echo EVIL > abs && tar -cPf "$F" "$PWD/abs""#,
            "",
            false,
            &["/abs", "names a file outside the workspace"],
        ),
        (
            "a link member",
            "",
            r#"ln -s "$O" l && tar -cf "$F" ./l"#,
            "",
            true,
            &["./l -> ", "holds more than files and folders"],
        ),
        (
            "a hard link member to a name through a link",
            r#"link_patch reports "$O""#,
            r#"mkdir reports && echo x > reports/key && ln reports/key h && tar -cf "$F" ./reports/key ./h && tar --delete -f "$F" ./reports/key"#,
            "reports",
            true,
            &[
                "./h link to ./reports/key",
                "holds more than files and folders",
            ],
        ),
        (
            "a member in .git",
            "",
            r#"mkdir -p .git/hooks && echo EVIL > .git/hooks/x && tar -cf "$F" --no-recursion ./.git/hooks/x"#,
            "",
            true,
            &["./.git/hooks/x", "in the .git folder"],
        ),
    ];
    // What shows a write beyond the workspace: the folder outside not as
    // it was, a link the patch did not make, a hard link to the file
    // outside, a file in `.git`.
    const UNSAFE: &str = r#"[ "$(ls -A "$O")" = key ] || echo "outside: $(ls -A "$O")"
[ "$(cat "$O/key")" = SECRET ] || echo "outside: key changed"
find "$W" -path "$W/.git" -prune -o -type l ! -path "$W/$PL" -print
find "$W" -samefile "$O/key"
[ ! -e "$W/.git/hooks/x" ] || echo "in .git: hooks/x""#;
    let env = |i: usize, old: bool, pl: &str| -> Vec<(&str, PathBuf)> {
        let rt = t.join(format!("rt{i}-{old}"));
        vec![
            ("RUNNER_TEMP", rt.clone()),
            ("W", t.join(format!("ws{i}-{old}"))),
            ("O", t.join(format!("out{i}-{old}"))),
            ("S", t.join(format!("src{i}-{old}"))),
            ("P", rt.join("orch-in/prepare/changes.patch")),
            ("F", rt.join("orch-in/prepare/files.tar")),
            ("PL", PathBuf::from(pl)),
            ("HOME", t.join("home")),
            ("PATH", PathBuf::from(&path)),
        ]
    };
    let setup = |i: usize, old: bool, patch: &str, archive: &str, pl: &str| {
        let script = format!(
            "mkdir -p \"$O\" \"$S\" \"$RUNNER_TEMP/orch-in/prepare\" && echo SECRET > \"$O/key\" && : > \"$RUNNER_TEMP/orch-in/prepare/state.db\"\n\
             git init -q \"$W\" && cd \"$W\" && printf 'a\\n' > a.txt && git add a.txt && git commit -qm init\n\
             {LINK_PATCH}\n{patch}\ncd \"$S\" && {archive}\n"
        );
        let o = step_bash(&t, &script, &env(i, old, pl));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    for (i, (what, patch, archive, pl, old_unsafe, says)) in cases.iter().enumerate() {
        for old in [true, false] {
            setup(i, old, patch, archive, pl);
            let env = env(i, old, pl);
            let ws = t.join(format!("ws{i}-{old}"));
            let o = step_bash(&ws, if old { &old_restore } else { &restore }, &env);
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            let u = step_bash(&ws, UNSAFE, &env);
            let unsafe_ = String::from_utf8_lossy(&u.stdout).into_owned();
            if old {
                assert_eq!(
                    !unsafe_.is_empty(),
                    *old_unsafe,
                    "{what}: the old step: {unsafe_}{err}"
                );
                continue;
            }
            assert!(!o.status.success(), "{what}: the new step did not fail");
            assert!(unsafe_.is_empty(), "{what}: {unsafe_}{err}");
            for s in *says {
                assert!(err.contains(s), "{what}: {s:?} not said: {err}");
            }
            assert!(!ws.join("x.md").exists() && !ws.join("reports/x.md").is_file());
        }
    }

    // The honest archive: files and folders, an empty one, a name with a
    // line break, a file the checkout has, over the job's patch.
    let i = cases.len();
    setup(
        i,
        false,
        "echo b > b.txt && git add b.txt && git diff --cached --binary > \"$P\" && git rm -q --cached b.txt && rm b.txt",
        "mkdir -p dist/sub logs && echo 1 > dist/a.txt && echo 2 > dist/sub/b.txt && echo over > a.txt && echo 3 > \"$(printf 'dist/line\\nbreak')\" && \
         tar -cf \"$F\" --no-recursion ./dist ./dist/a.txt ./dist/sub ./dist/sub/b.txt \"$(printf './dist/line\\nbreak')\" ./logs ./a.txt",
        "",
    );
    let ws = t.join(format!("ws{i}-false"));
    let o = step_bash(&ws, &restore, &env(i, false, ""));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |p: &str| std::fs::read_to_string(ws.join(p)).unwrap();
    assert_eq!(read("dist/a.txt"), "1\n");
    assert_eq!(read("dist/sub/b.txt"), "2\n");
    assert_eq!(read("dist/line\nbreak"), "3\n");
    assert_eq!(read("a.txt"), "over\n");
    assert_eq!(read("b.txt"), "b\n");
    assert!(ws.join("logs").is_dir());
    let rt = t.join(format!("rt{i}-false"));
    assert!(
        std::fs::read_dir(&rt).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("orch-stage")),
        "the staging folder is left"
    );
}

/// `${NAME}` in an agent's `env` becomes a secret only when it stands for
/// a credential (its name, or the variable it is set in, says so). The
/// runner's variables (`PATH`, `HOME`, `GITHUB_*`, `CI_*`) and plain
/// settings are read from the job's environment: a `secrets.PATH` would
/// be empty and replace the runner's `PATH` in the run step.
#[test]
fn only_credentials_become_secrets() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.toml",
        r#"version = 1
name = "env"
[agents.a]
kind = "command"
command = ["true"]
env = { TOOLS = "${PATH}:/opt/bin", CACHE = "${HOME}/.cache/x", LOWER = "${path}", WS = "${GITHUB_WORKSPACE}", JOB = "${CI_JOB_ID}", RT = "${RUNNER_TEMP}", LEVEL = "${LOG_LEVEL}", KEY = "${MY_API_KEY}", UPSTREAM_API_KEY = "${UPSTREAM}", URL_TOKEN = "${HOME}/token" }
[[phases]]
name = "p"
agents = ["a"]
"#,
    );
    let secrets = ["MY_API_KEY", "UPSTREAM"];
    let from_env = [
        "CI_JOB_ID",
        "GITHUB_WORKSPACE",
        "HOME",
        "LOG_LEVEL",
        "PATH",
        "RUNNER_TEMP",
        "path",
    ];
    for target in ["github-actions", "gitlab-ci"] {
        let o = run_in(
            dir.path(),
            &[&["export", target, "p.toml"][..], &SOURCE].concat(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let y = stdout(&o);
        if target == "github-actions" {
            let wf = yaml(&y);
            let step = wf["jobs"]["p"]["steps"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|s| s.as_mapping_get("id").and_then(|v| v.as_str()) == Some("run"))
                .unwrap();
            let mut keys: Vec<&str> = step["env"]
                .as_mapping()
                .unwrap()
                .keys()
                .map(|k| k.as_str().unwrap())
                .collect();
            keys.sort();
            assert_eq!(keys, ["MY_API_KEY", "ORCH_PHASE", "UPSTREAM"], "{y}");
        }
        let (secret_part, env_part) = y
            .split_once("# Read from the job's own environment")
            .unwrap_or_else(|| panic!("{target}: no variables from the environment: {y}"));
        for n in secrets {
            assert!(
                secret_part.contains(&format!("#   {n}: p\n")),
                "{target} {n}: {y}"
            );
        }
        for n in from_env {
            assert!(
                !secret_part.contains(&format!("#   {n}:")),
                "{target}: {n} is not a secret: {y}"
            );
            assert!(
                env_part.contains(&format!("#   {n}: p\n")),
                "{target} {n}: {y}"
            );
        }
    }
}

/// Phase names that could take another's name in the export: the summary
/// job's and its artifact's (`summary`, `orch-summary`, ...), a phase's
/// artifact's (`orch-job-a`), and the keys GitLab reads at the top of a
/// pipeline (phase names are lowercase: none differ in case alone). Every artifact has its own name, the summary fetches exactly
/// the phases' artifacts, and GitLab's own keys keep their values.
#[test]
fn no_phase_name_takes_another_name_in_the_export() {
    let names = [
        "summary",
        "orch-summary",
        "orch_summary",
        "job-summary",
        "orch-job-summary",
        "job-a",
        "a",
        "orch-job-a",
        "1summary",
        "variables",
        "default",
        "workflow",
        "stages",
        "include",
        "image",
        "services",
        "cache",
        "before_script",
        "after_script",
        "pages",
        "types",
        "spec",
    ];
    let mut t = String::from(
        "version = 1\nname = \"names\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for (i, n) in names.iter().enumerate() {
        t.push_str(&format!("[[phases]]\nname = \"{n}\"\nagents = [\"a\"]\n"));
        if i > 0 {
            // Each fetches the one before: its artifact by name.
            t.push_str(&format!("depends_on = [\"{}\"]\n", names[i - 1]));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.toml", &t);
    let export_of = |target: &str| -> YamlOwned {
        let o = run_in(
            dir.path(),
            &[&["export", target, "p.toml"][..], &SOURCE].concat(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        yaml(&stdout(&o))
    };

    let wf = export_of("github-actions");
    let jobs = wf["jobs"].as_mapping().unwrap();
    assert_eq!(jobs.len(), names.len() + 1);
    let lower = |v: &[String]| -> Vec<String> {
        let mut l: Vec<String> = v.iter().map(|s| s.to_ascii_lowercase()).collect();
        l.sort();
        l.dedup();
        l
    };
    let ids: Vec<String> = jobs
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        lower(&ids).len(),
        ids.len(),
        "job ids differing only in case: {ids:?}"
    );
    let steps = |job: &YamlOwned| -> Vec<YamlOwned> { job["steps"].as_sequence().unwrap().clone() };
    let uses = |s: &YamlOwned, what: &str| {
        s.as_mapping_get("uses")
            .and_then(|u| u.as_str())
            .is_some_and(|u| u.starts_with(what))
    };
    let mut uploads: Vec<String> = Vec::new();
    let mut fetched: Vec<String> = Vec::new();
    let mut pattern = String::new();
    for (id, job) in jobs {
        for s in steps(job) {
            if uses(&s, "actions/upload-artifact") {
                uploads.push(s["with"]["name"].as_str().unwrap().to_string());
            }
            if uses(&s, "actions/download-artifact") {
                match s["with"].as_mapping_get("name").and_then(|n| n.as_str()) {
                    Some(n) => fetched.push(n.to_string()),
                    None => {
                        assert_eq!(id.as_str(), Some("orch-summary"));
                        pattern = s["with"]["pattern"].as_str().unwrap().to_string();
                    }
                }
            }
        }
    }
    assert_eq!(uploads.len(), names.len() + 1);
    assert_eq!(
        lower(&uploads).len(),
        uploads.len(),
        "two jobs upload artifacts of the same name: {uploads:?}"
    );
    for f in &fetched {
        assert!(uploads.contains(f), "{f} is fetched, never uploaded");
    }
    // The summary's pattern matches every phase's artifact, not its own.
    let prefix = pattern.strip_suffix('*').expect("a prefix pattern");
    assert!(!prefix.contains(['*', '?', '[']), "{pattern}");
    let matched: Vec<&String> = uploads.iter().filter(|u| u.starts_with(prefix)).collect();
    assert_eq!(matched.len(), names.len(), "{pattern}: {uploads:?}");
    assert!(!"orch-summary".starts_with(prefix));

    let gl = export_of("gitlab-ci");
    let root = gl.as_mapping().unwrap();
    assert_eq!(
        gl["variables"]["ORCH_RUN_ID"].as_str(),
        Some("gl-$CI_PIPELINE_ID"),
        "a job took the pipeline's variables"
    );
    assert_eq!(gl["default"]["image"].as_str(), Some("rust:1-bookworm"));
    assert_eq!(gl["workflow"]["name"].as_str(), Some("orch names"));
    let mut phases: Vec<&str> = root
        .values()
        .filter_map(|j| {
            j.as_mapping_get("variables")?
                .as_mapping_get("ORCH_PHASE")?
                .as_str()
        })
        .collect();
    phases.sort();
    let mut want = names.to_vec();
    want.sort();
    assert_eq!(phases, want, "a phase's job is missing or replaced");
    for reserved in [
        "variables",
        "default",
        "workflow",
        "stages",
        "include",
        "image",
        "services",
        "cache",
        "before_script",
        "after_script",
        "pages",
        "types",
        "spec",
    ] {
        assert!(
            gl.as_mapping_get(reserved)
                .and_then(|j| j.as_mapping_get("script"))
                .is_none(),
            "{reserved} is a job: {gl:?}"
        );
    }
    let ids: Vec<String> = root
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    assert_eq!(lower(&ids).len(), ids.len(), "{ids:?}");
}

/// The pipeline's path is written in the exported file's header comment.
/// A line break in it (or another control character, or a line separator
/// a YAML reader may honour) would end the comment and have the rest of
/// the name read as YAML: such a path is refused. Other characters are
/// quoted in the header's command, which runs as written.
#[test]
fn a_pipeline_path_that_would_break_the_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let body = dag_pipeline(&[vec![]]);
    for name in [
        "a\nb.toml",
        "x\njobs:\n  evil: {}\n#.toml",
        "a\rb.toml",
        "a\tb.toml",
        "a\u{1b}b.toml",
        "a\u{85}b.toml",
        "a\u{2028}b.toml",
        "a\u{2029}b.toml",
    ] {
        write(dir.path(), name, &body);
        for target in ["github-actions", "gitlab-ci"] {
            let o = run_in(
                dir.path(),
                &[&["export", target, name][..], &SOURCE].concat(),
            );
            assert_eq!(o.status.code(), Some(2), "{name:?}: {}", stdout(&o));
            assert!(stdout(&o).is_empty(), "{name:?}");
            assert!(
                flat_stderr(&o).contains("has a control character or line break in its name"),
                "{name:?}: {}",
                stderr(&o)
            );
        }
    }
    // Spaces and quotes are quoted: the header's --check line runs as is.
    let name = "my pipeline's.toml";
    write(dir.path(), name, &body);
    let o = run_in(
        dir.path(),
        &[
            &["export", "github-actions", name, "-o", "wf.yml"][..],
            &SOURCE,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let wf = std::fs::read_to_string(dir.path().join("wf.yml")).unwrap();
    assert!(wf.starts_with("# Generated by `orch export github-actions 'my pipeline'\\''s.toml' "));
    let cmd = wf
        .lines()
        .nth(1)
        .and_then(|l| l.split('`').nth(1))
        .unwrap()
        .replace("<this file>", "wf.yml");
    let bin = Path::new(env!("CARGO_BIN_EXE_orch")).parent().unwrap();
    let o = Command::new("bash")
        .args(["-c", &cmd])
        .current_dir(dir.path())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("XDG_CONFIG_HOME", root().join("tests/fixtures/no-config"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{cmd}: {}", stderr(&o));
}

/// GitHub evaluates `${{ ... }}` anywhere in a workflow's `run:` scripts
/// and `env:` values, quotes or not. A pipeline path with one is refused;
/// an artifact path with one reaches the job's save script as text the
/// shell reads back as written, never as an expression (it would have
/// been replaced by the secret it names).
#[test]
fn no_path_of_the_pipeline_becomes_a_github_expression() {
    let dir = tempfile::tempdir().unwrap();
    let name = "a${{ secrets.GITHUB_TOKEN }}.toml";
    write(dir.path(), name, &dag_pipeline(&[vec![]]));
    let o = run_in(
        dir.path(),
        &[&["export", "github-actions", name][..], &SOURCE].concat(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        flat_stderr(&o).contains("which GitHub would evaluate as an expression"),
        "{}",
        stderr(&o)
    );

    let artifact = "out/${{ secrets.GITHUB_TOKEN }}.md";
    let body = format!(
        "version = 1\nname = \"x\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"p\"\nagents = [\"a\"]\nartifacts = [\"{artifact}\"]\n"
    );
    write(dir.path(), "p.toml", &body);
    let o = run_in(
        dir.path(),
        &[&["export", "github-actions", "p.toml"][..], &SOURCE].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(!text.contains("${{ secrets.GITHUB_TOKEN"), "{text}");
    let wf = yaml(&text);
    let save = wf["jobs"]["p"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Save state and files"))
        .and_then(|s| s["run"].as_str())
        .unwrap()
        .to_string();
    let word = save
        .lines()
        .find_map(|l| l.strip_prefix("for f in "))
        .and_then(|l| l.strip_suffix("; do"))
        .unwrap()
        .to_string();
    let o = Command::new("sh")
        .args(["-c", &format!("printf %s {word}")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), artifact, "{word}");
}

/// A GitLab job's agents may write the project, where GitLab keeps
/// artifacts: the upstream work a job restores is moved out of the project
/// before its agents run, and passed on as it arrived, whatever they wrote
/// in `.orch-ci` (a forged upstream state, a link to elsewhere).
#[test]
fn a_gitlab_job_keeps_upstream_work_out_of_its_agents_reach() {
    let wf = yaml(&export("gitlab-ci", "pipelines/demo.toml"));
    let part = |key: &str| wf["count"][key][0].as_str().unwrap().to_string();
    let (before, script, after) = (part("before_script"), part("script"), part("after_script"));
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().canonicalize().unwrap();
    let (project, bin, elsewhere, tmpdir) = (
        t.join("project"),
        t.join("bin"),
        t.join("elsewhere"),
        t.join("tmp"),
    );
    for d in [&project, &bin, &elsewhere, &tmpdir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .current_dir(&project)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(project.join("README.md"), "hi\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "c"]);
    // The upstream job's artifacts, as GitLab hands them over.
    let up = project.join(".orch-ci/out/prepare");
    std::fs::create_dir_all(&up).unwrap();
    std::fs::write(up.join("state.db"), "UPSTREAM-STATE").unwrap();
    // orch and cargo stand-ins: `run` is the agents at work, writing the
    // project; state import and export are logged and written.
    let orch = format!(
        "#!/bin/sh\nlog={log}\ncase \" $* \" in\n\
         *' run '*) mkdir -p \"$CI_PROJECT_DIR/.orch-ci/out/prepare\"; echo FORGED > \"$CI_PROJECT_DIR/.orch-ci/out/prepare/state.db\"; \
         ln -s {elsewhere} \"$CI_PROJECT_DIR/.orch-ci/out/count\" ;;\n\
         *' state import '*) for a; do f=$a; done; printf '%s %s\\n' \"$f\" \"$(cat \"$f\")\" >> $log ;;\n\
         *' state export '*) while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then echo COUNT-STATE > \"$2\"; fi; shift; done ;;\n\
         esac\n",
        log = t.join("imported.log").display(),
        elsewhere = elsewhere.display()
    );
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in [("orch", orch.as_str()), ("cargo", "#!/bin/sh\n")] {
        std::fs::write(bin.join(name), text).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let bash = |text: &str| {
        let out = std::process::Command::new("bash")
            .args(["-c", text])
            .current_dir(&project)
            .env("PATH", &path)
            .env("CI_PROJECT_DIR", &project)
            .env("CI_JOB_ID", "7")
            .env("TMPDIR", &tmpdir)
            .env("ORCH_PIPELINE", "pipelines/demo.toml")
            .env("ORCH_PHASE", "count")
            .env("ORCH_RUN_ID", "gl-1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
    };
    bash(&format!("{before}\n{script}"));
    bash(&after);
    // What the job imported came from outside the project, as it arrived.
    let log = std::fs::read_to_string(t.join("imported.log")).unwrap();
    assert_eq!(
        log,
        format!(
            "{}/orch-ci-7/inbox/prepare/state.db UPSTREAM-STATE\n",
            tmpdir.display()
        )
    );
    // What it passes on is the upstream work as it arrived, and its own.
    let read = |p: &str| std::fs::read_to_string(project.join(p)).unwrap();
    assert_eq!(read(".orch-ci/out/prepare/state.db"), "UPSTREAM-STATE");
    assert_eq!(read(".orch-ci/out/count/state.db"), "COUNT-STATE\n");
    assert!(
        !std::fs::symlink_metadata(project.join(".orch-ci/out/count"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
