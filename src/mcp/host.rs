//! orch serves its tools itself, from `orch run`'s own process, outside
//! every sandbox: each attempt that is granted them gets an endpoint, a
//! Unix socket in the attempt's own directory, which the CLI reaches
//! through `orch mcp relay`, which it starts as a stdio MCP server and
//! which hands its pipes over to orch (see [`super::handover`]).
//!
//! Who is served is decided here, never by the agent: the endpoint was
//! opened for one attempt (its [`Caller`]: run, phase, agent, attempt,
//! scope, and for a judge the one claim it judges), and a connection is
//! admitted only from a process of that attempt's tree, as the kernel
//! tells (the peer's credentials, held by a pidfd, and its chain of
//! parents). A relay started anywhere else (another attempt's agent, a
//! shell) is refused before it reads a byte; so is one started before the
//! attempt's process was known.
//!
//! The pipeline's own stdio MCP servers are reached the same way: the CLI
//! starts a relay, and orch starts the server for each admitted
//! connection, confined at the phase's level, with the server's own
//! environment (its credentials) and never the agent's: what a server's
//! `env` holds is not in the agent's environment, where its shell could
//! print it. orch also holds the server to the tools the ToolSet grants on
//! it (a call to another is refused, the list is narrowed).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use super::caller::Caller;
use super::ledger::Ledger;
use super::peer::Peer;
use super::server::OrchServer;
use super::wire::{self, Line, MAX_MESSAGE};
use crate::confine::ProcessTree;
use crate::store::{Reporter, Reports};

/// How long a connection waits for its attempt's process to be known
/// (it is, microseconds after the process starts; a relay cannot be
/// started by the attempt before that).
const LEADER_WAIT: Duration = Duration::from_secs(5);

/// The name of orch's endpoint in an attempt's folder of orch files.
pub(crate) const SOCKET: &str = "orch.sock";

/// The name of the endpoint of the pipeline's MCP server `server`.
pub(crate) fn server_socket(server: &str) -> String {
    let safe: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    format!("mcp-{safe}.sock")
}

/// An MCP server of the pipeline's, served to an attempt by orch: a stdio
/// server orch starts once per connection of the CLI, or a remote one orch
/// talks to with its headers.
#[derive(Debug, Clone)]
pub struct ServerSpawn {
    pub(crate) name: String,
    pub(crate) transport: ServerTransport,
    /// The tools the ToolSet grants on it (`None`: all).
    pub(crate) tools: Option<Vec<String>>,
}

/// How orch reaches a server of the pipeline's.
#[derive(Debug, Clone)]
pub(crate) enum ServerTransport {
    Stdio {
        argv: Vec<String>,
        /// Its whole environment, values filled in: what it needs to run
        /// (`PATH`, the locale, a home and temporary folder in `own`) and
        /// its own `env` from the pipeline, never the agent's.
        env: Vec<(String, String)>,
        /// Its own folder, beside the attempt's and out of the agent's
        /// reach (see [`crate::engine::assemble::server_dir`]): its working
        /// directory, made (with `home` and `tmp` in it) before it starts.
        own: PathBuf,
        /// Its git directory (in `own`), made before it starts.
        git: Box<crate::git::agents::AgentGit>,
        /// The attempt's confinement with `own` for the attempt's own
        /// directory (`None`: not confined).
        confinement: Option<crate::confine::Confinement>,
    },
    /// Streamable HTTP: orch posts the CLI's messages with these headers
    /// (values filled in), which never reach the agent.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Serves every endpoint of a run: where their records go and where
/// their claims and verdicts reach the engine.
pub struct Host {
    reports: Reports,
    ledger: Arc<Ledger>,
}

impl Host {
    /// A host recording through `reports` (any reporter: each endpoint
    /// reports as its own attempt).
    pub fn new(reports: Reports, ledger: Arc<Ledger>) -> Host {
        Host { reports, ledger }
    }

    pub(crate) fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// The endpoint of `caller`'s attempt at `socket`, admitting only
    /// processes of `tree`. It listens once [`Endpoint::open`] is called
    /// and stops when dropped.
    pub(crate) fn endpoint(
        &self,
        caller: Caller,
        socket: PathBuf,
        tree: Arc<ProcessTree>,
    ) -> Endpoint {
        let who = Reporter {
            run_id: caller.run.clone(),
            phase: caller.phase.clone(),
            agent: caller.agent.clone(),
            attempt: caller.attempt,
        };
        Endpoint::new(
            Backend::Orch {
                reports: self.reports.sharing(who),
                ledger: Arc::clone(&self.ledger),
                caller,
            },
            socket,
            tree,
        )
    }

