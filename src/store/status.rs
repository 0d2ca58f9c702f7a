//! The statuses the store keeps as text: how an attempt or phase ended
//! ([`Outcome`]), where a phase or attempt is ([`Status`]), and a run's
//! status ([`RunStatus`]). Each has one spelling, used by the database,
//! by `--format json` and by the text output, and parses back from it;
//! an unknown spelling read from the database is an error, never a guess.

/// A status text no variant spells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{text}`")]
pub struct UnknownStatus {
    pub(crate) what: &'static str,
    pub(crate) text: String,
}

/// Parsing, serde and SQLite conversions for a status enum, from the
/// spelling its strum derives give each variant (`snake_case`).
macro_rules! status_text {
    ($ty:ident, $what:literal) => {
        impl $ty {
            /// Every status, in declaration order.
            pub(crate) const ALL: &'static [$ty] = <$ty as strum::VariantArray>::VARIANTS;

            pub(crate) fn as_str(self) -> &'static str {
                self.into()
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::store::UnknownStatus;
            fn from_str(s: &str) -> Result<Self, $crate::store::UnknownStatus> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::store::UnknownStatus {
                        what: $what,
                        text: s.to_string(),
                    })
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl rusqlite::types::ToSql for $ty {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::from(self.as_str()))
            }
        }

        impl rusqlite::types::FromSql for $ty {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e: $crate::store::UnknownStatus| {
                        rusqlite::types::FromSqlError::Other(Box::new(e))
                    })
            }
        }
    };
}

pub(super) use status_text;

/// How a phase or agent attempt ended.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Skipped,
    TimedOut,
    Cancelled,
}

status_text!(Outcome, "outcome");

/// Where a phase or an attempt is: still running, or ended with an
/// [`Outcome`]. Stored as `running` or the outcome's text.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum Status {
    Running,
    Succeeded,
    Failed,
    Skipped,
    TimedOut,
    Cancelled,
}

status_text!(Status, "phase or attempt status");

impl Status {
    /// How it ended, or `None` while it runs.
    #[cfg(test)]
    pub(crate) fn outcome(self) -> Option<Outcome> {
        match self {
            Status::Running => None,
            Status::Succeeded => Some(Outcome::Succeeded),
            Status::Failed => Some(Outcome::Failed),
            Status::Skipped => Some(Outcome::Skipped),
            Status::TimedOut => Some(Outcome::TimedOut),
            Status::Cancelled => Some(Outcome::Cancelled),
        }
    }
}

impl From<Outcome> for Status {
    fn from(o: Outcome) -> Status {
        match o {
            Outcome::Succeeded => Status::Succeeded,
            Outcome::Failed => Status::Failed,
            Outcome::Skipped => Status::Skipped,
            Outcome::TimedOut => Status::TimedOut,
            Outcome::Cancelled => Status::Cancelled,
        }
    }
}

/// A run's status: `running` until it ends; `interrupted` when its orch
/// process died without finishing it (found later, see
/// `Reader::mark_interrupted`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Interrupted,
}

status_text!(RunStatus, "run status");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_what_it_writes() {
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(*o));
            assert_eq!(Status::from(*o).outcome(), Some(*o));
            assert_eq!(Status::from(*o).as_str(), o.as_str());
        }
        for p in Status::ALL {
            assert_eq!(p.as_str().parse::<Status>(), Ok(*p));
        }
        for r in RunStatus::ALL {
            assert_eq!(r.as_str().parse::<RunStatus>(), Ok(*r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        assert_eq!(Status::Running.outcome(), None);
    }

    /// The texts in the database: strum spells them from the variants'
    /// names, so renaming a variant must not change one.
    #[test]
    fn the_stored_spellings_stay() {
        let texts = |all: Vec<&'static str>| all.join(" ");
        assert_eq!(
            texts(Outcome::ALL.iter().map(|s| s.as_str()).collect()),
            "succeeded failed skipped timed_out cancelled"
        );
        assert_eq!(
            texts(Status::ALL.iter().map(|s| s.as_str()).collect()),
            "running succeeded failed skipped timed_out cancelled"
        );
        assert_eq!(
            texts(RunStatus::ALL.iter().map(|s| s.as_str()).collect()),
            "running succeeded failed interrupted"
        );
        assert_eq!(
            texts(
                crate::store::ReportKind::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .collect()
            ),
            "task_started task_completed decision blocker milestone claim verdict finding comment followup test_health"
        );
        assert_eq!(Status::TimedOut.to_string(), "timed_out");
    }

    #[test]
    fn an_unknown_text_is_an_error_from_the_database_too() {
        assert_eq!(
            "done".parse::<RunStatus>().unwrap_err().to_string(),
            "unknown run status `done`"
        );
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let got: rusqlite::Result<Status> = conn.query_row("SELECT 'done'", [], |r| r.get(0));
        assert!(got.is_err());
        let ok: Status = conn
            .query_row("SELECT ?1", [Status::TimedOut], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, Status::TimedOut);
    }
}
