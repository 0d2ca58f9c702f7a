//! Confining one process (and everything it starts) before it executes.

use serde::Serialize;

use super::policy::Policy;

/// How one process tree is confined: the policy, and the Landlock ABI the
/// kernel speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confinement {
    pub policy: Policy,
    pub abi: u32,
}

/// Confinement was expected but could not be set up: the process must not
/// start.
#[derive(Debug, thiserror::Error)]
#[error("cannot confine the process: {0}")]
pub struct ConfineError(pub String);

impl Confinement {
    /// Build the ruleset now and have `cmd`'s child enter it (and a new
    /// session) right before it executes. A child that cannot enter it does
    /// not execute: spawning fails with the system's error.
    #[cfg(target_os = "linux")]
    pub fn apply(&self, cmd: &mut std::process::Command) -> Result<(), ConfineError> {
        use std::os::unix::process::CommandExt;
        let prepared = super::landlock::prepare(&self.policy, self.abi)
            .map_err(|e| ConfineError(e.to_string()))?;
        // SAFETY: `enter` makes only async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || prepared.enter());
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn apply(&self, _cmd: &mut std::process::Command) -> Result<(), ConfineError> {
        Err(ConfineError("confinement needs Linux (Landlock)".into()))
    }
}
