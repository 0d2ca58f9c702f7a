//! The system calls a confined process may not make, beyond what Landlock
//! covers: a seccomp filter entered with the ruleset.
//!
//! Landlock holds the contents and names of files, and signals and tracing
//! between sandboxes,
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
//! - another process of the same sandbox, which Landlock does not keep
//!   apart, by tracing it or copying its descriptors (`ptrace`,
//!   `process_vm_readv`/`writev`, `pidfd_getfd`; its `/proc/<pid>/mem`
//!   stays readable, which no filter sees);
//! - `SIGUSR1`, sent by any call (or set for a descriptor's owner): it
//!   opens a Node CLI's inspector, through which code runs in the CLI;
//! - a new user namespace (`unshare`, `clone` with `CLONE_NEWUSER`), or
//!   any namespace joined (`setns`), where a process could hold every
//!   capability over what the namespace owns;
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
//!
//! The rules match system-call numbers, and on x86_64 the x32 ABI numbers
//! the same calls again with bit 0x40000000 set (`openat` is 257 and
//! `0x40000000 | 257`): on a kernel that runs x32 calls, each of them
//! would pass every rule below. So any x32 call kills the process first,
//! as a call from another architecture's table (32-bit `int 0x80`) does.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::model::Permission;

type Rules = Vec<SeccompRule>;
type Error = seccompiler::BackendError;

/// Calls numbered alike on every architecture (added after Linux 5.1) that
/// the `libc` crate does not name yet.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// `fcntl`'s command setting the signal a descriptor's owner gets (the
/// same number on every architecture; the `libc` crate does not name it).
const F_SETSIG: u64 = 10;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u64 = 0x401C_5820;

/// The filter for a confined permission level, as one BPF program ready
/// to be entered by a thread that has `no_new_privs` set.
///
/// Its parts run in turn: on x86_64 the x32 guard (kill), the refusals
/// (`EPERM`), and the calls that look absent (`ENOSYS`, so that programs
/// fall back to the plain calls the refusals can see into): `io_uring`,
/// whose operations (setting extended attributes, creating files with any
/// mode) no filter sees, and `openat2`, whose mode is behind a pointer.
/// Each part's "allow" goes on to the next part and any other answer is
/// final ([`chain`]): the guard's kill holds before any rule, and the
/// refusals and the absent calls name different calls, so the answer is
/// the one the kernel would give for the three as separate programs (it
/// runs each and takes the strictest). One program is entered (compiled,
/// checked and cached by the kernel) once instead of three times, and
/// every system call of the agent runs one program instead of three.
///
/// Entered once per level, by its starter ([`super::starter`]).
pub(super) fn filter(permission: Permission) -> Result<BpfProgram, Error> {
    Ok(chain(&parts(permission)?))
}

/// The filter each confined process enters itself, on top of its level's
/// ([`filter`]), after it was born in its attempt's cgroup and before it
/// executes: `clone3` looks absent (`ENOSYS`; C libraries fall back to
/// `clone`). With `CLONE_INTO_CGROUP` a process is born in the cgroup of a
/// folder descriptor, and the kernel asks only for write permission on
/// that cgroup's `cgroup.procs`, which a root agent has without any
/// capability and Landlock does not see (an `O_PATH` open, an inode
/// permission check): a process could be born in another attempt's
/// cgroup, or a spare one, and outlive its own attempt. orch's own start
/// of the process needs `clone3`, so the level's filter, which the
/// starting thread holds, allows it.
pub(super) fn born_elsewhere() -> Result<BpfProgram, Error> {
    SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch(),
    )?
    .try_into()
}

/// The parts of [`filter`], as separate programs.
fn parts(permission: Permission) -> Result<Vec<BpfProgram>, Error> {
    Ok(vec![
        #[cfg(target_arch = "x86_64")]
        x32_guard(),
        refusals(permission)?,
        absent()?,
    ])
}

/// One program running `programs` in turn: every "allow" of a program but
/// the last becomes a jump to the start of the next one; every other
/// answer (kill, an errno) is the program's. A compiled program's every
/// path ends in a return, and no jump leaves it, so each program is
/// unchanged but for where its "allow" leads.
fn chain(programs: &[BpfProgram]) -> BpfProgram {
    use seccompiler::sock_filter;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    let mut out = Vec::with_capacity(programs.iter().map(Vec::len).sum());
    for (n, program) in programs.iter().enumerate() {
        let last = n + 1 == programs.len();
        for (i, op) in program.iter().enumerate() {
            if !last && op.code == RET_K && op.k == libc::SECCOMP_RET_ALLOW {
                // To the next program: a jump counts from the instruction
                // after it.
                out.push(sock_filter {
                    code: JA,
                    jt: 0,
                    jf: 0,
                    k: (program.len() - i - 1) as u32,
                });
            } else {
                out.push(op.clone());
            }
        }
    }
    out
}

