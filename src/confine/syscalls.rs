//! The system calls a confined process may not make, beyond what Landlock
//! covers: a seccomp filter entered with the ruleset.
//!
//! Landlock holds the contents and names of files, signals and tracing,
//! but not these:
//!
//! - resource limits of another process (`prlimit64` with a pid): a limit
//!   on orch's file size or CPU time kills it, and a core dump of it (API
//!   keys in its memory) lands where orch may write;
//! - its priority, scheduling, CPU affinity or I/O priority (`setpriority`,
//!   `sched_set*`, `ioprio_set` aimed at anyone but the caller: another
//!   pid, a process group, a user);
//! - the kernel keyrings (`keyctl`, `add_key`, `request_key`), which may
//!   hold the user's credentials;
//! - System V shared memory, semaphores and message queues, and POSIX
//!   message queues: they are shared by every process of the user (or
//!   every root process), outside any file tree;
//! - typing into a terminal (`TIOCSTI`, `TIOCLINUX` on any descriptor);
//! - a file's inode flags (`FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`: append
//!   only, no dump...);
//! - a setuid or setgid file, created as such (`open`, `creat`, `mknod`
//!   with those bits) or made so (`chmod`), at every level;
//! - `io_uring` and `openat2` look absent (`ENOSYS`): the first runs
//!   operations no filter sees, the second hides its mode behind a pointer;
//!   programs fall back to the plain calls;
//! - a file's metadata, which the owner may change whatever the
//!   directory's rules: under `read-only` no mode, owner or extended
//!   attribute changes at all (a `chmod +x` on a source file is a change to
//!   the sources); under `workspace-write` no setuid or setgid bit (a
//!   setuid program planted by a root agent would be a way to root for
//!   anyone). Timestamps stay allowed: lock files (Gemini CLI's, npm's)
//!   are kept alive by touching them, and the CLIs hang without it.
//!
//! A call aimed at the caller itself (pid or "who" 0) is allowed: that is
//! how programs set their own limits and priorities.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::toolset::Permission;

type Rules = Vec<SeccompRule>;
type Error = seccompiler::BackendError;

/// Calls numbered alike on every architecture (added after Linux 5.1) that
/// the `libc` crate does not name yet.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u64 = 0x401C_5820;

/// The filter for a confined permission level, as a BPF program ready to
/// be entered by a thread that has `no_new_privs` set (compiled once per
/// level and kept).
///
/// Two programs, entered in turn: the refusals (`EPERM`), and the calls
/// that look absent (`ENOSYS`, so that programs fall back to the plain
/// calls the first can see into): `io_uring`, whose operations (setting
/// extended attributes, creating files with any mode) no filter sees, and
/// `openat2`, whose mode is behind a pointer.
pub fn filter(permission: Permission) -> Result<Vec<BpfProgram>, Error> {
    static COMPILED: std::sync::Mutex<BTreeMap<Permission, Vec<BpfProgram>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(programs) = compiled.get(&permission) {
        return Ok(programs.clone());
    }
    let programs = vec![refusals(permission)?, absent()?];
    compiled.insert(permission, programs.clone());
    Ok(programs)
}

fn absent() -> Result<BpfProgram, Error> {
    let rules: BTreeMap<i64, Rules> = [
        (libc::SYS_io_uring_setup, Vec::new()),
        (libc::SYS_openat2, Vec::new()),
    ]
    .into_iter()
    .collect();
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch(),
    )?
    .try_into()
}

