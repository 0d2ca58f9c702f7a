//! What identifies a run: its id, and the SHA-256 digests of the pipeline
//! file and every prompt and profile file it uses (a resume refuses when
//! they changed).

use std::collections::BTreeMap;

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::pipeline::Pipeline;
use crate::pipeline::model::Prompt;

/// `YYYYMMDD-HHMMSS-xxxx` (UTC, then 4 hex digits): sorts by start time and
/// reads well in `orch runs list`.
pub(crate) fn new_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) & 0xffff;
    format!(
        "{y:04}{mo:02}{d:02}-{:02}{:02}{:02}-{salt:04x}",
        t / 3600,
        (t / 60) % 60,
        t % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Digests of every file a pipeline reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Digests {
    /// One digest over all of them.
    pub(crate) digest: String,
    /// Each file (as displayed) and its SHA-256.
    pub(crate) files: BTreeMap<String, String>,
}

pub(crate) fn digests(pipeline: &Pipeline) -> Digests {
    let mut files = BTreeMap::new();
    let mut add = |path: &std::path::Path| {
        let hash = sha256_file(path).unwrap_or_else(|| "missing".into());
        files.insert(path.display().to_string(), hash);
    };
    add(&pipeline.path);
    for phase in &pipeline.phases {
        if let Some(Prompt::File { path, .. }) = &phase.prompt {
            add(path);
        }
        if let Some(profile) = &phase.profile {
            add(&profile.path);
        }
    }
    let mut h = Sha256::new();
    for (path, hash) in &files {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(hash.as_bytes());
        h.update([b'\n']);
    }
    Digests {
        digest: hex::encode(h.finalize()),
        files,
    }
}

/// What changed between two sets of file digests, in words.
pub(crate) fn changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, hash) in new {
        match old.get(path) {
            None => out.push(format!("`{path}` is new")),
            Some(h) if h != hash => out.push(format!("`{path}` changed")),
            _ => {}
        }
    }
    for path in old.keys() {
        if !new.contains_key(path) {
            out.push(format!("`{path}` is no longer used"));
        }
    }
    out
}

/// SHA-256 (hex) of a regular file, `None` when it is missing or not a file.
pub(crate) fn sha256_file(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    sha256_of(f)
}

/// SHA-256 (hex) of the regular file `rel` beneath `root`, opened without
/// following any link (see [`crate::beneath`]): `None` when it is missing,
/// not a regular file, or reached through a link.
pub(crate) fn sha256_beneath(root: &Path, rel: &str) -> Option<String> {
    let f = crate::beneath::Root::open(root)
        .ok()?
        .open_file(Path::new(rel))
        .ok()?;
    sha256_of(f)
}

fn sha256_of(mut f: std::fs::File) -> Option<String> {
    use std::io::Read;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Some(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let id = new_run_id();
        assert_eq!(id.len(), 20, "{id}");
    }

    #[test]
    fn changes_are_named() {
        let old: BTreeMap<String, String> =
            [("a".into(), "1".into()), ("b".into(), "2".into())].into();
        let new: BTreeMap<String, String> = [
            ("a".into(), "1".into()),
            ("b".into(), "3".into()),
            ("c".into(), "4".into()),
        ]
        .into();
        assert_eq!(changes(&old, &new), vec!["`b` changed", "`c` is new"]);
    }
}