/// Kills the process on any x32 system call (x86_64 only).
///
/// Kill, not `ENOSYS`: nothing legitimate on an x86_64 machine makes one.
/// glibc's and musl's x86_64 builds, node (libuv) and every other 64-bit
/// program number their calls from the x86_64 table and never set the
/// bit, and a kernel without x32 (the usual default) answers such a call
/// with `ENOSYS` anyway, so no program relies on one succeeding. A process
/// that makes one on purpose is reaching around the rules; killing it
/// (`SIGSYS`) says so at once, as the architecture check does for
/// `int 0x80`, where an error code could be probed and ignored.
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> BpfProgram {
    use seccompiler::sock_filter;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    /// `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    /// Offsets of `nr` and `arch` in `struct seccomp_data`.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, k, jt, jf| sock_filter { code, jt, jf, k };
    vec![
        // Another architecture's table: killed, as in the other programs.
        op(LOAD, ARCH, 0, 0),
        op(JEQ, AUDIT_ARCH_X86_64, 1, 0),
        op(RET, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        op(LOAD, NR, 0, 0),
        // A negative number (-1 and below) is in no table: the kernel
        // answers ENOSYS without running anything, so it may pass.
        op(JGE, 0x8000_0000, 2, 0),
        // The x32 bit: kill.
        op(JSET, X32_SYSCALL_BIT, 0, 1),
        op(RET, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        op(RET, libc::SECCOMP_RET_ALLOW, 0, 0),
    ]
}

fn absent() -> Result<BpfProgram, Error> {
    let rules: BTreeMap<i64, Rules> = [
        // Its rings run file operations (setxattr, openat with any mode)
        // that no system-call filter sees; without a ring the other
        // io_uring calls have nothing to act on.
        (libc::SYS_io_uring_setup, Vec::new()),
        // Its mode is behind a pointer the filter cannot read; programs
        // fall back to openat, whose mode the refusals check.
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
    // Aimed at another process (pid not 0); Landlock's scoping covers
    // signals and tracing, not these.
    // A file-size or CPU limit on orch kills it; a core-size limit plus a
    // crash dumps its memory (the API keys) where the agent may write.
    rules.insert(libc::SYS_prlimit64, arg_not(0, 0)?);
    // Pinning orch or another agent to one CPU starves it.
    rules.insert(libc::SYS_sched_setaffinity, arg_not(0, 0)?);
    // Moving orch to SCHED_IDLE (or another's policy) starves it.
    rules.insert(libc::SYS_sched_setscheduler, arg_not(0, 0)?);
    // The same, through its real-time priority.
    rules.insert(libc::SYS_sched_setparam, arg_not(0, 0)?);
    // The same, through the newer call that sets both.
    rules.insert(libc::SYS_sched_setattr, arg_not(0, 0)?);
    // setpriority(which, who, prio): only PRIO_PROCESS (0) of itself, so
    // that no process group or user (orch's, the user's shell) is reniced.
    let mut priority = arg_not(0, libc::PRIO_PROCESS as u64)?;
    priority.extend(arg_not(1, 0)?);
    rules.insert(libc::SYS_setpriority, priority);
    // ioprio_set(which, who, ioprio): only IOPRIO_WHO_PROCESS (1) of
    // itself, for the same reason with the disk's time.
    let mut ioprio = arg_not(0, 1)?;
    ioprio.extend(arg_not(1, 0)?);
    rules.insert(libc::SYS_ioprio_set, ioprio);
    // Always refused (an empty rule list matches every call).
    for call in [
        // The kernel keyrings hold the user's credentials (Kerberos
        // tickets, ecryptfs and NFS keys) outside any file tree.
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        // System V shared memory is shared by every process of the user,
        // outside any file tree: another program's segment is reached by
        // its key alone.
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        // System V semaphores: the same sharing; holding another
        // program's can hang it.
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        // System V message queues: the same sharing, a channel to and
        // from unconfined programs.
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        // POSIX message queues: named in a filesystem (mqueue) that
        // Landlock does not cover, the same channel.
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
        // Another process of the same sandbox (Landlock allows it within
        // one domain): tracing the agent's CLI, reading or writing its
        // memory, copying one of its descriptors. Any of them makes the
        // CLI print lines of the agent's making on the stream orch reads
        // as the CLI's events, or takes that stream itself; the CLI's
        // streams are sockets so that no open through `/proc` does
        // (docs/confinement.md, "Lines that pass for the CLI's"). A
        // debugger (`gdb`, `strace`) does not work under orch.
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        // Joining a namespace: a user namespace the agent's uid owns (one
        // kept in a bind-mounted file, say) is joined without a
        // capability, and with every capability in it (an attacker's
        // review did). The filter cannot see what kind of namespace a
        // descriptor is, and no program needs `setns` inside a sandbox.
        libc::SYS_setns,
    ] {
        rules.insert(call, Vec::new());
    }
    let mut ioctl = Rules::new();
    for request in [
        // Pushes characters into a terminal's input: commands typed into
        // the user's shell, which runs them unconfined.
        TIOCSTI,
        // Its selection-paste subcommand types into a console the same way.
        TIOCLINUX,
        // Inode flags (append-only, immutable, no-dump) change what later
        // writers and backups do with a file; Landlock does not cover them.
        FS_IOC_SETFLAGS,
        // The same request in its 32-bit numbering.
        FS_IOC32_SETFLAGS,
        // The same flags (and project ids) through the xattr interface.
        FS_IOC_FSSETXATTR,
    ] {
        ioctl.extend(arg_is(1, request)?);
    }
    rules.insert(libc::SYS_ioctl, ioctl);
    // SIGUSR1, to any process: a Node program (Gemini CLI, the launchers of
    // Codex and Copilot) opens its inspector on it, a port on loopback
    // through which any process runs code inside the CLI (lines on its
    // stream that pass for its own, its tools without its rules). Each
    // call that sends a chosen signal, by its signal argument.
    for (call, signal) in [
        (libc::SYS_kill, 1),
        (libc::SYS_tkill, 1),
        (libc::SYS_tgkill, 2),
        (libc::SYS_rt_sigqueueinfo, 1),
        (libc::SYS_rt_tgsigqueueinfo, 2),
        (libc::SYS_pidfd_send_signal, 1),
    ] {
        rules.insert(call, arg_is(signal, libc::SIGUSR1 as u64)?);
    }
    // A new user namespace, in which the process holds every capability
    // (over what that namespace owns): no program the agent runs holds
    // one, and the kernel code reachable with them (mounts and network
    // stacks of its own, BPF, ...) is a frequent way to root. By `unshare`,
    // or `clone` (its first argument is the flags; `clone3` looks absent
    // to a confined process, see `born_elsewhere`).
    for call in [libc::SYS_unshare, libc::SYS_clone] {
        rules.insert(
            call,
            vec![SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(libc::CLONE_NEWUSER as u64),
                libc::CLONE_NEWUSER as u64,
            )?])?],
        );
    }
    // The same signal sent by the kernel for a descriptor (I/O ready, a
    // lease broken, a directory changed) to its owner, which `F_SETOWN`
    // makes any process: the signal is chosen by `F_SETSIG`.
    rules.insert(
        libc::SYS_fcntl,
        vec![SeccompRule::new(vec![
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, F_SETSIG)?,
            SeccompCondition::new(
                2,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::SIGUSR1 as u64,
            )?,
        ])?],
    );
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