fn refusals(permission: Permission) -> Result<BpfProgram, Error> {
    let mut rules: BTreeMap<i64, Rules> = BTreeMap::new();
    // Aimed at another process.
    rules.insert(libc::SYS_prlimit64, arg_not(0, 0)?);
    rules.insert(libc::SYS_sched_setaffinity, arg_not(0, 0)?);
    rules.insert(libc::SYS_sched_setscheduler, arg_not(0, 0)?);
    rules.insert(libc::SYS_sched_setparam, arg_not(0, 0)?);
    rules.insert(libc::SYS_sched_setattr, arg_not(0, 0)?);
    // setpriority(which, who, prio): only PRIO_PROCESS (0) of itself.
    let mut priority = arg_not(0, libc::PRIO_PROCESS as u64)?;
    priority.extend(arg_not(1, 0)?);
    rules.insert(libc::SYS_setpriority, priority);
    // ioprio_set(which, who, ioprio): only IOPRIO_WHO_PROCESS (1) of itself.
    let mut ioprio = arg_not(0, 1)?;
    ioprio.extend(arg_not(1, 0)?);
    rules.insert(libc::SYS_ioprio_set, ioprio);
    // Always refused (an empty rule list matches every call).
    for call in [
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ] {
        rules.insert(call, Vec::new());
    }
    let mut ioctl = Rules::new();
    for request in [
        TIOCSTI,
        TIOCLINUX,
        FS_IOC_SETFLAGS,
        FS_IOC32_SETFLAGS,
        FS_IOC_FSSETXATTR,
    ] {
        ioctl.extend(arg_is(1, request)?);
    }
    rules.insert(libc::SYS_ioctl, ioctl);
    // No setuid or setgid file made at creation either, at any level: the
    // mode of a file created by open/openat/creat/mknod (the kernel strips
    // the bits from a file written later by a process without
    // capabilities, but not from an empty one or a node).
    for (call, flags, mode) in create_calls() {
        let mut special = Rules::new();
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            let has_bit = SeccompCondition::new(
                mode,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(u64::from(bit)),
                u64::from(bit),
            )?;
            match flags {
                // Only a call that creates uses its mode argument.
                Some(flags) => {
                    for creates in [libc::O_CREAT, libc::O_TMPFILE & !libc::O_DIRECTORY] {
                        special.push(SeccompRule::new(vec![
                            SeccompCondition::new(
                                flags,
                                SeccompCmpArgLen::Dword,
                                SeccompCmpOp::MaskedEq(creates as u64),
                                creates as u64,
                            )?,
                            has_bit.clone(),
                        ])?);
                    }
                }
                None => special.push(SeccompRule::new(vec![has_bit])?),
            }
        }
        rules.insert(call, special);
    }
    match permission {
        Permission::ReadOnly => {
            for call in metadata_calls() {
                rules.insert(call, Vec::new());
            }
        }
        _ => {
            for (call, mode) in mode_calls() {
                let mut special = Rules::new();
                for bit in [libc::S_ISUID, libc::S_ISGID] {
                    special.push(SeccompRule::new(vec![SeccompCondition::new(
                        mode,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(u64::from(bit)),
                        u64::from(bit),
                    )?])?);
                }
                rules.insert(call, special);
            }
        }
    }
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch(),
    )?
    .try_into()
}

/// Matches when argument `arg` is not `value`.
fn arg_not(arg: u8, value: u64) -> Result<Rules, Error> {
    Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        value,
    )?])?])
}

/// Matches when argument `arg` is `value`.
fn arg_is(arg: u8, value: u64) -> Result<Rules, Error> {
    Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        value,
    )?])?])
}

/// The calls that set a mode, with the index of their mode argument.
fn mode_calls() -> Vec<(i64, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_chmod, 1));
    calls
}

/// The calls that create a file with a mode: the index of their flags
/// argument (when they have one) and of their mode argument.
fn create_calls() -> Vec<(i64, Option<u8>, u8)> {
    let mut calls = vec![(libc::SYS_openat, Some(2), 3), (libc::SYS_mknodat, None, 2)];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_open, Some(1), 2),
        (libc::SYS_creat, None, 1),
        (libc::SYS_mknod, None, 1),
    ]);
    calls
}

/// Every call that changes a file's mode, owner or extended attributes.
fn metadata_calls() -> Vec<i64> {
    let mut calls: Vec<i64> = mode_calls().into_iter().map(|(c, _)| c).collect();
    calls.extend([
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
    ]);
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_chown, libc::SYS_lchown]);
    calls
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
