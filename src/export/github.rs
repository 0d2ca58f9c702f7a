//! The job graph as a GitHub Actions workflow.
//!
//! Security choices (checked by zizmor in the tests): every action pinned
//! to a full commit SHA with its version in a comment; `permissions: {}` at
//! the top and `contents: read` per job (no job pushes: a writing phase's
//! changes travel as a patch in its artifact); checkout keeps no
//! credentials; no `${{ }}` inside a script (values reach scripts through
//! `env`); each secret only in the step of the jobs whose agents read it.

use super::steps::{
    Value, boolean, empty, header, map, number, restore_script, s, save_script, seq, to_yaml,
};
use super::{ARTIFACT_PREFIX, Job, Options, SUMMARY_JOB};

/// Pinned actions: (name, full commit SHA, version).
const CHECKOUT: (&str, &str, &str) = (
    "actions/checkout",
    "11bd71901bbe5b1630ceea73d27597364c9af683",
    "v4.2.2",
);
const UPLOAD: (&str, &str, &str) = (
    "actions/upload-artifact",
    "ea165f8d65b6e75b540449e92b4886f43607fa02",
    "v4.6.2",
);
const DOWNLOAD: (&str, &str, &str) = (
    "actions/download-artifact",
    "d3f86a106a0bac45b974a628896c90dbdf5c8093",
    "v4.3.0",
);
const PINS: &[(&str, &str, &str)] = &[CHECKOUT, UPLOAD, DOWNLOAD];

/// What starts the workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum Trigger {
    WorkflowDispatch,
    PullRequest,
    Push,
}

fn uses(pin: (&str, &str, &str)) -> Value {
    s(&format!("{}@{}", pin.0, pin.1))
}

/// The workflow as YAML.
pub(crate) fn render(opts: &Options, jobs: &[Job], name: &str, on: &[Trigger]) -> String {
    let triggers = map(on.iter().map(|&t| (t.into(), empty())));
    let all = map(jobs
        .iter()
        .map(|job| (job.id.as_str(), phase_job(opts, job)))
        .chain([(SUMMARY_JOB, summary_job(opts, jobs))]));
    let workflow = map(vec![
        ("name", s(&format!("orch {name}"))),
        ("on", triggers),
        ("permissions", empty()),
        (
            // One run of the workflow per ref at a time; none is cancelled
            // (an agent stopped halfway leaves half its work).
            "concurrency",
            map(vec![
                ("group", s("orch-${{ github.workflow }}-${{ github.ref }}")),
                ("cancel-in-progress", boolean(false)),
            ]),
        ),
        (
            "env",
            map(vec![
                // One run for every job of the workflow.
                ("ORCH_RUN_ID", s("gh-${{ github.run_id }}")),
                ("ORCH_PIPELINE", s(&opts.file)),
            ]),
        ),
        ("jobs", all),
    ]);
    let yaml = to_yaml(&workflow);
    // Each pinned action gets its version beside it.
    let body: String = yaml
        .lines()
        .map(|l| {
            match PINS
                .iter()
                .find(|(n, sha, _)| l.trim_end().ends_with(&format!("uses: {n}@{sha}")))
            {
                Some((_, _, v)) => format!("{l} # {v}\n"),
                None => format!("{l}\n"),
            }
        })
        .collect();
    format!(
        "{}\n{body}",
        header(
            opts,
            jobs,
            "github-actions",
            "Settings > Secrets and variables > Actions; each is passed only to the jobs listed"
        )
    )
}

fn checkout() -> Value {
    map(vec![
        ("name", s("Check out")),
        ("uses", uses(CHECKOUT)),
        ("with", map(vec![("persist-credentials", boolean(false))])),
    ])
}

fn install(opts: &Options, clis: &[String]) -> Vec<Value> {
    let mut steps = vec![map(vec![
        ("name", s("Install orch")),
        ("run", s(&opts.orch.install_command())),
    ])];
    if !clis.is_empty() {
        let mut script = super::install_clis_script("$RUNNER_TEMP/agent-clis");
        script.push_str("echo \"$RUNNER_TEMP/agent-clis/node_modules/.bin\" >> \"$GITHUB_PATH\"\n");
        steps.push(map(vec![
            (
                "name",
                s(&format!(
                    "Install the agent CLIs from orch's lock ({})",
                    clis.join(", ")
                )),
            ),
            ("run", s(&script)),
        ]));
    }
    steps
}

