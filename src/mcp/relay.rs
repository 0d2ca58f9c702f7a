//! `orch mcp relay SOCKET`: what each CLI starts as orch's stdio MCP
//! server. It connects to the attempt's endpoint and hands orch its
//! standard input and output (the pipes to its CLI), which orch then reads
//! and writes itself; it waits until orch is done. orch's tools run in
//! `orch run` itself (see [`super::host`]). It holds no identity: orch knows which attempt it
//! serves from the endpoint and from the process that connected, so a
//! relay started anywhere but in that attempt's process tree gets nothing.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Why the relay could not serve its attempt.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelayError {
    #[error(
        "cannot reach orch at `{}`: {source} (the relay is started by an agent's CLI during `orch run`, for that attempt only)",
        socket.display()
    )]
    Unreachable {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot hand the connection over to orch: {0}")]
    Handover(std::io::Error),
    /// orch closed the connection: this process is not the attempt's.
    #[error(
        "orch closed `{}` without a word: it serves only the attempt it was opened for",
        socket.display()
    )]
    Refused { socket: PathBuf },
    /// orch serves no more connections of this attempt at once.
    #[error(
        "orch serves at most {} connections of an attempt to `{}` at once, and this attempt's processes hold them all (or calls of connections they left still run): close one and connect again",
        super::host::MAX_CONNECTIONS,
        socket.display()
    )]
    Busy { socket: PathBuf },
}

/// Relay standard input and output to `socket` until either side ends.
pub(crate) fn relay(socket: &Path) -> Result<(), RelayError> {
    let stream = connect(socket).map_err(|source| RelayError::Unreachable {
        socket: socket.to_path_buf(),
        source,
    })?;
    // Hand orch the pipes to the CLI: it reads and writes them itself,
    // and this process only waits for the session to end (orch closes the
    // connection then).
    if let Err(e) = super::handover::send(&stream, super::handover::FDS, &[0, 1]) {
        return Err(match e.kind() {
            // orch closed it at once: why, if it said.
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                closed(stream, socket)
            }
            _ => RelayError::Handover(e),
        });
    }
    wait_for_the_end(stream, socket)
}

/// Why orch closed the connection before taking the pipes: the byte it
/// left (`BUSY`), or none (this process is not the attempt's).
fn closed(mut stream: UnixStream, socket: &Path) -> RelayError {
    let mut byte = [0u8];
    match stream.read(&mut byte) {
        Ok(1) if byte[..] == *super::handover::BUSY => RelayError::Busy {
            socket: socket.to_path_buf(),
        },
        _ => refused(socket),
    }
}

/// After handing the pipes over: wait until orch closes the connection.
/// orch answers the hand-over with one byte once it took the pipes; a
/// connection closed without it was refused.
fn wait_for_the_end(mut stream: UnixStream, socket: &Path) -> Result<(), RelayError> {
    let mut byte = [0u8];
    match stream.read(&mut byte) {
        Ok(1) if byte[..] == *super::handover::TAKEN => {}
        Ok(1) if byte[..] == *super::handover::BUSY => {
            return Err(RelayError::Busy {
                socket: socket.to_path_buf(),
            });
        }
        _ => return Err(refused(socket)),
    }
    let mut rest = [0u8; 64];
    while matches!(stream.read(&mut rest), Ok(n) if n > 0) {}
    Ok(())
}

fn refused(socket: &Path) -> RelayError {
    RelayError::Refused {
        socket: socket.to_path_buf(),
    }
}

/// Connect to `socket`; a path too long for a socket address (107 bytes)
/// is reached through its folder's descriptor.
fn connect(socket: &Path) -> std::io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    if socket.as_os_str().as_bytes().len() < 100 {
        return UnixStream::connect(socket);
    }
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return UnixStream::connect(socket);
    };
    let folder = crate::beneath::Root::open(dir)?;
    UnixStream::connect(folder.fd_path().join(name))
}
