//! What the GitHub and GitLab renderings share: YAML building blocks, the
//! header comment, and the shell scripts that restore upstream work before
//! a phase and save the phase's own after it.

use saphyr::{Mapping, Scalar, ScalarStyle, Yaml, YamlEmitter};

use super::{Job, Options};

/// A node of an exported file, written with saphyr's emitter (the same
/// YAML stack that reads profiles' front matter).
pub(super) type Value = Yaml<'static>;

/// A string, read back as that string by YAML 1.2 readers (GitHub's,
/// actionlint's) and YAML 1.1 ones (GitLab's Psych) alike. saphyr quotes
/// what YAML 1.2 would read otherwise and writes multi-line text as
/// literal blocks; two cases are taken from it here:
///
/// - a character a YAML 1.1 reader refuses or reads as a line break (a
///   control character but `\n` and `\t`, NEL, the line and paragraph
///   separators, a BOM), which saphyr would leave in a plain scalar or a
///   literal block: the string is written double-quoted with `\u`
///   escapes;
/// - a plain word YAML 1.1 resolves to something else (`y`, `n`, `1_000`,
///   `2024-01-31`, `0b1`), which saphyr leaves plain: single-quoted.
pub(super) fn s(v: &str) -> Value {
    if v.chars().any(yaml11_unsafe) {
        let mut escaped = String::with_capacity(v.len());
        for c in v.chars() {
            match c {
                '"' => escaped.push_str("\\\""),
                '\\' => escaped.push_str("\\\\"),
                '\n' => escaped.push_str("\\n"),
                c if yaml11_unsafe(c) => escaped.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => escaped.push(c),
            }
        }
        Yaml::Representation(escaped.into(), ScalarStyle::DoubleQuoted, None)
    } else if yaml11_non_string(v) {
        // Such a word holds no quote to double.
        Yaml::Representation(v.to_string().into(), ScalarStyle::SingleQuoted, None)
    } else {
        Yaml::Value(Scalar::String(v.to_string().into()))
    }
}

/// A character a YAML 1.1 reader refuses or takes as a line break.
fn yaml11_unsafe(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\t'))
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
}

/// A word a YAML 1.1 reader may resolve to a boolean, a number or a date
/// (saphyr quotes YAML 1.2's, and the 1.1 booleans but `y` and `n`): any
/// word of digits, letters, `_`, `.`, `:`, `+` and `-` that starts with a
/// digit or a sign is quoted, which is more than needed and never wrong.
fn yaml11_non_string(v: &str) -> bool {
    matches!(v, "y" | "Y" | "n" | "N")
        || (v.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-')
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '+' | '-')))
}

pub(super) fn map<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Yaml::Mapping(entries.into_iter().map(|(k, v)| (s(k), v)).collect())
}

pub(super) fn seq(items: impl IntoIterator<Item = Value>) -> Value {
    Yaml::Sequence(items.into_iter().collect())
}

pub(super) fn boolean(b: bool) -> Value {
    Yaml::Value(Scalar::Boolean(b))
}

pub(super) fn number(n: u64) -> Value {
    Yaml::Value(Scalar::Integer(i64::try_from(n).unwrap_or(i64::MAX)))
}

pub(super) fn empty() -> Value {
    Yaml::Mapping(Mapping::new())
}

/// The document as YAML text, multi-line strings as literal blocks, with
/// no `---` before it and a line break after it.
pub(super) fn to_yaml(doc: &Value) -> String {
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    emitter.multiline(true);
    // Writing to a String cannot fail.
    emitter.dump(doc).expect("a String takes any YAML");
    let mut yaml = out.strip_prefix("---\n").map(str::to_string).unwrap_or(out);
    if !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    yaml
}

