//! The one error type of the command line, and the one place it is
//! rendered. Every command returns `Result<Exit, CliError>`: an `Exit` is
//! how a command that did its work ended (a phase failed, a probe was
//! rejected), a `CliError` why it could not. [`finish`] prints the error on
//! stderr and maps it to its exit code (documented in `docs/commands/`).

use std::io::{self, Write};
use std::process::ExitCode;

use crate::pipeline::Diagnostic;

use super::output::{Exit, print_diagnostics, summary};

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Invalid input or usage: a value on the command line, or a file,
    /// folder or run the command cannot work with. Exit 2.
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// The command ran and the answer is no (`export --check` found the
    /// file stale). Exit 1.
    #[error("{message}")]
    Failed {
        message: String,
        hint: Option<String>,
    },
    /// A pipeline file with errors: every diagnostic, then their count.
    /// Exit 2.
    #[error("{}", summary(file, diagnostics))]
    Pipeline {
        file: String,
        diagnostics: Vec<Diagnostic>,
    },
    /// Settings that do not load (shown as miette renders them). Exit 2.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The run history (shown as miette renders them). Exit 2.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// `orch mcp relay` could not serve its attempt. Exit 1.
    #[error("orch mcp relay: {0}")]
    Relay(#[from] crate::mcp::relay::RelayError),
    /// Writing the command's output. A closed standard output (`orch plan
    /// x | head`) is not an error: exit 0, nothing said. Otherwise exit 2.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<crate::engine::lifecycle::Refused> for CliError {
    fn from(r: crate::engine::lifecycle::Refused) -> Self {
        CliError::Usage {
            message: r.message,
            hint: r.hint,
        }
    }
}

impl CliError {
    /// A usage error (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        CliError::Usage {
            message: message.into(),
            hint: None,
        }
    }

    /// A failure the command found (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        CliError::Failed {
            message: message.into(),
            hint: None,
        }
    }

    /// With a `help:` line (for the errors that are a message).
    pub(crate) fn with_hint(mut self, h: impl Into<String>) -> Self {
        if let CliError::Usage { hint, .. } | CliError::Failed { hint, .. } = &mut self {
            *hint = Some(h.into());
        }
        self
    }

    /// How the process ends.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            CliError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
            CliError::Failed { .. } | CliError::Relay(_) => Exit::Failed,
            CliError::Usage { .. }
            | CliError::Pipeline { .. }
            | CliError::Settings(_)
            | CliError::Store(_)
            | CliError::Io(_) => Exit::Invalid,
        }
    }

    pub(crate) fn exit_code(&self) -> u8 {
        self.exit().code()
    }

    /// Say it on stderr, best effort: a closed stderr never changes the
    /// exit code.
    fn render(self, color: bool) {
        let text = match self {
            CliError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe => return,
            CliError::Usage { message, hint } | CliError::Failed { message, hint } => match hint {
                Some(h) => format!("error: {message}\n  help: {h}"),
                None => format!("error: {message}"),
            },
            CliError::Pipeline { file, diagnostics } => {
                print_diagnostics(&diagnostics, color);
                format!("error: {}", summary(&file, &diagnostics))
            }
            CliError::Settings(e) => format!("{:?}", miette::Report::new(e)),
            CliError::Store(e) => format!("{:?}", miette::Report::new(e)),
            e @ (CliError::Relay(_) | CliError::Io(_)) => format!("error: {e}"),
        };
        let _ = writeln!(io::stderr(), "{text}");
    }
}

/// A command's outcome as the process's exit code, its error said first.
pub(super) fn finish(result: Result<Exit, CliError>, color: bool) -> ExitCode {
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            let code = e.exit_code();
            e.render(color);
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(CliError::usage("x").with_hint("y").exit_code(), 2);
        assert_eq!(CliError::failed("x").exit_code(), 1);
        assert_eq!(
            CliError::Io(io::ErrorKind::BrokenPipe.into()).exit_code(),
            0
        );
        assert_eq!(CliError::Io(io::ErrorKind::NotFound.into()).exit_code(), 2);
        let e = CliError::Pipeline {
            file: "p.toml".into(),
            diagnostics: Vec::new(),
        };
        assert_eq!(e.exit_code(), 2);
    }
}
