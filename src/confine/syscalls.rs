//! The system calls a confined process may not make, beyond what Landlock
//! covers: a seccomp filter entered with the ruleset.
//!
//! Landlock holds files, signals and tracing, but not these, which reach
//! other processes of the same user (orch among them) or the user's
//! secrets:
//!
//! - resource limits of another process (`prlimit64` with a pid): a limit
//!   on orch's file size or CPU time kills it, and a core dump of it (API
//!   keys in its memory) lands where orch may write;
//! - its priority, scheduling, CPU affinity or I/O priority (`setpriority`,
//!   `sched_set*`, `ioprio_set` aimed at someone else);
//! - the kernel keyrings (`keyctl`, `add_key`, `request_key`), which may
//!   hold the user's credentials.
//!
//! A call aimed at the caller itself (pid or "who" 0) is allowed: that is
//! how programs set their own limits and priorities.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The filter as a BPF program, ready to be entered by a thread that has
/// `no_new_privs` set.
pub fn filter() -> Result<BpfProgram, seccompiler::BackendError> {
    // Refused when argument `arg` (a pid or "who") names another process.
    let aimed_elsewhere = |arg: u8| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            0,
        )?])?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_prlimit64, aimed_elsewhere(0)?);
    rules.insert(libc::SYS_sched_setaffinity, aimed_elsewhere(0)?);
    rules.insert(libc::SYS_sched_setscheduler, aimed_elsewhere(0)?);
    rules.insert(libc::SYS_sched_setparam, aimed_elsewhere(0)?);
    rules.insert(libc::SYS_sched_setattr, aimed_elsewhere(0)?);
    rules.insert(libc::SYS_setpriority, aimed_elsewhere(1)?);
    rules.insert(libc::SYS_ioprio_set, aimed_elsewhere(1)?);
    // Always refused (an empty rule list matches every call).
    rules.insert(libc::SYS_keyctl, Vec::new());
    rules.insert(libc::SYS_add_key, Vec::new());
    rules.insert(libc::SYS_request_key, Vec::new());
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch(),
    )?
    .try_into()
}

#[cfg(target_arch = "x86_64")]
fn arch() -> TargetArch {
    TargetArch::x86_64
}

#[cfg(target_arch = "aarch64")]
fn arch() -> TargetArch {
    TargetArch::aarch64
}

#[cfg(target_arch = "riscv64")]
fn arch() -> TargetArch {
    TargetArch::riscv64
}
