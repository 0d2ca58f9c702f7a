//! The job graph as a GitLab CI pipeline: the same jobs, `needs` from
//! `depends_on`, `timeout`, `allow_failure` for optional phases, and each
//! job's state and files as its artifacts (`when: always`). GitLab hands a
//! job the artifacts of the jobs it needs, so each job passes on what it
//! restored from upstream beside its own: every ancestor's work reaches
//! every descendant through direct `needs` alone.

use super::steps::{Value, boolean, header, map, restore_script, s, save_script, seq, to_yaml};
use super::{Job, Options, SUMMARY_JOB};

/// Where a job keeps its own files: outside the project (GitLab keeps
/// artifacts only from inside it, where the agents may write), one folder
/// per job, set again in `after_script`, which runs in a shell of its own.
const RUNNER_TEMP: &str = "export RUNNER_TEMP=\"${TMPDIR:-/tmp}/orch-ci-$CI_JOB_ID\"\n";

/// Before any agent: the upstream artifacts move out of the project (an
/// agent that may write the workspace must not change what later jobs
/// import), and nothing of `.orch-ci` stays for the agents.
const TAKE_INBOX: &str = "rm -rf \"$RUNNER_TEMP/inbox\"\nif [ -d \"$CI_PROJECT_DIR/.orch-ci/out\" ]; then mv \"$CI_PROJECT_DIR/.orch-ci/out\" \"$RUNNER_TEMP/inbox\"; fi\nrm -rf \"$CI_PROJECT_DIR/.orch-ci\"\n";

/// After the agents (whatever they left in the project): `.orch-ci` made
/// anew, with the upstream artifacts as they arrived, passed on.
const PUT_BACK: &str = "rm -rf \"$CI_PROJECT_DIR/.orch-ci\"\nmkdir -p \"$CI_PROJECT_DIR/.orch-ci/out\"\nif [ -d \"$RUNNER_TEMP/inbox\" ]; then cp -R \"$RUNNER_TEMP/inbox/.\" \"$CI_PROJECT_DIR/.orch-ci/out/\"; fi\n";

fn lines(script: &str) -> Value {
    seq(vec![s(script)])
}

/// The setup every job runs: orch, and Node.js for agent CLIs.
fn before(opts: &Options, clis: &[String]) -> Value {
    // orch's own files (its state, the tree a phase starts from, the
    // upstream work it restores) stay outside the project, out of the
    // agents' reach; `.orch-ci` in the project only carries artifacts in
    // and out, and stays out of the changes a phase carries on.
    let mut script = format!(
        "set -eu\n{RUNNER_TEMP}mkdir -p \"$RUNNER_TEMP\"\necho '/.orch-ci/' >> .git/info/exclude\n"
    );
    script.push_str(&opts.orch.install_command());
    script.push('\n');
    if !clis.is_empty() {
        script.push_str("apt-get update -qq && apt-get install -y -qq nodejs npm\n");
        script.push_str(&format!("# {}\n", clis.join(", ")));
        script.push_str(&super::install_clis_script("$RUNNER_TEMP/agent-clis"));
        script.push_str("export PATH=\"$RUNNER_TEMP/agent-clis/node_modules/.bin:$PATH\"\n");
    }
    lines(&script)
}

pub(crate) fn render(opts: &Options, jobs: &[Job], name: &str) -> String {
    let mut root = vec![
        ("workflow", map(vec![("name", s(&format!("orch {name}")))])),
        (
            "variables",
            map(vec![
                ("ORCH_RUN_ID", s("gl-$CI_PIPELINE_ID")),
                ("ORCH_PIPELINE", s(&opts.file)),
            ]),
        ),
        ("default", map(vec![("image", s("rust:1-bookworm"))])),
    ];
    for job in jobs {
        // What the job makes lands in .orch-ci inside the project: GitLab
        // only keeps artifacts from there.
        let out = format!("$CI_PROJECT_DIR/.orch-ci/out/{}", job.id);
        // Upstream work arrives as artifacts under .orch-ci/out/<job>, and
        // is read from outside the project.
        let mut script = String::from(TAKE_INBOX);
        script.push_str(&restore_script(job, "$RUNNER_TEMP/inbox"));
        script.push_str(
            "orch --state-dir \"$RUNNER_TEMP/orch-state\" run \"$ORCH_PIPELINE\" --phase \"$ORCH_PHASE\" --run-id \"$ORCH_RUN_ID\" --junit \"$RUNNER_TEMP/junit.xml\"\n",
        );
        let mut entries = vec![("stage", s("test"))];
        entries.push(("needs", seq(job.needs.iter().map(|n| s(n)))));
        if let Some(t) = job.timeout_minutes {
            entries.push(("timeout", s(&format!("{t} minutes"))));
        }
        if job.optional {
            entries.push(("allow_failure", boolean(true)));
        }
        entries.push(("variables", map(vec![("ORCH_PHASE", s(&job.phase))])));
        entries.push(("before_script", before(opts, &job.clis)));
        entries.push(("script", lines(&script)));
        entries.push((
            "after_script",
            lines(&format!(
                "{RUNNER_TEMP}{PUT_BACK}{}if [ -f \"$RUNNER_TEMP/junit.xml\" ]; then cp \"$RUNNER_TEMP/junit.xml\" \"$CI_PROJECT_DIR/.orch-ci/junit.xml\"; fi\n",
                save_script(job, &out)
            )),
        ));
        entries.push((
            "artifacts",
            map(vec![
                ("when", s("always")),
                ("expire_in", s("1 week")),
                ("paths", seq(vec![s(".orch-ci/out/")])),
                ("reports", map(vec![("junit", s(".orch-ci/junit.xml"))])),
            ]),
        ));
        root.push((&job.id, map(entries)));
    }
    let summary_script = "set -eu\norch --state-dir \"$RUNNER_TEMP/orch-state\" state import --pipeline \"$ORCH_PIPELINE\" \"$CI_PROJECT_DIR\"/.orch-ci/out/*/state.db\norch --state-dir \"$RUNNER_TEMP/orch-state\" runs show \"$ORCH_RUN_ID\" --junit \"$CI_PROJECT_DIR/.orch-ci/summary-junit.xml\" --markdown\norch --state-dir \"$RUNNER_TEMP/orch-state\" state export --run \"$ORCH_RUN_ID\" -o \"$CI_PROJECT_DIR/.orch-ci/state.db\"\norch --state-dir \"$RUNNER_TEMP/orch-state\" runs show \"$ORCH_RUN_ID\" --exit-status > /dev/null\n";
    root.push((
        SUMMARY_JOB,
        map(vec![
            ("stage", s("test")),
            (
                "needs",
                seq(jobs
                    .iter()
                    .map(|j| map(vec![("job", s(&j.id)), ("artifacts", boolean(true))]))),
            ),
            ("when", s("always")),
            ("timeout", s("30 minutes")),
            ("before_script", before(opts, &[])),
            ("script", lines(summary_script)),
            (
                "artifacts",
                map(vec![
                    ("when", s("always")),
                    ("paths", seq(vec![s(".orch-ci/state.db")])),
                    (
                        "reports",
                        map(vec![("junit", s(".orch-ci/summary-junit.xml"))]),
                    ),
                ]),
            ),
        ]),
    ));
    let yaml = to_yaml(&map(root));
    format!(
        "{}\n{yaml}",
        header(
            opts,
            jobs,
            "gitlab-ci",
            "Settings > CI/CD > Variables, masked and protected; GitLab gives every variable to every job"
        )
    )
}