/// A word for a POSIX shell, in single quotes, with no `${{` in the text:
/// GitHub evaluates `${{ ... }}` anywhere in a `run:` script before the
/// shell sees it, quotes or not (an artifact path `${{ secrets.X }}`
/// would have become the secret). `$''{{` reads as `${{` to the shell.
pub(super) fn sh(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''").replace("${{", "$''{{"))
}

/// A path pattern for the shell: quoted, `*` left to match.
pub(super) fn sh_pattern(p: &str) -> String {
    p.split('*').map(sh).collect::<Vec<_>>().join("*")
}

/// The switches on every git call of a job's scripts: command-line config
/// outranks every file's.
const GIT_SWITCHES: &str = "--no-pager -c core.fsmonitor=false -c core.hooksPath=/dev/null";

/// The shell that defines `orch_git`, the only git the scripts run in the
/// work tree once orch has run in it: git over this work tree with a git
/// directory of its own, made outside the workspace (`mktemp -d`, where no
/// agent may write), whose config only names the object format
/// (`$orch_git_format`, set before). The repository's config (and every
/// file it includes), the system's and the runner user's are not read,
/// and fsmonitor, hooks and the pager are off on the command line: no
/// filter, diff or merge driver, textconv, fsmonitor, hook or pager that
/// anyone configured (an agent in `.git/config`, the runner's Git LFS)
/// can start a program. The work tree's `.gitattributes` still apply (to
/// line endings), and `.git/info/exclude` (unless it, `.git/info` or
/// `.git` is a link: `cp` would read through it).
///
/// With `own_index` the index and new objects stay in that directory too
/// (the repository's objects read as alternates), so the step after the
/// agents writes nothing in `.git`; without, they are the repository's.
fn git_prelude(own_index: bool) -> String {
    let (index, objects) = if own_index {
        ("$orch_git_dir/index", "$orch_git_dir/objects")
    } else {
        ("$PWD/.git/index", "$PWD/.git/objects")
    };
    let mut s = String::from(
        "orch_git_dir=$(mktemp -d) || exit 1\n\
         mkdir \"$orch_git_dir/refs\" \"$orch_git_dir/info\"\n\
         echo 'ref: refs/heads/orch' > \"$orch_git_dir/HEAD\"\n\
         if [ \"$orch_git_format\" = sha256 ]; then printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tobjectformat = sha256\\n'; else printf '[core]\\n\\trepositoryformatversion = 0\\n'; fi > \"$orch_git_dir/config\"\n\
         if [ -f .git/info/exclude ] && [ ! -L .git ] && [ ! -L .git/info ] && [ ! -L .git/info/exclude ]; then cp .git/info/exclude \"$orch_git_dir/info/exclude\"; fi\n",
    );
    if own_index {
        s.push_str(
            "mkdir -p \"$orch_git_dir/objects/info\"\n\
             printf '%s/.git/objects\\n' \"$PWD\" > \"$orch_git_dir/objects/info/alternates\"\n",
        );
    }
    s.push_str(&format!(
        "orch_git() {{\n  GIT_DIR=\"$orch_git_dir\" GIT_WORK_TREE=\"$PWD\" GIT_INDEX_FILE=\"{index}\" GIT_OBJECT_DIRECTORY=\"{objects}\" \\\n    GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 GIT_NO_LAZY_FETCH=1 GIT_TERMINAL_PROMPT=0 \\\n    git {GIT_SWITCHES} \"$@\"\n}}\n"
    ));
    s
}

/// The script that prepares a job: the state and files of every upstream
/// job, in dependency order (patches first, then files, then state), and
/// the tree the job's own changes are measured from. It runs before any
/// agent of the job, on the checkout and upstream work (a patch cannot
/// write in `.git`), so the repository's index and objects take the work.
pub(super) fn restore_script(job: &Job, inbox: &str) -> String {
    let mut s = String::from("set -eu\nmkdir -p \"$RUNNER_TEMP/orch-out\"\n");
    s.push_str(&format!(
        "orch_git_format=$(git {GIT_SWITCHES} rev-parse --show-object-format)\n"
    ));
    s.push_str(&git_prelude(false));
    if !job.upstream.is_empty() {
        s.push_str(&format!("for job in {}; do\n", job.upstream.join(" ")));
        s.push_str(&format!("  dir=\"{inbox}/$job\"\n"));
        s.push_str("  if [ -s \"$dir/changes.patch\" ]; then orch_git apply --index \"$dir/changes.patch\"; fi\n");
        s.push_str(&restore_files());
        s.push_str(
            "  orch --state-dir \"$RUNNER_TEMP/orch-state\" state import \"$dir/state.db\"\n",
        );
        s.push_str("done\n");
    }
    s.push_str("orch_git add -A\norch_git write-tree > \"$RUNNER_TEMP/orch-base\"\nrm -rf \"$orch_git_dir\"\n");
    s
}

/// The part of [`restore_script`] that unpacks an upstream job's
/// `files.tar` (in the loop over upstream jobs: `$job`, `$dir`). The
/// archive comes from a job whose agents may be hostile, and the patches
/// applied before it may have made any name in the workspace a link
/// (`reports` a link to `~/.ssh`; GNU tar writes a member
/// `reports/x.md` through it when no `reports` folder member comes
/// first), so the archive is never unpacked in the workspace:
///
/// - its listing (names quoted one a line) must hold files and folders
///   only (no link, hard link, device or FIFO), and no name that is
///   absolute or has a `..` component; else nothing of it is restored;
/// - it is unpacked in an empty folder of its own under `$RUNNER_TEMP`
///   (outside the workspace), as an ordinary user would;
/// - [`PLACE_FILES`] moves each file (and empty folder) from there into
///   the workspace, component by component: it makes the folders
///   missing, and refuses, naming the file, when a component there is a
///   link (or a file where a folder is due, or the reverse), and a name
///   in `.git`. No agent
///   runs during the restore: what it checked is what it writes.
fn restore_files() -> String {
    debug_assert!(!PLACE_FILES.contains('\''));
    format!(
        "  if [ -f \"$dir/files.tar\" ]; then\n\
         \x20   tar -tvf \"$dir/files.tar\" --quoting-style=escape > \"$RUNNER_TEMP/orch-list\"\n\
         \x20   if grep -v '^[-d]' \"$RUNNER_TEMP/orch-list\" >&2; then echo \"orch: the files.tar of job $job holds more than files and folders (above): none of it restored\" >&2; exit 1; fi\n\
         \x20   tar -tf \"$dir/files.tar\" --quoting-style=escape > \"$RUNNER_TEMP/orch-list\"\n\
         \x20   if grep -E '^/|(^|/)[.][.](/|$)' \"$RUNNER_TEMP/orch-list\" >&2; then echo \"orch: the files.tar of job $job names a file outside the workspace (above): none of it restored\" >&2; exit 1; fi\n\
         \x20   orch_stage=$(mktemp -d \"$RUNNER_TEMP/orch-stage.XXXXXX\")\n\
         \x20   tar -xf \"$dir/files.tar\" -C \"$orch_stage\" --no-same-owner --no-same-permissions\n\
         \x20   orch_ws=$PWD\n\
         \x20   (cd \"$orch_stage\" && find . ! -name . ! \\( -type d ! -empty \\) -exec sh -c '{PLACE_FILES}' orch-restore \"$orch_ws\" \"$job\" {{}} +)\n\
         \x20   rm -rf \"$orch_stage\"\n\
         \x20 fi\n"
    )
}

/// The `sh -c` script of [`restore_files`] (in single quotes there: it
/// holds none). In the unpacked archive, with the workspace `$1`, the
/// job `$2` and the names `find` listed (`./`-prefixed, parents first):
/// each must be a file or a folder (not a link) outside `.git` (whose
/// config and hooks git would run), and each component of its name in
/// the workspace no link; missing folders are made, the file moved in
/// (replacing a file there).
const PLACE_FILES: &str = r#"
      set -eu
      w=$1 job=$2
      shift 2
      for p; do
        if [ -L "$p" ] || { [ ! -f "$p" ] && [ ! -d "$p" ]; }; then
          printf "orch: not restored: %s from the files.tar of job %s: not a file or folder\n" "$p" "$job" >&2; exit 1
        fi
        case $p in ./.git | ./.git/*)
          printf "orch: not restored: %s from the files.tar of job %s: in the .git folder\n" "$p" "$job" >&2; exit 1 ;;
        esac
        q=.
        rest=${p#./}
        while :; do
          q=$q/${rest%%/*}
          case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
          if [ -L "$w/$q" ]; then
            printf "orch: not restored: %s from the files.tar of job %s: it would go through a link (%s is a link in the workspace)\n" "$p" "$job" "$q" >&2; exit 1
          fi
          if [ -n "$rest" ] || [ -d "$p" ]; then
            if [ ! -d "$w/$q" ]; then
              if [ -e "$w/$q" ]; then printf "orch: not restored: %s from the files.tar of job %s: %s is a file in the workspace\n" "$p" "$job" "$q" >&2; exit 1; fi
              mkdir "$w/$q"
            fi
          else
            if [ -d "$w/$q" ]; then printf "orch: not restored: %s from the files.tar of job %s: it is a folder in the workspace\n" "$p" "$job" >&2; exit 1; fi
            mv -f "$p" "$w/$q"
          fi
          if [ -z "$rest" ]; then break; fi
        done
      done
    "#;

/// The script that saves what the job made, whatever its outcome. The
/// agents have had the workspace, `.git` included: the changes are taken
/// from the tree the job started from (read into an index of its own) and
/// the work tree, and no git here reads `.git`'s config or writes in it.
pub(super) fn save_script(job: &Job, out: &str) -> String {
    let mut s = format!("set -u\nmkdir -p \"{out}\"\n");
    s.push_str(&format!(
        "orch --state-dir \"$RUNNER_TEMP/orch-state\" state export --run \"$ORCH_RUN_ID\" -o \"{out}/state.db\"\n"
    ));
    if job.writes {
        // On GitLab `$RUNNER_TEMP` is in the workspace: the base is read
        // as a tree id or not at all (`--output=FILE` would be an option).
        s.push_str(
            "orch_git_base=$(cat \"$RUNNER_TEMP/orch-base\")\n\
             case \"$orch_git_base\" in *[!0-9a-f]*) orch_git_base= ;; esac\n\
             case \"${#orch_git_base}\" in 64) orch_git_format=sha256 ;; *) orch_git_format=sha1 ;; esac\n",
        );
        s.push_str(&git_prelude(true));
        s.push_str(&format!(
            "if [ \"${{#orch_git_base}}\" = 40 ] || [ \"${{#orch_git_base}}\" = 64 ]; then\n\
             \x20 orch_git read-tree \"$orch_git_base\" && orch_git add -A &&\n\
             \x20   orch_git diff --cached --binary --no-ext-diff --no-textconv --ignore-submodules=dirty \"$orch_git_base\" > \"{out}/changes.patch\"\n\
             else\n\
             \x20 echo 'orch: $RUNNER_TEMP/orch-base is not a tree id: no changes.patch' >&2\n\
             fi\n\
             rm -rf \"$orch_git_dir\"\n"
        ));
    }
    if !job.files.is_empty() {
        s.push_str(&save_files(job, out));
    }
    s
}

/// The part of [`save_script`] that archives the job's files
/// (`files.tar`). It runs unconfined, after agents that may have made any
/// name in the workspace a link, so it follows none: a match that is a
/// link, or lies under a folder that is one, is left out, and so is every
/// link in a folder matched (each said on standard error); the archive
/// holds files and folders only. Each name reaches tar whole and as it
/// is: NUL-separated (a line break in a name cannot start another),
/// `./`-prefixed (no name is an option), `--no-unquote` (GNU tar would
/// turn `\057` in a name into `/` and `..`), `--no-recursion` (tar
/// gets exactly the names `find` listed).
fn save_files(job: &Job, out: &str) -> String {
    let patterns: Vec<String> = job.files.iter().map(|f| sh_pattern(f)).collect();
    format!(
        "for f in {}; do\n\
         \x20 if [ ! -e \"$f\" ] && [ ! -L \"$f\" ]; then continue; fi\n\
         \x20 p=$f\n\
         \x20 while :; do\n\
         \x20   if [ -L \"$p\" ]; then printf 'orch: not saved: %s (%s is a link)\\n' \"$f\" \"$p\" >&2; continue 2; fi\n\
         \x20   case \"$p\" in */*) p=${{p%/*}} ;; *) break ;; esac\n\
         \x20 done\n\
         \x20 find \"./$f\" -type l -exec printf 'orch: not saved: %s (a link)\\n' {{}} + >&2\n\
         \x20 find \"./$f\" ! -type l -print0\n\
         done > \"$RUNNER_TEMP/orch-files\"\n\
         if [ -s \"$RUNNER_TEMP/orch-files\" ]; then tar -cf \"{out}/files.tar\" --null --no-unquote --no-recursion -T \"$RUNNER_TEMP/orch-files\"; fi\n",
        patterns.join(" ")
    )
}

/// The comment at the top: what made it, how to keep it current, and the
/// secrets to define.
pub(super) fn header(opts: &Options, jobs: &[Job], check: &str, secret_hint: &str) -> String {
    // The command is meant to be pasted: the file quoted for a shell.
    let file = crate::agents::invocation::shell_quote(&opts.file);
    let mut h = format!(
        "# Generated by `orch export {check} {file} {}` (orch {}): do not edit.\n# Keep it current in CI with `orch export {check} {file} {} --check -o <this file>`.\n#\n",
        opts.flags,
        env!("CARGO_PKG_VERSION"),
        opts.flags,
    );
    let by_name = |of: &dyn Fn(&Job) -> &Vec<String>| {
        let mut names: Vec<(&str, Vec<&str>)> = Vec::new();
        for j in jobs {
            for n in of(j) {
                match names.iter_mut().find(|(m, _)| m == n) {
                    Some((_, js)) => js.push(&j.id),
                    None => names.push((n, vec![&j.id])),
                }
            }
        }
        names.sort();
        names
    };
    let secrets = by_name(&|j| &j.secrets);
    let env = by_name(&|j| &j.env);
    if secrets.is_empty() && env.is_empty() {
        h.push_str("# Secrets: none (no job runs an agent CLI or names a variable).\n");
    } else if secrets.is_empty() {
        h.push_str("# Secrets: none (no job runs an agent CLI or names a secret).\n");
    } else {
        h.push_str(&format!(
            "# Secrets to define ({secret_hint}); the jobs that read each:\n"
        ));
        for (n, js) in secrets {
            h.push_str(&format!("#   {n}: {}\n", js.join(", ")));
        }
    }
    if !env.is_empty() {
        h.push_str(
            "# Read from the job's own environment, not secrets (the runner's, or set them there); the jobs that read each:\n",
        );
        for (n, js) in env {
            h.push_str(&format!("#   {n}: {}\n", js.join(", ")));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use saphyr::LoadableYamlNode;

    /// `value` under `key` in a mapping, written and read back by saphyr.
    fn round_trip(key: &str, value: &str) -> (String, String) {
        let text = to_yaml(&map(vec![(key, s(value)), ("after", s("x"))]));
        let docs = Yaml::load_from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let (k, v) = docs[0].as_mapping().unwrap().iter().next().unwrap();
        assert_eq!(docs[0]["after"].as_str(), Some("x"), "{text}");
        (
            k.as_str().unwrap_or_else(|| panic!("{text}")).to_string(),
            v.as_str().unwrap_or_else(|| panic!("{text}")).to_string(),
        )
    }

    #[test]
    fn a_shell_word_reads_back_as_written_and_holds_no_github_expression() {
        for word in [
            "${{ secrets.X }}",
            "a${{b}}${{",
            "$${{{",
            "'${{'",
            "${{'}}",
            "plain",
            "",
        ] {
            for quoted in [sh(word), sh_pattern(word)] {
                assert!(!quoted.contains("${{"), "{quoted}");
                let out = std::process::Command::new("sh")
                    .args(["-c", &format!("printf %s {quoted}")])
                    .output()
                    .unwrap();
                assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{quoted}");
            }
        }
    }

    #[test]
    fn hostile_strings_read_back_as_written() {
        for v in [
            "${{ secrets.X }}",
            "a-${{ github.run_id }}",
            "key: value",
            "a:b",
            "#comment",
            "a # comment",
            "*alias",
            "&anchor",
            "!tag",
            "- item",
            "? key",
            "|",
            ">",
            "%directive",
            "@at",
            "`tick`",
            "{a: b}",
            "[a, b]",
            "'single'",
            "\"double\"",
            "back\\slash",
            " lead",
            "trail ",
            "",
            "~",
            "null",
            "true",
            "on",
            "no",
            "y",
            "N",
            "1",
            "08",
            "0x1f",
            "0o17",
            "0b101",
            "1e3",
            "1_000",
            "1:20",
            "2014-12-31",
            "+1",
            ".inf",
            ".nan",
            "---",
            "...",
            "line\nbreak",
            "line\nbreak\n",
            "two\n\n",
            "\n lead",
            "  indented\nscript\n",
            "a\n---\nb\n",
            "a\n...\nb",
            "tab\there",
            "cr\rhere",
            "nel\u{85}here",
            "ls\u{2028}here",
            "ps\u{2029}here",
            "bom\u{feff}here",
            "c1\u{80}here",
            "esc\u{1b}[31m",
            "nul\0here",
            "script\nwith nel\u{85}\n",
            "é ünïcode ✓",
        ] {
            assert_eq!(round_trip("k", v), ("k".into(), v.into()), "{v:?}");
            assert_eq!(round_trip(v, "v"), (v.into(), "v".into()), "{v:?}");
        }
    }

    #[test]
    fn nothing_a_yaml_1_1_reader_would_take_otherwise_is_left_plain() {
        for v in [
            "y",
            "Y",
            "n",
            "N",
            "yes",
            "No",
            "on",
            "OFF",
            "1_000",
            "0b101",
            "2014-12-31",
            "1:20",
            "08",
            "+1",
            "~",
            "null",
            "",
        ] {
            let text = to_yaml(&map(vec![("k", s(v))]));
            assert!(
                text.starts_with("k: '") || text.starts_with("k: \""),
                "{v:?}: {text}"
            );
        }
        for v in [
            "nel\u{85}",
            "ls\u{2028}",
            "ps\u{2029}",
            "c1\u{80}",
            "a\nnel\u{85}\n",
        ] {
            let text = to_yaml(&map(vec![("k", s(v))]));
            assert!(text.is_ascii(), "{v:?}: {text}");
        }
        // What is plain stays readable.
        assert_eq!(
            to_yaml(&map(vec![("k", s("ubuntu-latest"))])),
            "k: ubuntu-latest\n"
        );
        assert_eq!(
            to_yaml(&map(vec![("k", s("set -eu\necho hi\n"))])),
            "k: |\n  set -eu\n  echo hi\n"
        );
    }

    proptest! {
        #[test]
        fn any_string_reads_back_as_written(k in "(?s).*", v in "(?s).*") {
            prop_assert_eq!(round_trip(&k, &v), (k.clone(), v.clone()));
        }

        #[test]
        fn any_script_reads_back_as_written(v in "[ -~\t\n]*") {
            prop_assert_eq!(round_trip("run", &v), ("run".into(), v.clone()));
        }
    }
}
