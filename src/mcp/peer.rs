//! Who is at the other end of a Unix socket, as the kernel says: the
//! process that connected, held by a pidfd so that its number cannot be
//! given to another process while orch looks at it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected.
const SO_PEERPIDFD: libc::c_int = 77;

/// The process at the other end of a connection.
#[derive(Debug)]
pub(super) struct Peer {
    pub(crate) pid: i32,
    pub(crate) uid: u32,
    /// Held while orch checks the process (`None` on kernels that can
    /// give none).
    pidfd: Option<OwnedFd>,
}

impl Peer {
    /// The process that connected `socket`.
    pub(super) fn of(socket: &impl AsRawFd) -> io::Result<Peer> {
        let fd = socket.as_raw_fd();
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt into a ucred of the length given.
        if unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        let mut pidfd: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into an int of the length given.
        let got = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERPIDFD,
                (&mut pidfd as *mut libc::c_int).cast(),
                &mut len,
            )
        } == 0
            && pidfd >= 0;
        let pidfd = if got {
            // SAFETY: a fresh descriptor the kernel gave this process.
            Some(unsafe { OwnedFd::from_raw_fd(pidfd) })
        } else {
            // Older kernels: a pidfd of the number it had (the process may
            // have gone and the number been reused in between; `alive`
            // then tells nothing more than the number does).
            pidfd_open(cred.pid)
        };
        Ok(Peer {
            pid: cred.pid,
            uid: cred.uid,
            pidfd,
        })
    }

    /// Whether the process is still running: asked after checking it, so
    /// that its number still named it when it was checked.
    pub(super) fn alive(&self) -> bool {
        match &self.pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: poll on one pollfd, without waiting. A pidfd is
                // readable once its process has exited.
                let n = unsafe { libc::poll(&mut p, 1, 0) };
                n == 0
            }
            // Signal 0 only checks the process exists.
            None => nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), None).is_ok(),
        }
    }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor this process owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_is_the_process_that_connected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // Another process connects: python3 holds the connection open.
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(30)",
                path.to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        let (conn, _) = listener.accept().unwrap();
        let peer = Peer::of(&conn).unwrap();
        assert_eq!(peer.pid, child.id() as i32);
        // SAFETY: geteuid has no arguments.
        assert_eq!(peer.uid, nix::unistd::geteuid().as_raw());
        assert!(peer.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!peer.alive(), "gone once it exits");
    }
}
