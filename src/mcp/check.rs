//! Argument rules the types cannot say (lengths, ranges, paths). Each
//! failure is a message for the agent, saying what to change.

use std::path::{Component, Path, PathBuf};

/// Most characters of a long text field (a summary, a reasoning).
pub(super) const MAX_TEXT: usize = 20_000;
/// Most characters of a short field (a name, a title, a label).
pub(super) const MAX_SHORT: usize = 500;
/// Most items of a list.
pub(super) const MAX_ITEMS: usize = 100;

/// `value` has at least `min` non-blank characters and at most `max`.
pub(super) fn text(field: &str, value: &str, min: usize, max: usize) -> Result<(), String> {
    if value.contains('\u{FFFD}') {
        return Err(format!(
            "`{field}` holds bytes that are not UTF-8 (or U+FFFD, which stands for them): send UTF-8 text"
        ));
    }
    let n = value.trim().chars().count();
    if n < min.max(1) {
        return Err(if n == 0 {
            format!("`{field}` is empty: give it a value")
        } else {
            format!("`{field}` has {n} characters: it needs at least {min}")
        });
    }
    let all = value.chars().count();
    if all > max {
        return Err(format!(
            "`{field}` has {all} characters, more than the {max} allowed: shorten it"
        ));
    }
    Ok(())
}

/// An optional text: when given, as [`text`].
pub(super) fn opt_text(
    field: &str,
    value: Option<&str>,
    min: usize,
    max: usize,
) -> Result<(), String> {
    value.map_or(Ok(()), |v| text(field, v, min, max))
}

/// A list of at most [`MAX_ITEMS`] short, non-empty items.
pub(super) fn list(field: &str, items: &[String], max_each: usize) -> Result<(), String> {
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "`{field}` has {} items, more than the {MAX_ITEMS} allowed",
            items.len()
        ));
    }
    for (i, item) in items.iter().enumerate() {
        text(&format!("{field}[{i}]"), item, 1, max_each)?;
    }
    Ok(())
}

/// `n` is within `lo..=hi`.
pub(super) fn range(field: &str, n: i64, lo: i64, hi: i64) -> Result<(), String> {
    if n < lo || n > hi {
        return Err(format!("`{field}` is {n}: it must be from {lo} to {hi}"));
    }
    Ok(())
}

/// The bytes of the regular file `given` names inside `workspace`, at
/// most `max`: no absolute path, no `..`, and no symbolic link anywhere on
/// the way (opened beneath the workspace, see [`crate::beneath`]). Returns
/// the path relative to the workspace and the bytes.
pub(super) fn workspace_file(
    field: &str,
    given: &str,
    workspace: &Path,
    max: u64,
) -> Result<(String, Vec<u8>), String> {
    text(field, given, 1, 4096)?;
    let p = Path::new(given);
    if p.is_absolute() {
        return Err(format!(
            "`{field}` is the absolute path `{given}`: give a path relative to the workspace"
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "`{field}` `{given}` climbs with `..`: give a path inside the workspace"
        ));
    }
    let rel: PathBuf = p
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let bytes = crate::beneath::read(workspace, &rel, max).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("`{field}`: cannot open `{given}` in the workspace: {e}; write the file first")
        }
        _ => format!(
            "`{field}` `{given}`: {e}; give a regular file inside the workspace, not a link"
        ),
    })?;
    Ok((rel.display().to_string(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_lists_and_ranges() {
        assert!(text("a", "  ", 1, 10).unwrap_err().contains("empty"));
        assert!(text("a", "abc", 5, 10).unwrap_err().contains("at least 5"));
        assert!(
            text("a", &"x".repeat(11), 1, 10)
                .unwrap_err()
                .contains("more than the 10")
        );
        assert!(text("a", "ok", 1, 10).is_ok());
        let many = vec!["x".to_string(); MAX_ITEMS + 1];
        assert!(list("l", &many, 10).is_err());
        assert!(list("l", &["".into()], 10).unwrap_err().contains("`l[0]`"));
        assert!(range("p", 101, 0, 100).is_err());
        assert!(range("p", 100, 0, 100).is_ok());
    }

    #[test]
    fn a_workspace_file_cannot_be_outside_it() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws_path = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(ws_path.join("d")).unwrap();
        std::fs::write(ws_path.join("d/plan.md"), "# x").unwrap();
        std::fs::write(outside.path().join("secret.md"), "# s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), ws_path.join("link.md"))
            .unwrap();
        std::os::unix::fs::symlink("d/plan.md", ws_path.join("inner.md")).unwrap();
        let (rel, bytes) = workspace_file("f", "./d/plan.md", &ws_path, 100).unwrap();
        assert_eq!((rel.as_str(), bytes.as_slice()), ("d/plan.md", &b"# x"[..]));
        let err = |given: &str| workspace_file("f", given, &ws_path, 100).unwrap_err();
        assert!(err("/etc/passwd").contains("absolute"));
        assert!(err("d/../../x").contains(".."));
        assert!(err("link.md").contains("link"), "{}", err("link.md"));
        assert!(
            err("inner.md").contains("link"),
            "a link inside is no better"
        );
        assert!(err("missing.md").contains("cannot open"));
        assert!(err("d").contains("not a regular file"), "{}", err("d"));
    }
}
