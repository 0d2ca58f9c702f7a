//! Blocking work (a git subprocess, a file read, an SQLite query) done
//! from async code without holding up the runtime's few workers, which
//! serve every attempt's endpoints and supervise the agents.

/// Run `work` where it may block: in place, once the runtime has moved this
/// worker's other tasks to another thread (`block_in_place`), on tokio's
/// multi-threaded runtime; as it is elsewhere (a one-thread runtime, or no
/// runtime at all, where there is nothing else to hold up).
pub(crate) fn in_place<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