/// The calls that set a mode, with the index of their mode argument:
/// every way to reach one, or the rule on the others is bypassed.
fn mode_calls() -> Vec<(i64, u8)> {
    let mut calls = vec![
        // By descriptor.
        (libc::SYS_fchmod, 1),
        // By path from a directory descriptor.
        (libc::SYS_fchmodat, 2),
        // The same with flags (Linux 6.6), used by newer libcs.
        (libc::SYS_fchmodat2, 2),
    ];
    // By path, the old call x86_64 still has (newer architectures don't).
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_chmod, 1));
    calls
}

/// The calls that create a file with a mode: the index of their flags
/// argument (when they have one) and of their mode argument.
fn create_calls() -> Vec<(i64, Option<u8>, u8)> {
    let mut calls = vec![
        // How every libc opens (and creates) files.
        (libc::SYS_openat, Some(2), 3),
        // Creates a node (a regular file, a FIFO) with the mode given.
        (libc::SYS_mknodat, None, 2),
    ];
    // The old calls x86_64 still has for the same (always creating, for
    // creat and mknod).
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
    // Modes: any mode change is a change to the sources (`chmod +x`).
    let mut calls: Vec<i64> = mode_calls().into_iter().map(|(c, _)| c).collect();
    calls.extend([
        // Owners (a root agent could give a file away, or take one).
        libc::SYS_fchown,
        libc::SYS_fchownat,
        // Extended attributes: labels and metadata other tools trust,
        // which Landlock does not cover.
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        // The same from a directory descriptor (Linux 6.13).
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
    ]);
    // Owners by path, the old calls x86_64 still has.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a classic BPF program answers for one call, as the kernel runs
    /// it over `struct seccomp_data` (the instructions seccompiler and the
    /// guard use; any other fails the test).
    fn run(program: &BpfProgram, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                0 => nr,
                4 => arch,
                8 | 12 => 0,
                o if (16..64).contains(&o) => {
                    let a = args[((o - 16) / 8) as usize];
                    if (o - 16) % 8 == 0 {
                        a as u32
                    } else {
                        (a >> 32) as u32
                    }
                }
                o => panic!("load at {o}"),
            }
        };
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let op = &program[pc];
            pc += 1;
            let code = u32::from(op.code);
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => acc = word(op.k),
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => acc &= op.k,
                c if c == libc::BPF_RET | libc::BPF_K => return op.k,
                c if c == libc::BPF_JMP | libc::BPF_JA => pc += op.k as usize,
                c if c & 0x07 == libc::BPF_JMP => {
                    let taken = match c & 0xf0 {
                        x if x == libc::BPF_JEQ => acc == op.k,
                        x if x == libc::BPF_JGT => acc > op.k,
                        x if x == libc::BPF_JGE => acc >= op.k,
                        x if x == libc::BPF_JSET => acc & op.k != 0,
                        _ => panic!("jump {c:#x}"),
                    };
                    pc += usize::from(if taken { op.jt } else { op.jf });
                }
                c => panic!("instruction {c:#x}"),
            }
        }
    }

    /// The strictest of several answers, as the kernel ranks them (kill
    /// first, allow last: the action bits compared as signed).
    fn strictest(answers: impl Iterator<Item = u32>) -> u32 {
        answers
            .min_by_key(|a| (a & libc::SECCOMP_RET_ACTION_FULL) as i32)
            .expect("answers")
    }

    /// The one program answers every call as the kernel would answer it
    /// with its parts entered one by one: every call number (plain, x32,
    /// negative), every architecture tag that matters, arguments that hit
    /// and miss each rule.
    #[test]
    fn the_chained_program_answers_as_its_parts() {
        let mut args: Vec<[u64; 6]> = vec![[0; 6]];
        for v in [
            1,
            2,
            3,
            0x5412,
            0x541C,
            // F_SETSIG and SIGUSR1 (both 10 on x86_64 and aarch64).
            F_SETSIG,
            libc::SIGUSR1 as u64,
            libc::CLONE_NEWUSER as u64,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64,
            0x4008_6602,
            0x4004_6602,
            0x401C_5820,
            u64::from(libc::S_ISUID),
            u64::from(libc::S_ISGID),
            0o4755,
            0o2755,
            0o755,
            libc::O_CREAT as u64,
            (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64,
            (libc::O_CREAT | libc::O_WRONLY) as u64,
            0xffff_ffff,
            1 << 32,
        ] {
            for i in 0..4 {
                let mut a = [0; 6];
                a[i] = v;
                args.push(a);
                let mut b = [0o4755; 6];
                b[i] = v;
                args.push(b);
            }
        }
        // Every argument one value (the fcntl rule needs two at once).
        for v in [F_SETSIG, libc::SIGUSR1 as u64] {
            args.push([v; 6]);
        }
        let arches = [
            0,
            62 | 0x8000_0000 | 0x4000_0000,
            183 | 0x8000_0000 | 0x4000_0000,
            243 | 0x8000_0000 | 0x4000_0000,
            3 | 0x4000_0000,
        ];
        for permission in [Permission::ReadOnly, Permission::WorkspaceWrite] {
            let parts = parts(permission).unwrap();
            let one = filter(permission).unwrap();
            assert_eq!(one.len(), parts.iter().map(Vec::len).sum::<usize>());
            let mut numbers: Vec<u32> = (0..600).collect();
            numbers.extend((0..600).map(|n| 0x4000_0000 | n));
            numbers.extend([u32::MAX, 0x8000_0000, 0x4000_0000 - 1]);
            let mut refused = 0;
            for &arch in &arches {
                for &nr in &numbers {
                    for a in &args {
                        let want = strictest(parts.iter().map(|p| run(p, nr, arch, *a)));
                        assert_eq!(
                            run(&one, nr, arch, *a),
                            want,
                            "{permission:?}: call {nr:#x}, arch {arch:#x}, args {a:?}"
                        );
                        refused += usize::from(want != libc::SECCOMP_RET_ALLOW);
                    }
                }
            }
            assert!(refused > 0);
        }
    }
}
