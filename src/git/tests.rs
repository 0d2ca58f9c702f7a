//! Every way a workspace's git configuration can make git start a program,
//! planted in a real repository: orch's calls start none of them, while
//! plain git, called as orch called it before, starts each one (so the
//! planting works and the test can fail). On normal repositories the
//! answers are plain git's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::Git;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    /// The repository (the workspace).
    ws: PathBuf,
    /// Where a planted program leaves its marker: outside the repository.
    marks: PathBuf,
    /// Variables every git here gets: a home and a system config of the
    /// test's own, so the machine's stay out.
    env: Vec<(OsString, OsString)>,
}

const INIT: &str = "git init -q -b main . \
    && printf 'one\\n' > a.txt && printf 'two\\n' > b.txt \
    && mkdir sub && printf 'three\\n' > sub/c.txt \
    && git add -A && git commit -qm init \
    && printf 'more\\n' >> a.txt && printf 'new\\n' > new.txt";

impl Fixture {
    /// An empty folder for a repository, nothing run yet.
    fn empty() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let marks = root.join("marks");
        let home = root.join("home");
        for d in [&ws, &marks, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let system = root.join("system.gitconfig");
        std::fs::write(&system, "").unwrap();
        let env = vec![
            ("HOME".into(), home.clone().into()),
            ("XDG_CONFIG_HOME".into(), home.join(".config").into()),
            ("GIT_CONFIG_SYSTEM".into(), system.into()),
            ("GIT_CEILING_DIRECTORIES".into(), root.clone().into()),
        ];
        Fixture {
            _tmp: tmp,
            root,
            ws,
            marks,
            env,
        }
    }

    /// A repository with a commit, a changed file (`a.txt`) and an
    /// untracked one (`new.txt`).
    fn new() -> Fixture {
        let f = Fixture::empty();
        f.sh(INIT);
        f
    }