    /// The endpoint at `socket` of the pipeline's server `spawn` for an
    /// attempt whose tree is `tree`.
    pub fn server_endpoint(
        &self,
        spawn: ServerSpawn,
        socket: PathBuf,
        tree: Arc<ProcessTree>,
    ) -> Endpoint {
        Endpoint::new(Backend::Server(spawn), socket, tree)
    }
}

/// What an endpoint serves.
enum Backend {
    /// orch's own tools, to this caller.
    Orch {
        reports: Reports,
        ledger: Arc<Ledger>,
        caller: Caller,
    },
    /// A stdio server of the pipeline's, started for each connection.
    Server(ServerSpawn),
}

/// One attempt's endpoint.
pub struct Endpoint {
    shared: Arc<Shared>,
    socket: PathBuf,
    task: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    backend: Backend,
    tree: Arc<ProcessTree>,
    /// The endpoint's [`Slot`]s taken: at most [`MAX_CONNECTIONS`].
    slots: Arc<AtomicUsize>,
}

impl Endpoint {
    fn new(backend: Backend, socket: PathBuf, tree: Arc<ProcessTree>) -> Endpoint {
        Endpoint {
            shared: Arc::new(Shared {
                backend,
                tree,
                slots: Default::default(),
            }),
            socket,
            task: Mutex::new(None),
        }
    }

    /// Listen (on the current tokio runtime), before the attempt's process
    /// starts. The socket's folder is made when missing.
    pub fn open(&self) -> io::Result<()> {
        let listener = bind(&self.socket)?;
        let shared = Arc::clone(&self.shared);
        let task = tokio::spawn(accept(listener, shared));
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        Ok(())
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Bind `socket` through its folder's descriptor (`/proc/self/fd/N/name`),
/// so its length is no limit (a socket path has at most 107 bytes) and no
/// link is followed to the folder; private to the user.
fn bind(socket: &Path) -> io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Err(io::Error::other("an endpoint needs a folder and a name"));
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let folder = crate::beneath::Root::open(dir)?;
    let via = folder.fd_path().join(name);
    let listener = std::os::unix::net::UnixListener::bind(&via)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&via, std::fs::Permissions::from_mode(0o600))?;
    }
    listener.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(listener)
}

/// At most this many connections to one endpoint at once: a CLI opens
/// one for each server, and each holds some of orch's memory (a line being
/// read, requests waiting for a server), which an agent opening thousands
/// would fill.
pub(super) const MAX_CONNECTIONS: usize = 16;

/// One of an endpoint's [`MAX_CONNECTIONS`] places, taken when a
/// connection is admitted and given back when everything of it has ended:
/// for a remote server, also the exchange it left running when its client
/// went (which ends alone, within its time limit), so that an agent
/// leaving connections mid-exchange cannot pile them up in orch.
pub(super) struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>) -> Slot {
        count.fetch_add(1, Ordering::SeqCst);
        Slot(Arc::clone(count))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn accept(listener: tokio::net::UnixListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // Reap finished connections first: only live ones count.
        while connections.try_join_next().is_some() {}
        match admit(&stream, &shared).await {
            // The attempt's own process, one connection too many: told so
            // (`BUSY`), where another process is told nothing.
            Some(_) if shared.slots.load(Ordering::SeqCst) >= MAX_CONNECTIONS => {
                let _ = stream.try_write(super::handover::BUSY);
                drop(stream);
            }
            Some(peer_cwd) => {
                let shared = Arc::clone(&shared);
                let slot = Slot::take(&shared.slots);
                connections.spawn(async move {
                    let Ok(conn) = take_over(stream).await else {
                        return;
                    };
                    match &shared.backend {
                        Backend::Orch {
                            reports,
                            ledger,
                            caller,
                        } => {
                            let server = OrchServer::with_peer(
                                caller.clone(),
                                reports.sharing(reports.reporter().clone()),
                                Arc::clone(ledger),
                                peer_cwd,
                            );
                            serve(conn.from, conn.to, server).await;
                            drop(slot);
                        }
                        Backend::Server(spawn) => {
                            let tree = Arc::clone(&shared.tree);
                            match &spawn.transport {
                                ServerTransport::Stdio { .. } => {
                                    super::proxy::serve(conn.from, conn.to, spawn.clone(), tree)
                                        .await;
                                    drop(slot);
                                }
                                ServerTransport::Http { .. } => {
                                    super::remote::serve(conn.from, conn.to, spawn.clone(), slot)
                                        .await
                                }
                            }
                        }
                    }
                });
            }
            None => drop(stream),
        }
        // Reap finished connections as we go.
        while connections.try_join_next().is_some() {}
    }
}

