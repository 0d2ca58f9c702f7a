//! OS confinement: each agent's whole process tree is held to its phase's
//! `permission` by the kernel (Landlock on Linux), whatever the CLI does.
//!
//! [`policy`] decides the paths per permission level (pure), [`availability`]
//! says whether this machine can confine, and the Linux backend turns a
//! policy into a ruleset a child process enters before it executes.

pub(crate) mod availability;
#[cfg(target_os = "linux")]
pub(crate) mod landlock;
mod launch;
pub(crate) mod policy;
mod process;
pub(crate) mod shell;
#[cfg(target_os = "linux")]
mod starter;
#[cfg(target_os = "linux")]
mod syscalls;
pub(crate) mod tree;
pub(crate) mod undumpable;

pub use availability::Availability;
pub use launch::Launch;
pub(crate) use launch::{Child, Io};
pub(crate) use policy::{Places, Policy};
pub(crate) use process::{
    ConfineError, Confinement, keep_inherited_descriptors, keep_orch_private, start,
};
pub use tree::ProcessTree;