    fn bash(&self, script: &str) -> std::process::Output {
        Command::new("bash")
            .arg("-ec")
            .arg(script)
            .current_dir(&self.ws)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("M", &self.marks)
            .env("H", self.root.join("home"))
            .env("ROOT", &self.root)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs bash `script` in the repository (`$M` the markers' folder, `$H`
    /// the home, `$ROOT` the folder around them all); it must succeed.
    fn sh(&self, script: &str) {
        let o = self.bash(script);
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn git_in<'a>(&'a self, ws: &'a Path) -> Git<'a> {
        let mut git = Git::new(ws);
        git.env = self.env.clone();
        git
    }

    fn marks(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.marks)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// `git ARGS` as orch ran it before its calls were hardened.
    fn old(&self, ws: &Path, args: &[&str]) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(ws)
            .args(args)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What orch's four functions answered before (head, branch, diff,
    /// files changed since head), each as it ran git.
    fn old_answers(&self, ws: &Path) -> Answers {
        let head = self
            .old(ws, &["rev-parse", "--verify", "--quiet", "HEAD"])
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        let branch = self
            .old(ws, &["symbolic-ref", "--quiet", "--short", "HEAD"])
            .map(|b| b.trim().to_string())
            .filter(|b| !b.is_empty());
        let diff = self.old(ws, &["diff", "HEAD", "--no-color", "--no-ext-diff"]);
        let changed = head.as_deref().and_then(|h| {
            let d = self.old(ws, &["diff", "--name-only", "--no-renames", h, "--"])?;
            let n = self.old(ws, &["ls-files", "--others", "--exclude-standard"])?;
            let mut files: Vec<String> = d
                .lines()
                .chain(n.lines())
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            files.sort();
            files.dedup();
            Some(files)
        });
        Answers {
            head,
            branch,
            diff,
            changed,
            refused: None,
        }
    }

    fn answers(&self, ws: &Path) -> Answers {
        let g = self.git_in(ws);
        let head = g.commit("HEAD");
        Answers {
            branch: g.branch(),
            diff: g.diff(),
            changed: head.as_deref().and_then(|h| g.changed_since(h)),
            head,
            refused: g.refusal(),
        }
    }
}

#[derive(Debug, PartialEq)]
struct Answers {
    head: Option<String>,
    branch: Option<String>,
    diff: Option<String>,
    changed: Option<Vec<String>>,
    /// Why orch does not read the repository (plain git never says).
    refused: Option<String>,
}

/// How plain git is shown to run a planted program.
enum Control {
    /// orch's calls as they were.
    Old,
    /// Another plain git command (the old calls did not reach this one).
    Shell(&'static str),
    /// No plain git call of the kind orch makes can start it (why).
    Unreachable(&'static str),
}

/// (what, bash that plants it in the repository, the control).
const VECTORS: &[(&str, &str, Control)] = &[
    (
        "core.fsmonitor",
        r#"git config core.fsmonitor "touch $M/fsmonitor; :""#,
        Control::Old,
    ),
    (
        "a clean filter named in .gitattributes",
        r#"git config filter.f.clean "touch $M/clean; cat"; echo 'a.txt filter=f' > .gitattributes"#,
        Control::Old,
    ),
    (
        // git smudges the committed side before a textconv reads it.
        "a smudge filter",
        r#"git config filter.f.smudge "touch $M/smudge; cat"; git config diff.t.textconv cat; echo 'a.txt filter=f diff=t' > .gitattributes"#,
        Control::Old,
    ),
    (
        "a process filter named in .git/info/attributes",
        r#"git config filter.p.process "touch $M/process; exit 1"; mkdir -p .git/info; echo 'a.txt filter=p' >> .git/info/attributes"#,
        Control::Old,
    ),
    (
        "a textconv",
        r#"git config diff.t.textconv "touch $M/textconv; cat"; echo 'a.txt diff=t' > .gitattributes"#,
        Control::Old,
    ),
    (
        "a diff driver's command",
        r#"git config diff.t.command "touch $M/diff-command; :"; echo 'a.txt diff=t' > .gitattributes"#,
        Control::Shell("git diff HEAD"),
    ),
    (
        "diff.external",
        r#"git config diff.external "touch $M/diff-external; :""#,
        Control::Shell("git diff HEAD"),
    ),
    (
        "an included config file",
        r#"printf '[core]\n\tfsmonitor = "touch %s/include; :"\n' "$M" > inc.cfg; git config include.path ../inc.cfg"#,
        Control::Old,
    ),
    (
        "an includeIf'd config file",
        r#"printf '[filter "i"]\n\tclean = "touch %s/include-if; cat"\n' "$M" > incif.cfg; git config 'includeIf.gitdir:/.path' "$PWD/incif.cfg"; echo 'a.txt filter=i' > .gitattributes"#,
        Control::Old,
    ),
    (
        "the worktree's own config (config.worktree)",
        r#"git config core.repositoryformatversion 1; git config extensions.worktreeConfig true; git config --worktree filter.w.clean "touch $M/worktree-config; cat"; echo 'a.txt filter=w' > .gitattributes"#,
        Control::Old,
    ),
    (
        "core.attributesFile naming a filter",
        r#"mkdir -p .x; echo 'a.txt filter=af' > .x/attrs; git config core.attributesFile "$PWD/.x/attrs"; git config filter.af.clean "touch $M/attributes-file; cat""#,
        Control::Old,
    ),
    (
        "hooks in .git/hooks",
        r#"for h in post-index-change reference-transaction pre-auto-gc; do printf '#!/bin/sh\ntouch "%s/hook-%s"\n' "$M" "$h" > ".git/hooks/$h"; chmod +x ".git/hooks/$h"; done"#,
        Control::Shell("git add a.txt"),
    ),
    (
        "core.hooksPath",
        r#"mkdir -p .hooks; printf '#!/bin/sh\ntouch "%s/hooks-path"\n' "$M" > .hooks/post-index-change; chmod +x .hooks/post-index-change; git config core.hooksPath "$PWD/.hooks""#,
        Control::Shell("git add a.txt"),
    ),
    (
        "a pager",
        r#"git config core.pager "touch $M/pager; cat"; git config pager.diff "touch $M/pager-diff; cat"; git config pager.symbolic-ref "touch $M/pager-symref; cat""#,
        Control::Unreachable("git starts a pager only on a terminal; orch reads git's output"),
    ),
    (
        "a merge driver",
        r#"git config merge.m.driver "touch $M/merge; false"; echo 'a.txt merge=m' > .gitattributes"#,
        Control::Unreachable("it runs only in a merge, which orch never starts"),
    ),
    (
        "a dirty submodule's own config",
        r#"git -C "$ROOT" init -q -b main subsrc; printf 'f\n' > "$ROOT/subsrc/f"; git -C "$ROOT/subsrc" add f; git -C "$ROOT/subsrc" commit -qm f
           git -c protocol.file.allow=always submodule add -q "$ROOT/subsrc" sm; git commit -qm sm
           printf 'dirty\n' >> sm/f; git -C sm config core.fsmonitor "touch $M/submodule; :""#,
        Control::Old,
    ),
    (
        "the user's ~/.gitconfig",
        r#"printf '[core]\n\tfsmonitor = "touch %s/global; :"\n' "$M" > "$H/.gitconfig""#,
        Control::Old,
    ),
    (
        "the user's ~/.config/git/config",
        r#"mkdir -p "$H/.config/git"; printf '[filter "g"]\n\tclean = "touch %s/xdg; cat"\n' "$M" > "$H/.config/git/config"; echo 'a.txt filter=g' > .gitattributes"#,
        Control::Old,
    ),
    (
        "the system config",
        r#"printf '[diff "s"]\n\ttextconv = "touch %s/system; cat"\n' "$M" > "$ROOT/system.gitconfig"; echo 'a.txt diff=s' > .gitattributes"#,
        Control::Old,
    ),
];

#[test]
fn planted_programs_run_under_plain_git_and_never_under_orchs_calls() {
    for (what, plant, control) in VECTORS {
        let f = Fixture::new();
        f.sh(plant);
        let g = f.git_in(&f.ws);
        let head = g.commit("HEAD");
        assert!(head.is_some(), "{what}: no HEAD");
        assert_eq!(g.branch().as_deref(), Some("main"), "{what}");
        let diff = g.diff();
        assert!(
            diff.as_deref().is_some_and(|d| d.contains("+more")),
            "{what}: {diff:?}"
        );
        let files = g
            .changed_since(head.as_deref().unwrap())
            .unwrap_or_default();
        assert!(
            files.iter().any(|f| f == "a.txt") && files.iter().any(|f| f == "new.txt"),
            "{what}: {files:?}"
        );
        assert_eq!(
            f.marks(),
            Vec::<String>::new(),
            "{what}: one of orch's git calls started a planted program"
        );
        match control {
            Control::Old => {
                f.old_answers(&f.ws);
            }
            Control::Shell(s) => {
                f.bash(s);
            }
            Control::Unreachable(why) => {
                eprintln!("{what}: no control: {why}");
                continue;
            }
        }
        assert!(
            !f.marks().is_empty(),
            "{what}: plain git did not start the planted program either, so this proves nothing"
        );
    }
}

/// `since` comes from the run's records; one that reads as an option
/// (`--output=FILE` makes `git diff` write FILE) is refused.
#[test]
fn a_revision_is_never_taken_for_an_option() {
    let f = Fixture::new();
    let out = f.marks.join("written");
    let arg = format!("--output={}", out.display());
    assert_eq!(f.git_in(&f.ws).changed_since(&arg), None);
    assert!(!out.exists());
    assert_eq!(f.git_in(&f.ws).changed_since("not-a-commit"), None);
    // The old call wrote it.
    f.old(&f.ws, &["diff", "--name-only", "--no-renames", &arg, "--"]);
    assert!(out.exists());
}

/// A repository with every kind of change and every source of ignores:
/// staged, unstaged, deleted, renamed, a mode change, unusual names,
/// `.gitignore`, `info/exclude`, the user's `core.excludesFile` and
/// default ignore file.
const EVERY_CHANGE: &str = r#"
    printf 'x\n' > staged.txt; git add staged.txt
    git rm -q b.txt
    git mv sub/c.txt sub/moved.txt
    chmod +x sub/moved.txt
    printf 'odd\n' > 'sp ace é.txt'
    printf '*.log\n' > .gitignore; printf 'l\n' > x.log
    printf 'secret.tmp\n' >> .git/info/exclude; printf 's\n' > secret.tmp
    printf '[core]\n\texcludesFile = ~/.gitignore_global\n' > "$H/.gitconfig"; printf '*.bak\n' > "$H/.gitignore_global"; printf 'b\n' > y.bak
    printf 'n\n' > sub/new-in-sub.txt
"#;

#[test]
fn on_normal_repositories_the_answers_are_plain_gits() {
    // Changes of every kind, from the top and from a folder below it.
    let f = Fixture::new();
    f.sh(EVERY_CHANGE);
    for ws in [f.ws.clone(), f.ws.join("sub")] {
        let old = f.old_answers(&ws);
        assert!(old.diff.as_deref().is_some_and(|d| d.contains("+more")));
        assert!(
            old.changed.as_ref().is_some_and(|c| c.len() >= 6),
            "{old:?}"
        );
        assert_eq!(f.answers(&ws), old, "{}", ws.display());
    }
    let changed = f.answers(&f.ws).changed.unwrap();
    for ignored in ["x.log", "secret.tmp", "y.bak"] {
        assert!(!changed.iter().any(|c| c == ignored), "{changed:?}");
    }

    // A linked worktree on its own branch; the user's default ignore file
    // (no core.excludesFile).
    let f = Fixture::new();
    f.sh(r#"git worktree add -q "$ROOT/wt" -b other; cd "$ROOT/wt"; printf 'w\n' >> a.txt; printf 'u\n' > u.txt
            mkdir -p "$H/.config/git"; printf '*.swp\n' > "$H/.config/git/ignore"; printf 's\n' > z.swp"#);
    let wt = f.root.join("wt");
    let old = f.old_answers(&wt);
    assert_eq!(old.branch.as_deref(), Some("other"));
    assert_eq!(
        old.changed.as_deref(),
        Some(&["a.txt".to_string(), "u.txt".to_string()][..])
    );
    assert_eq!(f.answers(&wt), old);

    // `.git/hooks` a link (hooks never run for orch; not refused).
    let f = Fixture::new();
    f.sh(r#"mkdir -p "$ROOT/hooks"; rm -rf .git/hooks; ln -s "$ROOT/hooks" .git/hooks"#);
    let old = f.old_answers(&f.ws);
    assert!(old.diff.is_some());
    assert_eq!(f.answers(&f.ws), old);

    // A SHA-256 repository.
    let f = Fixture::empty();
    f.sh(&INIT.replace("git init -q", "git init -q --object-format=sha256"));
    let old = f.old_answers(&f.ws);
    assert_eq!(old.head.as_ref().map(String::len), Some(64));
    assert_eq!(f.answers(&f.ws), old);

    // A submodule moved to another commit (its work tree clean).
    let f = Fixture::new();
    f.sh(r#"git -C "$ROOT" init -q -b main subsrc; printf 'f\n' > "$ROOT/subsrc/f"; git -C "$ROOT/subsrc" add f; git -C "$ROOT/subsrc" commit -qm f
            git -c protocol.file.allow=always submodule add -q "$ROOT/subsrc" sm; git commit -qm sm
            printf 'g\n' >> sm/f; git -C sm commit -qam g"#);
    let old = f.old_answers(&f.ws);
    assert!(
        old.diff
            .as_deref()
            .is_some_and(|d| d.contains("Subproject commit"))
    );
    assert_eq!(f.answers(&f.ws), old);

    // No commit yet: a branch, nothing else.
    let f = Fixture::empty();
    f.sh("git init -q -b main . && printf 'x\\n' > a.txt");
    let old = f.old_answers(&f.ws);
    assert_eq!(old.branch.as_deref(), Some("main"));
    assert_eq!(f.answers(&f.ws), old);
    assert_eq!(f.git_in(&f.ws).diff(), None);

    // Not a repository.
    let f = Fixture::empty();
    let none = Answers {
        head: None,
        branch: None,
        diff: None,
        changed: None,
        refused: None,
    };
    assert_eq!(f.old_answers(&f.ws), none);
    assert_eq!(f.answers(&f.ws), none);
    assert_eq!(f.git_in(&f.ws).changed_since("HEAD"), None);
}

/// A repository an agent can read neither, outside the workspace: `$P`,
/// whose `key` holds [`SECRET`], and a home `$H` with the same text in
/// `.ssh/id_ed25519`.
const PRIVATE: &str = r#"git -C "$ROOT" init -q -b main priv; printf 'HIDDEN-SECRET\n' > "$ROOT/priv/key"
    git -C "$ROOT/priv" add key; git -C "$ROOT/priv" commit -qm key
    mkdir -p "$H/.ssh"; printf 'HIDDEN-SECRET\n' > "$H/.ssh/id_ed25519""#;
const SECRET: &str = "HIDDEN-SECRET";

/// What plain git, run in the workspace as orch ran it before, showed of
/// the hidden repository or home.
enum Leak {
    /// The diff holds the secret.
    Diff,
    /// The files changed name a file in the home.
    Files,
    /// HEAD is the hidden repository's commit.
    Head,
    /// The files changed lack `new.txt`: git read an exclude file outside
    /// the workspace (a pattern file can be probed, one name at a time).
    Excluded,
}

/// (what, bash that plants it as a confined worker could: in the
/// workspace and its `.git` only, `$P` the hidden repository, the leak
/// plain git shows).
const OUTSIDE: &[(&str, &str, Leak)] = &[
    (
        "core.worktree naming the home, a home file staged",
        r#"e=$(git hash-object -w /dev/null); git update-index --add --cacheinfo 100644,$e,.ssh/id_ed25519; git config core.worktree "$H""#,
        Leak::Diff,
    ),
    (
        "core.worktree in config.worktree",
        r#"e=$(git hash-object -w /dev/null); git update-index --add --cacheinfo 100644,$e,.ssh/id_ed25519
           git config core.repositoryformatversion 1; git config extensions.worktreeConfig true; git config --worktree core.worktree "$H""#,
        Leak::Files,
    ),
    (
        "core.worktree naming the workspace's parent, a file there staged",
        r#"e=$(git hash-object -w /dev/null); git update-index --add --cacheinfo 100644,$e,priv/key; git config core.worktree "$ROOT""#,
        Leak::Diff,
    ),
    (
        "a .git file naming another repository",
        r#"rm -rf .git; printf 'gitdir: %s\n' "$P/.git" > .git"#,
        Leak::Diff,
    ),
    (
        "a .git link to another repository",
        r#"rm -rf .git; ln -s "$P/.git" .git"#,
        Leak::Diff,
    ),
    (
        "a .git file naming another repository's linked worktree",
        r#"git -C "$P" worktree add -q "$ROOT/privwt" -b wt; rm -rf .git; printf 'gitdir: %s\n' "$P/.git/worktrees/privwt" > .git"#,
        Leak::Diff,
    ),
    (
        "a commondir file",
        r#"printf '%s\n' "$P/.git" > .git/commondir"#,
        Leak::Diff,
    ),
    (
        "an alternate object store outside, HEAD at its commit",
        r#"printf '%s\n' "$P/.git/objects" > .git/objects/info/alternates; git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        "a relative alternate reaching outside",
        r#"printf '../../../priv/.git/objects\n' > .git/objects/info/alternates; git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        "an alternate inside the workspace that is a link outside",
        r#"ln -s "$P/.git/objects" objs; printf '%s/objs\n' "$PWD" > .git/objects/info/alternates; git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        "an alternate inside the workspace whose own alternate is outside",
        r#"mkdir -p store/info; printf '%s\n' "$P/.git/objects" > store/info/alternates; printf '%s/store\n' "$PWD" > .git/objects/info/alternates; git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        ".git/objects a link",
        r#"mv .git/objects .git/own; ln -s "$P/.git/objects" .git/objects; git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        "loose objects that are links",
        r#"(cd "$P/.git/objects" && for o in ??/*; do mkdir -p "$OLDPWD/.git/objects/${o%/*}"; ln -sf "$PWD/$o" "$OLDPWD/.git/objects/$o"; done); git -C "$P" rev-parse HEAD > .git/HEAD"#,
        Leak::Diff,
    ),
    (
        // orch's calls before did not show this one: `HEAD^{commit}` needs
        // the commit's object, which is not in the store (plain
        // `rev-parse HEAD` shows it). Refused all the same.
        "a branch that is a link to another repository's",
        r#"ln -sf "$P/.git/refs/heads/main" .git/refs/heads/main"#,
        Leak::Head,
    ),
    (
        ".git/info a link",
        r#"mkdir -p "$ROOT/elsewhere"; printf 'new.txt\n' > "$ROOT/elsewhere/exclude"; rm -rf .git/info; ln -s "$ROOT/elsewhere" .git/info"#,
        Leak::Excluded,
    ),
];

#[test]
fn git_is_never_pointed_outside_the_work_tree() {
    for (what, plant, leak) in OUTSIDE {
        let f = Fixture::new();
        f.sh(PRIVATE);
        let private_head = f
            .old(&f.root.join("priv"), &["rev-parse", "HEAD"])
            .unwrap()
            .trim()
            .to_string();
        let o = f.bash(&format!("P=\"$ROOT/priv\"; {plant}"));
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let shows = |a: &Answers| match leak {
            Leak::Diff => a.diff.as_deref().is_some_and(|d| d.contains(SECRET)),
            Leak::Files => a.changed.as_ref().is_some_and(|c| {
                c.iter()
                    .any(|f| f.contains("id_ed25519") || f.contains("priv"))
            }),
            Leak::Head => a.head.as_deref() == Some(private_head.as_str()),
            Leak::Excluded => a
                .changed
                .as_ref()
                .is_some_and(|c| !c.iter().any(|f| f == "new.txt")),
        };
        // The control: plain git, as orch ran it before, reads outside.
        let old = f.old_answers(&f.ws);
        assert!(
            shows(&old),
            "{what}: plain git did not read outside either, so this proves nothing: {old:?}"
        );
        // orch reads nothing at all: no diff, no files, no HEAD, no branch,
        // and says why.
        let new = f.answers(&f.ws);
        let why = new.refused.clone();
        assert!(why.is_some(), "{what}: no reason given");
        assert_eq!(
            new,
            Answers {
                head: None,
                branch: None,
                diff: None,
                changed: None,
                refused: why,
            },
            "{what}"
        );
        let g = f.git_in(&f.ws);
        assert_eq!(g.changed_since(&private_head), None, "{what}");
    }
}

/// The repository's config names files outside the workspace for git to
/// read: an include (`include.path`, whose file sets `core.excludesFile`,
/// to a file outside or inside), or ignore patterns in
/// `core.excludesFile` itself, a
/// relative path leading out, a `~/` one, a link in the workspace to
/// outside. Whether a name is ignored would tell what such a file holds
/// (one name at a time). Plain git reads them (`new.txt` ignored); orch
/// reads none, and still reads the repository (`new.txt` listed). The
/// user's own global config, includes and all, still counts.
#[test]
fn the_repositorys_config_names_no_file_outside_for_orch() {
    const PLANTS: &[&str] = &[
        r#"printf '[core]\n\texcludesFile = %s\n' "$ROOT/elsewhere/exclude" > "$ROOT/elsewhere/inc"; git config include.path "$ROOT/elsewhere/inc""#,
        // The include is outside, the file it names inside: git reads
        // the include, orch does not.
        r#"cp "$ROOT/elsewhere/exclude" here; printf '[core]\n\texcludesFile = %s\n' "$PWD/here" > "$ROOT/elsewhere/inc"; git config include.path "$ROOT/elsewhere/inc""#,
        r#"git config core.excludesFile "$ROOT/elsewhere/exclude""#,
        r#"git config core.excludesFile ../elsewhere/exclude"#,
        r#"cp "$ROOT/elsewhere/exclude" "$H/exclude"; git config core.excludesFile '~/exclude'"#,
        r#"ln -s "$ROOT/elsewhere/exclude" ex; printf 'ex\n' >> .git/info/exclude; git config core.excludesFile ex"#,
    ];
    let listed = |a: &Answers| a.changed.as_ref().map(|c| c.iter().any(|f| f == "new.txt"));
    for plant in PLANTS {
        let f = Fixture::new();
        f.sh(&format!(
            "mkdir -p \"$ROOT/elsewhere\"; printf 'new.txt\\n' > \"$ROOT/elsewhere/exclude\"; {plant}"
        ));
        assert_eq!(
            listed(&f.old_answers(&f.ws)),
            Some(false),
            "{plant}: control"
        );
        let new = f.answers(&f.ws);
        assert_eq!(new.refused, None, "{plant}");
        assert_eq!(listed(&new), Some(true), "{plant}: {new:?}");
    }
    // A file inside the workspace is read, and the user's global config
    // is read with its includes.
    let f = Fixture::new();
    f.sh(r#"printf 'new.txt\n' > ignored-here; git config core.excludesFile ignored-here"#);
    assert_eq!(listed(&f.answers(&f.ws)), Some(false));
    let f = Fixture::new();
    f.sh(
        r#"mkdir -p "$H/conf"; printf 'new.txt\n' > "$H/conf/exclude"
        printf '[core]\n\texcludesFile = %s\n' "$H/conf/exclude" > "$H/conf/inc"
        printf '[include]\n\tpath = %s\n' "$H/conf/inc" > "$H/.gitconfig""#,
    );
    let new = f.answers(&f.ws);
    assert_eq!(listed(&new), Some(false), "{new:?}");
}

/// orch's git is an absolute path, found in absolute folders of PATH only
/// (a relative folder would be the workspace, where git runs).
#[test]
fn orchs_git_is_found_by_an_absolute_path() {
    let git = crate::git::program();
    assert!(git.is_absolute(), "{}", git.display());
    assert!(git.ends_with("git"));
}