/// An admitted connection, as the relay handed it over: its standard
/// input and output (the pipes to the CLI), which orch reads and writes
/// itself; the relay waits on `_relay` until orch is done.
struct Conn {
    from: tokio::net::unix::pipe::Receiver,
    to: tokio::net::unix::pipe::Sender,
    _relay: UnixStream,
}

/// How long a relay has to say how it hands the connection over.
const HANDOVER_WAIT: Duration = Duration::from_secs(10);

/// Read the relay's hand-over (see [`super::handover`]).
async fn take_over(stream: UnixStream) -> io::Result<Conn> {
    use std::os::fd::AsRawFd;
    let got = tokio::time::timeout(HANDOVER_WAIT, async {
        loop {
            stream.readable().await?;
            match stream.try_io(tokio::io::Interest::READABLE, || {
                super::handover::recv(stream.as_raw_fd())
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                other => return other,
            }
        }
    })
    .await
    .map_err(|_| io::Error::other("the relay said nothing"))??;
    match got {
        Some((super::handover::FDS, mut fds)) if fds.len() == 2 => {
            let out = fds.pop().expect("two");
            let inp = fds.pop().expect("two");
            super::handover::nonblocking(&inp)?;
            super::handover::nonblocking(&out)?;
            let from = tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(inp)?;
            let to = tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(out)?;
            // Tell the relay its pipes are taken: it waits from now on.
            stream.writable().await?;
            stream.try_write(super::handover::TAKEN)?;
            Ok(Conn {
                from,
                to,
                _relay: stream,
            })
        }
        _ => Err(io::Error::other("not a relay's hand-over")),
    }
}

/// Whether the process that connected `stream` belongs to the attempt;
/// if so, its working directory (when readable).
async fn admit(stream: &UnixStream, shared: &Shared) -> Option<Option<PathBuf>> {
    let peer = Peer::of(stream).ok()?;
    // SAFETY: geteuid has no arguments.
    if peer.uid != nix::unistd::geteuid().as_raw() {
        return None;
    }
    let waited = tokio::time::Instant::now();
    while shared.tree.leader().is_none() {
        if waited.elapsed() > LEADER_WAIT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if !shared.tree.holds(peer.pid) {
        return None;
    }
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", peer.pid)).ok();
    // Checked while it ran: its number named it all along.
    peer.alive().then_some(cwd)
}

/// Serve one admitted connection until either side closes it: every line
/// the client sends goes through [`wire::judge`] before the protocol
/// library sees it.
async fn serve<R, W>(from_client: R, to_client: W, server: OrchServer)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let service = tokio::spawn(async move {
        if let Ok(running) = server.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    let (from_server, mut to_server) = tokio::io::split(ours);
    // The server's answers and orch's own to broken lines, each written
    // whole under the lock.
    let to_client = Arc::new(tokio::sync::Mutex::new(to_client));
    let out = {
        let to_client = Arc::clone(&to_client);
        tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(64 * 1024, from_server);
            let mut line: Vec<u8> = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_client.lock().await.write_all(&line).await.is_err() {
                    break;
                }
            }
        })
    };
    let mut reader = BufReader::with_capacity(64 * 1024, from_client);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let (n, cut) = match crate::lines::read_capped(&mut reader, &mut buf, MAX_MESSAGE).await {
            Ok(r) => r,
            Err(_) => break,
        };
        if n == 0 {
            break;
        }
        match wire::judge(&buf, cut) {
            Line::Pass(line) => {
                if to_server.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            Line::Answer(line) => {
                if to_client
                    .lock()
                    .await
                    .write_all(line.as_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Line::Skip => {}
        }
    }
    // The client is done: the server's input ends (a split half does not
    // close the pipe when dropped), it ends, and with it its answers.
    let _ = to_server.shutdown().await;
    drop(to_server);
    let _ = out.await;
    // Everything answered: the client's end of the connection closes.
    let _ = to_client.lock().await.shutdown().await;
    service.abort();
}
