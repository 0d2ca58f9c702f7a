//! Finding the pipeline file when a command is not given one: the
//! `pipeline.toml` of the current directory, else the only `.toml` file in
//! `pipelines/` or `.orch/pipelines/`. None, or several, is an error that
//! lists what was found.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::error::CliError;

/// The folders searched after `pipeline.toml`, in order.
pub(super) const FOLDERS: [&str; 2] = ["pipelines", ".orch/pipelines"];

/// What a search from `dir` finds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    One(PathBuf),
    None,
    Several(Vec<PathBuf>),
}

/// Search `dir` (paths in the answer are relative to it).
pub(super) fn search(dir: &Path) -> Found {
    let top = PathBuf::from("pipeline.toml");
    if dir.join(&top).is_file() {
        return Found::One(top);
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for folder in FOLDERS {
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        let mut here: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| Path::new(folder).join(e.file_name()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        here.sort();
        found.extend(here);
    }
    match found.len() {
        0 => Found::None,
        1 => Found::One(found.remove(0)),
        _ => Found::Several(found),
    }
}

/// The file a command works on: `given`, else what a search of the
/// current directory finds.
pub(super) fn pipeline_file(given: Option<&Path>) -> Result<PathBuf, CliError> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir()?;
    match search(&cwd) {
        Found::One(p) => {
            // Say which: a file found is not a file named.
            let _ = writeln!(io::stderr(), "using {}", p.display());
            Ok(p)
        }
        Found::None => Err(CliError::usage(format!(
            "no pipeline file given, and none found: looked for pipeline.toml, then {}",
            FOLDERS.map(|f| format!("{f}/*.toml")).join(" and ")
        ))
        .with_hint("name one (`orch run FILE`), or write a starter with `orch init`")),
        Found::Several(all) => Err(CliError::usage(format!(
            "no pipeline file given, and {} were found: {}",
            all.len(),
            all.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .with_hint(format!(
            "name the one you mean, e.g. `{}`",
            all[0].display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, rel: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn the_order_of_the_search() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(search(d.path()), Found::None);
        touch(d.path(), ".orch/pipelines/ci.toml");
        touch(d.path(), "pipelines/notes.md");
        assert_eq!(
            search(d.path()),
            Found::One(".orch/pipelines/ci.toml".into())
        );
        touch(d.path(), "pipelines/a.toml");
        assert_eq!(
            search(d.path()),
            Found::Several(vec![
                "pipelines/a.toml".into(),
                ".orch/pipelines/ci.toml".into()
            ])
        );
        touch(d.path(), "pipeline.toml");
        assert_eq!(search(d.path()), Found::One("pipeline.toml".into()));
    }
}
