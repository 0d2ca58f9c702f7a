//! What can go wrong with the run history.

use std::path::PathBuf;

/// An error opening, writing or reading `state.db`.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StoreError {
    #[error("cannot create the state directory `{path}`: {source}")]
    #[diagnostic(
        code(orch::store::state_dir),
        help("set another one with `--state-dir`, `ORCH_STATE_DIR` or `state_dir` in orch.toml")
    )]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot open the run history `{path}`: {source}")]
    #[diagnostic(code(orch::store::open))]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error(
        "the run history `{path}` has schema version {found}, newer than this orch knows ({known})"
    )]
    #[diagnostic(
        code(orch::store::too_new),
        help("it was written by a newer orch: use that version, or another `--state-dir`")
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },

    #[error(
        "the run history `{path}` needs an upgrade that the orch running there ({who}) cannot write to"
    )]
    #[diagnostic(
        code(orch::store::upgrade_waits),
        help(
            "an older orch is running there: let it finish (or stop it), then run this again; or use another `--state-dir`"
        )
    )]
    UpgradeWaits { path: PathBuf, who: String },

    #[error("run history: {0}")]
    #[diagnostic(code(orch::store::sqlite))]
    Sqlite(#[from] rusqlite::Error),

    /// The writer thread could not record something (the first such error;
    /// everything committed before it is kept).
    #[error("cannot record the run: {message}")]
    #[diagnostic(code(orch::store::write))]
    Write { message: String },

    #[error("the run history's writer has stopped")]
    #[diagnostic(code(orch::store::closed))]
    Closed,

    #[error("cannot start the run history's writer thread: {0}")]
    #[diagnostic(code(orch::store::thread))]
    Thread(std::io::Error),

    #[error("no run `{spec}` in `{path}`")]
    #[diagnostic(
        code(orch::store::unknown_run),
        help(
            "`orch runs list` shows the runs; a unique prefix of a run id or `latest` also works"
        )
    )]
    UnknownRun { spec: String, path: PathBuf },

    #[error("{message}")]
    #[diagnostic(code(orch::store::transfer))]
    Transfer { message: String },

    #[error("`{spec}` matches more than one run: {candidates}")]
    #[diagnostic(
        code(orch::store::ambiguous_run),
        help("give more characters of the run id")
    )]
    AmbiguousRun { spec: String, candidates: String },
}