fn phase_job(opts: &Options, job: &Job) -> Value {
    let mut steps = vec![checkout()];
    steps.extend(install(opts, &job.clis));
    for up in &job.upstream {
        steps.push(map(vec![
            ("name", s(&format!("Fetch the state of {up}"))),
            ("uses", uses(DOWNLOAD)),
            (
                "with",
                map(vec![
                    ("name", s(&format!("{ARTIFACT_PREFIX}{up}"))),
                    ("path", s(&format!("${{{{ runner.temp }}}}/orch-in/{up}"))),
                ]),
            ),
        ]));
    }
    steps.push(map(vec![
        ("name", s("Restore upstream work")),
        ("run", s(&restore_script(job, "$RUNNER_TEMP/orch-in"))),
    ]));
    let mut env = vec![("ORCH_PHASE", s(&job.phase))];
    let secret_values: Vec<(String, String)> = job
        .secrets
        .iter()
        .map(|n| (n.clone(), format!("${{{{ secrets.{n} }}}}")))
        .collect();
    for (n, v) in &secret_values {
        env.push((n.as_str(), s(v)));
    }
    steps.push(map(vec![
        ("name", s(&format!("orch run --phase {}", job.phase))),
        ("id", s("run")),
        ("env", map(env)),
        (
            "run",
            s("orch --state-dir \"$RUNNER_TEMP/orch-state\" run \"$ORCH_PIPELINE\" --phase \"$ORCH_PHASE\" --run-id \"$ORCH_RUN_ID\" --junit \"$RUNNER_TEMP/orch-out/junit.xml\""),
        ),
    ]));
    steps.push(map(vec![
        ("name", s("Save state and files")),
        ("if", s("always()")),
        ("run", s(&save_script(job, "$RUNNER_TEMP/orch-out"))),
    ]));
    steps.push(map(vec![
        ("name", s("Upload state and files")),
        ("if", s("always()")),
        ("uses", uses(UPLOAD)),
        (
            "with",
            map(vec![
                ("name", s(&format!("{ARTIFACT_PREFIX}{}", job.id))),
                ("path", s("${{ runner.temp }}/orch-out/")),
                ("if-no-files-found", s("error")),
            ]),
        ),
    ]));
    let mut entries = vec![("name", s(&job.phase))];
    if !job.needs.is_empty() {
        entries.push(("needs", seq(job.needs.iter().map(|n| s(n)))));
    }
    entries.push(("runs-on", s("ubuntu-latest")));
    entries.push(("permissions", map(vec![("contents", s("read"))])));
    if let Some(t) = job.timeout_minutes {
        entries.push(("timeout-minutes", number(t)));
    }
    if job.optional {
        // Its failure lets the jobs after it run, as in `orch run`; the
        // real outcome is its `outcome` output.
        entries.push(("continue-on-error", boolean(true)));
    }
    entries.push((
        "outputs",
        map(vec![("outcome", s("${{ steps.run.outputs.outcome }}"))]),
    ));
    entries.push(("steps", seq(steps)));
    map(entries)
}

fn summary_job(opts: &Options, jobs: &[Job]) -> Value {
    let mut steps = vec![checkout()];
    steps.extend(install(opts, &[]));
    steps.push(map(vec![
        ("name", s("Fetch every phase's state")),
        ("uses", uses(DOWNLOAD)),
        (
            "with",
            map(vec![
                ("pattern", s(&format!("{ARTIFACT_PREFIX}*"))),
                ("path", s("${{ runner.temp }}/orch-in")),
            ]),
        ),
    ]));
    steps.push(map(vec![
        ("name", s("Merge the run and write the summary")),
        (
            "run",
            s("set -eu\norch --state-dir \"$RUNNER_TEMP/orch-state\" state import --pipeline \"$ORCH_PIPELINE\" \"$RUNNER_TEMP\"/orch-in/*/state.db\nmkdir -p \"$RUNNER_TEMP/orch-out\"\norch --state-dir \"$RUNNER_TEMP/orch-state\" runs show \"$ORCH_RUN_ID\" --junit \"$RUNNER_TEMP/orch-out/junit.xml\" --markdown >> \"$GITHUB_STEP_SUMMARY\"\norch --state-dir \"$RUNNER_TEMP/orch-state\" state export --run \"$ORCH_RUN_ID\" -o \"$RUNNER_TEMP/orch-out/state.db\""),
        ),
    ]));
    steps.push(map(vec![
        ("name", s("Upload the merged run")),
        ("if", s("always()")),
        ("uses", uses(UPLOAD)),
        (
            "with",
            map(vec![
                ("name", s(SUMMARY_JOB)),
                ("path", s("${{ runner.temp }}/orch-out/")),
            ]),
        ),
    ]));
    // The run fails when a required phase did not succeed, read from each
    // job's own outcome (an optional job's conclusion is always success).
    let mut env: Vec<(String, String)> = Vec::new();
    let mut checks = String::from("set -eu\nfailed=0\n");
    for (n, j) in jobs.iter().enumerate() {
        // Numbered: `a-b` and `a_b` would otherwise share one variable,
        // and one phase's success could hide the other's failure.
        let var = format!("OUTCOME_{n}_{}", j.id.to_uppercase().replace('-', "_"));
        env.push((
            var.clone(),
            format!("${{{{ needs.{}.outputs.outcome }}}}", j.id),
        ));
        if !j.optional {
            checks.push_str(&format!(
                "if [ \"${var}\" != succeeded ]; then echo \"required phase {}: ${{{var}:-did not run}}\"; failed=1; fi\n",
                j.phase.replace(['"', '$', '`', '\\'], "_")
            ));
        }
    }
    checks.push_str("exit \"$failed\"\n");
    steps.push(map(vec![
        ("name", s("Fail if a required phase did not succeed")),
        ("env", map(env.iter().map(|(k, v)| (k.as_str(), s(v))))),
        ("run", s(&checks)),
    ]));
    map(vec![
        ("name", s("summary")),
        ("needs", seq(jobs.iter().map(|j| s(&j.id)))),
        ("if", s("always()")),
        ("runs-on", s("ubuntu-latest")),
        ("permissions", map(vec![("contents", s("read"))])),
        ("timeout-minutes", number(30)),
        ("steps", seq(steps)),
    ])
}
