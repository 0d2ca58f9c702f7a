//! `orch mcp relay SOCKET`: what each CLI starts as orch's stdio MCP
//! server. It only carries bytes between its standard input and output
//! and the attempt's endpoint; orch's tools run in `orch run` itself (see
//! [`super::host`]). It holds no identity: orch knows which attempt it
//! serves from the endpoint and from the process that connected, so a
//! relay started anywhere but in that attempt's process tree gets nothing.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Relay standard input and output to `socket` until either side ends.
pub fn relay(socket: &Path) -> Result<(), String> {
    let stream = connect(socket).map_err(|e| {
        format!(
            "cannot reach orch at `{}`: {e} (the relay is started by an agent's CLI during `orch run`, for that attempt only)",
            socket.display()
        )
    })?;
    let mut to_orch = stream
        .try_clone()
        .map_err(|e| format!("cannot use the connection: {e}"))?;
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut input = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match input.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if to_orch.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to_orch.shutdown(std::net::Shutdown::Write);
        })
        .map_err(|e| format!("cannot start the relay: {e}"))?;
    let mut from_orch = stream;
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got_any = false;
    loop {
        match from_orch.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got_any = true;
                if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    if !got_any {
        return Err(format!(
            "orch closed `{}` without a word: it serves only the attempt it was opened for",
            socket.display()
        ));
    }
    Ok(())
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
