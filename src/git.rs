//! What orch asks git about a workspace (the MCP tools' files changed, the
//! prompts' branch): read-only commands, no locks taken.

use std::path::Path;
use std::process::Command;

/// The commit checked out in `workspace`, or `None` outside a git
/// repository (or one with no commit yet).
pub fn head(workspace: &Path) -> Option<String> {
    let out = git(workspace, &["rev-parse", "--verify", "--quiet", "HEAD"])?;
    let h = out.trim();
    (!h.is_empty()).then(|| h.to_string())
}

/// The working tree's changes against HEAD (staged and not), as a diff;
/// `None` outside a git repository.
pub fn diff(workspace: &Path) -> Option<String> {
    git(workspace, &["diff", "HEAD", "--no-color", "--no-ext-diff"])
}

/// The branch checked out in `workspace` (`None` when detached or
/// outside a git repository).
pub fn branch(workspace: &Path) -> Option<String> {
    let out = git(workspace, &["symbolic-ref", "--quiet", "--short", "HEAD"])?;
    let b = out.trim();
    (!b.is_empty()).then(|| b.to_string())
}

/// The files changed since `since`: the committed diff from it to the
/// working tree (staged and unstaged included) and the untracked files
/// git does not ignore, sorted, each once. `None` when git cannot tell.
pub fn changed_since(workspace: &Path, since: &str) -> Option<Vec<String>> {
    let diff = git(
        workspace,
        &["diff", "--name-only", "--no-renames", since, "--"],
    )?;
    let new = git(workspace, &["ls-files", "--others", "--exclude-standard"])?;
    let mut files: Vec<String> = diff
        .lines()
        .chain(new.lines())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    Some(files)
}

fn git(workspace: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
