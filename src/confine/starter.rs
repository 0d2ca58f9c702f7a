//! The threads that start confined processes.
//!
//! A confined process is started by a thread that holds most of its
//! confinement already, which the child inherits at fork (see
//! [`super::process::start`]): no capability a program it starts could
//! gain (the child gives up its own before it executes), `no_new_privs` and the
//! system-call filter ([`super::syscalls`]), the same for every agent of a
//! permission level. Entering the filter costs the kernel a compilation
//! and a pass of the program over every system-call number (its cache of
//! calls always allowed), about a fifth of a millisecond per agent start.
//! So one thread per level, the level's *starter*, enters them once, and
//! creates the thread of each start: a thread begins with its creator's
//! filter, `no_new_privs` and capabilities (the kernel copies them at
//! `clone`; the filter is the same program, shared), and none of them can
//! be lifted. That thread checks it has them, starts the agent and ends;
//! the agent's own process enters the attempt's Landlock ruleset, between
//! fork and exec. No thread of orch's holds a Landlock domain (an agent
//! may signal any thread of its own domain); the starter does nothing
//! else, and orch's other threads are not confined at all.

use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};

use crate::model::Permission;

/// Work for a starter: run on a new thread of its own, then say so.
struct Job {
    /// The work (its lifetime erased: see [`run`]). Declared before
    /// `done`, so dropped before it, wherever the job ends.
    work: Box<dyn FnOnce() + Send + 'static>,
    /// Dropped once `work` is gone, run or not: [`run`] waits for it.
    done: SyncSender<()>,
}

/// The starters, one per level, made when first needed.
static STARTERS: Mutex<BTreeMap<Permission, Sender<Job>>> = Mutex::new(BTreeMap::new());

/// Run `work` on a new thread that holds the system-call filter of
/// `permission`, `no_new_privs` and no capability to pass on, and wait until it
/// has ended; what `work` returned, or why it could not run.
pub(super) fn run<T: Send>(
    permission: Permission,
    work: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    let jobs = starter(permission)?;
    let mut result: Option<T> = None;
    let slot = &mut result;
    let work: Box<dyn FnOnce() + Send + '_> = Box::new(move || *slot = Some(work()));
    // SAFETY: `work` borrows from this frame (the caller's `work` and
    // `result`). It is used and dropped on the starter's thread or the
    // thread it creates, and this function returns only after `done` is
    // dropped, which happens after `work` is (a `Job` drops its fields in
    // order, on every path: run, unwound, or never run). Nothing between
    // sending and waiting can unwind.
    let work: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(work) };
    let (done, finished) = sync_channel(1);
    if let Err(e) = jobs.send(Job { work, done }) {
        // The starter is gone: the job came back and is dropped here.
        drop(e);
        forget_starter(permission);
        return Err("the confining thread is gone".into());
    }
    let _ = finished.recv();
    result.ok_or_else(|| {
        "the starting thread ended early (it could not start, or it panicked)".into()
    })
}

/// The starter of `permission`, started when missing.
fn starter(permission: Permission) -> Result<Sender<Job>, String> {
    let mut starters = STARTERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(jobs) = starters.get(&permission) {
        return Ok(jobs.clone());
    }
    let program =
        super::syscalls::filter(permission).map_err(|e| format!("the system-call filter: {e}"))?;
    let (jobs, incoming) = std::sync::mpsc::channel::<Job>();
    let (ready, entered) = sync_channel::<Result<(), String>>(1);
    std::thread::Builder::new()
        .name("orch-confine".into())
        .spawn(move || {
            let entered = enter(&program).map_err(|e| e.to_string());
            let ok = entered.is_ok();
            let _ = ready.send(entered);
            if ok {
                serve(incoming);
            }
        })
        .map_err(|e| format!("cannot start the confining thread: {e}"))?;
    entered
        .recv()
        .map_err(|_| "the confining thread ended".to_string())??;
    starters.insert(permission, jobs.clone());
    Ok(jobs)
}

fn forget_starter(permission: Permission) {
    STARTERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&permission);
}

/// The starter's loop: a new thread for each job (it inherits what this
/// thread entered).
fn serve(incoming: Receiver<Job>) {
    for job in incoming {
        // On failure the job is dropped here, unrun: its caller hears.
        let _ = std::thread::Builder::new().spawn(move || {
            let Job { work, done } = job;
            // A panic ends `work` (dropping it) here, not the thread.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            drop(done);
        });
    }
}

/// Confine the calling thread for good, but for its file-system rules:
/// no capability to pass on, `no_new_privs`, the system-call filter. They hold for
/// this thread and every thread and process it starts afterwards.
fn enter(program: &seccompiler::BpfProgram) -> io::Result<()> {
    super::landlock::drop_capabilities()?;
    nix::sys::prctl::set_no_new_privs()?;
    // This thread only (not all of orch's).
    seccompiler::apply_filter(program).map_err(io::Error::other)
}

/// Whether the calling thread holds what a starter enters (checked by
/// each starting thread before it starts anything): `no_new_privs` and a
/// system-call filter.
pub(super) fn holds_the_filter() -> bool {
    nix::sys::prctl::get_no_new_privs() == Ok(true)
        // SAFETY: a prctl query with integer arguments (nix has no
        // wrapper for PR_GET_SECCOMP).
        && unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } == 2
}
