//! Whether orch confines agents at all: the `confinement` setting.

use serde::{Deserialize, Serialize};

/// The `confinement` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfinementMode {
    /// Confine wherever the OS can (Landlock on Linux).
    #[default]
    Auto,
    /// Never confine: only what the CLIs enforce counts (tests use it).
    Off,
}
