//! Ending an agent's process group: TERM first, so the CLI can stop on its
//! own terms, then KILL once the grace is over (or at once, when the run
//! is stopped for good or the agent's own process has exited).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// Sends a signal to a process group (the real one, or a fake in tests).
pub(crate) trait GroupSignal {
    fn signal(&self, group: Pid, signal: Signal);
}

/// The kernel's `killpg`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Killpg;

impl GroupSignal for Killpg {
    fn signal(&self, group: Pid, signal: Signal) {
        let _ = nix::sys::signal::killpg(group, signal);
    }
}

/// Where the ending of one process group stands.
#[derive(Debug)]
pub(crate) struct Termination<S: GroupSignal = Killpg> {
    group: Option<Pid>,
    grace: Duration,
    /// When TERM was sent.
    asked: Option<Instant>,
    /// KILL was sent once the grace was over (or at once).
    forced: bool,
    send: S,
}

impl Termination<Killpg> {
    pub(crate) fn new(group: Option<Pid>, grace: Duration) -> Termination<Killpg> {
        Termination::with(group, grace, Killpg)
    }
}

impl<S: GroupSignal> Termination<S> {
    pub(crate) fn with(group: Option<Pid>, grace: Duration, send: S) -> Termination<S> {
        Termination {
            group,
            grace,
            asked: None,
            forced: false,
            send,
        }
    }

    /// Ask the group to stop (TERM), once; the grace runs from `now`.
    pub(crate) fn ask(&mut self, now: Instant) {
        if self.asked.is_some() {
            return;
        }
        if let Some(g) = self.group {
            self.send.signal(g, Signal::SIGTERM);
            self.asked = Some(now);
        }
    }

    /// Whether the group was asked to stop.
    #[cfg(test)]
    pub(crate) fn asked(&self) -> bool {
        self.asked.is_some()
    }

    /// KILL the group, once, when it was asked to stop and the grace is
    /// over at `now`, or `at_once`.
    pub(crate) fn escalate(&mut self, now: Instant, at_once: bool) {
        if self.forced {
            return;
        }
        if let (Some(at), Some(g)) = (self.asked, self.group)
            && (now.duration_since(at) > self.grace || at_once)
        {
            self.send.signal(g, Signal::SIGKILL);
            self.forced = true;
        }
    }

    /// KILL what is left of the group now, once: its leader has ended and
    /// is about to be reaped (the rest goes with it, even what ignores
    /// TERM). Nothing is sent after: once the leader is reaped, the
    /// group's number may be a new process's.
    /// The group it killed (none when it was killed already).
    pub(crate) fn kill(&mut self) -> Option<Pid> {
        let g = self.group.take()?;
        self.send.signal(g, Signal::SIGKILL);
        Some(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Sent(RefCell<Vec<Signal>>);

    impl GroupSignal for &Sent {
        fn signal(&self, _group: Pid, signal: Signal) {
            self.0.borrow_mut().push(signal);
        }
    }

    const GRACE: Duration = Duration::from_secs(5);

    #[test]
    fn term_then_kill_after_the_grace_each_once() {
        let sent = Sent::default();
        let t0 = Instant::now();
        let mut t = Termination::with(Some(Pid::from_raw(42)), GRACE, &sent);
        t.escalate(t0, false);
        assert!(sent.0.borrow().is_empty(), "nothing before it is asked");
        t.ask(t0);
        t.ask(t0 + Duration::from_secs(1));
        assert_eq!(*sent.0.borrow(), [Signal::SIGTERM]);
        t.escalate(t0 + Duration::from_secs(4), false);
        assert_eq!(*sent.0.borrow(), [Signal::SIGTERM], "within the grace");
        t.escalate(t0 + Duration::from_secs(6), false);
        t.escalate(t0 + Duration::from_secs(7), false);
        assert_eq!(*sent.0.borrow(), [Signal::SIGTERM, Signal::SIGKILL]);
    }

    #[test]
    fn at_once_skips_the_grace_and_a_gone_leader_takes_the_group() {
        let sent = Sent::default();
        let t0 = Instant::now();
        let mut t = Termination::with(Some(Pid::from_raw(42)), GRACE, &sent);
        t.ask(t0);
        t.escalate(t0, true);
        assert_eq!(*sent.0.borrow(), [Signal::SIGTERM, Signal::SIGKILL]);
        t.kill();
        assert_eq!(sent.0.borrow().len(), 3);
    }

    #[test]
    fn nothing_is_sent_once_the_leader_is_gone() {
        let sent = Sent::default();
        let t0 = Instant::now();
        let mut t = Termination::with(Some(Pid::from_raw(42)), GRACE, &sent);
        assert_eq!(t.kill(), Some(Pid::from_raw(42)));
        assert_eq!(t.kill(), None);
        t.ask(t0);
        t.escalate(t0 + GRACE * 2, true);
        assert_eq!(*sent.0.borrow(), [Signal::SIGKILL]);
    }

    #[test]
    fn without_a_group_nothing_is_sent() {
        let sent = Sent::default();
        let t0 = Instant::now();
        let mut t = Termination::with(None, GRACE, &sent);
        t.ask(t0);
        t.escalate(t0 + GRACE * 2, true);
        t.kill();
        assert!(sent.0.borrow().is_empty());
        assert!(!t.asked());
    }
}
