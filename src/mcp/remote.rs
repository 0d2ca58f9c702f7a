//! A remote MCP server of the pipeline's (streamable HTTP), served to one
//! attempt through its endpoint: the CLI speaks stdio to its relay, orch
//! posts each message to the server with the server's headers (its
//! credentials, which never reach the agent) and writes back what it
//! answers (one JSON message, or the events of a stream). orch holds the
//! server to the tools the ToolSet grants on it, as for a stdio server.
//! The server's own requests to the client (a stream the client would open
//! with GET) are not carried.

use std::io::{BufRead, BufReader as StdBufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::host::{ServerSpawn, ServerTransport};
use super::proxy::{Awaited, check_request, narrow_answer};
use super::wire::MAX_MESSAGE;

/// How long one exchange with the server may take.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(300);

/// How long ending the session (`DELETE`) may take.
const END_LIMIT: Duration = Duration::from_secs(5);

/// How often the poster looks whether its client is still there while an
/// exchange runs.
const GONE_CHECK: Duration = Duration::from_millis(50);

/// What goes back to the client: the server's answers (narrowed where the
/// grant limits its tools, under the client's ids) or orch's own answers,
/// which already carry the client's id.
enum Back {
    Server(String),
    Orch(String),
}

/// The server's session, as its answers set it.
#[derive(Default)]
struct Session {
    id: Option<String>,
    version: Option<String>,
    /// The poster has stopped (and ended the session it knew of): a
    /// session an exchange left running learns of later is ended there.
    ended: bool,
}

/// The remote server one connection posts to.
struct Server {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    session: std::sync::Mutex<Session>,
    name: String,
    /// The connection's place at its endpoint: held by every exchange
    /// (through this server), so given back when the last has ended.
    _slot: super::host::Slot,
}

/// Serve a client with `spawn`'s remote server. The connection's `slot`
/// is given back when the last of its exchanges has ended, those left
/// running after the client went included.
pub(crate) async fn serve<R, W>(
    from_client: R,
    mut to_client: W,
    spawn: ServerSpawn,
    slot: super::host::Slot,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let ServerTransport::Http { url, headers } = spawn.transport.clone() else {
        return;
    };
    let scope = spawn.tools.clone();
    let awaited: Arc<Awaited> = Default::default();
    let server = Arc::new(Server {
        agent: ureq::Agent::config_builder()
            .timeout_global(Some(EXCHANGE_LIMIT))
            .http_status_as_error(false)
            .build()
            .into(),
        url,
        headers,
        session: Default::default(),
        name: spawn.name.clone(),
        _slot: slot,
    });
    // Messages to post, in order, on a thread of their own (the HTTP
    // client blocks), a few at most waiting (the client waits meanwhile:
    // what it sends is not orch's memory to fill); what comes back, to the
    // client. A cancel waits its turn like any message: posted beside the
    // request it cancels, a server may leave that request's answer open
    // and every later message behind it (round z2). When the client's
    // input ends, what it sent is still posted (it may be reading the
    // answers). Once it is gone (writing back to it failed, or its
    // connection ended with its attempt), nothing more is posted, the
    // exchange in flight is dropped and the session ended at once.
    let (post_tx, post_rx) = mpsc::channel::<Vec<u8>>(POST_QUEUE);
    let (back_tx, mut back_rx) = mpsc::channel::<Back>(64);
    let client_gone = Arc::new(AtomicBool::new(false));
    // Also when this connection's task is dropped (its attempt ended) with
    // the reader waiting for room in the queue.
    let _gone = GoneOnDrop(Arc::clone(&client_gone));
    let poster = {
        let back_tx = back_tx.clone();
        let name = spawn.name.clone();
        let client_gone = Arc::clone(&client_gone);
        let live = Poster::start();
        std::thread::Builder::new()
            .name(format!("mcp-{name}"))
            .spawn(move || {
                let _live = live;
                post_all(&server, post_rx, back_tx, &client_gone);
            })
    };
    if poster.is_err() {
        return;
    }
    let writer = {
        let scope = scope.clone();
        let awaited = Arc::clone(&awaited);
        let client_gone = Arc::clone(&client_gone);
        tokio::spawn(async move {
            while let Some(back) = back_rx.recv().await {
                let line = match back {
                    Back::Server(line) => {
                        narrow_answer(line.trim_end().as_bytes(), scope.as_deref(), &awaited)
                    }
                    Back::Orch(line) => line,
                };
                if to_client.write_all(line.as_bytes()).await.is_err() {
                    client_gone.store(true, Ordering::SeqCst);
                    break;
                }
            }
            let _ = to_client.shutdown().await;
        })
    };
    let mut reader = BufReader::with_capacity(64 * 1024, from_client);
    let mut buf = Vec::new();
    while let Ok((n, _)) = crate::lines::read_capped(&mut reader, &mut buf, MAX_MESSAGE).await {
        if n == 0 {
            break;
        }
        match check_request(&buf, scope.as_deref(), &awaited, &spawn.name) {
            // One message a post (a cancel of a request the client sent
            // twice under one id comes as one line for each).
            Ok(lines) => {
                let mut sent = true;
                for m in lines.split(|b| *b == b'\n') {
                    sent = sent && post_tx.send(m.to_vec()).await.is_ok();
                }
                if !sent {
                    break;
                }
            }
            Err(answer) if !answer.is_empty() => {
                if back_tx.send(Back::Orch(answer)).await.is_err() {
                    break;
                }
            }
            Err(_) => {}
        }
    }
    drop(post_tx);
    drop(back_tx);
    let _ = writer.await;
}

/// Marks the client gone when dropped.
struct GoneOnDrop(Arc<AtomicBool>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The posters still running (each ends its server's session as it
/// stops), so that orch can give them a moment before it exits.
static POSTERS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// One running poster, counted in [`POSTERS`] while it lives.
struct Poster;

impl Poster {
    fn start() -> Poster {
        *POSTERS.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Poster
    }
}

impl Drop for Poster {
    fn drop(&mut self) {
        let mut n = POSTERS.0.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(1);
        POSTERS.1.notify_all();
    }
}

/// Wait, at most `limit`, for every poster to end its session: called
/// once the run's connections are dropped, before orch exits (which would
/// leave the sessions open on their servers).
pub(crate) fn settle(limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut n = POSTERS.0.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        n = POSTERS
            .1
            .wait_timeout(n, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// At most this many messages wait to be posted to a remote server.
const POST_QUEUE: usize = 8;

/// Post one message to the server, with its headers and the session's.
fn post(server: &Server, message: &[u8]) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    let mut req = server
        .agent
        .post(&server.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in &server.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    {
        let session = server.session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = &session.id {
            req = req.header("Mcp-Session-Id", s.as_str());
        }
        if let Some(v) = &session.version {
            req = req.header("MCP-Protocol-Version", v.as_str());
        }
    }
    req.send(message)
}

/// Post each message to the server, in order; send back what it answers.
/// Each exchange runs on a thread of its own, so that the client's leaving
/// ends the session at once (a server may hold a stream open for the whole
/// `EXCHANGE_LIMIT`); a dropped exchange ends by itself within that limit.
fn post_all(
    server: &Arc<Server>,
    mut messages: mpsc::Receiver<Vec<u8>>,
    back: mpsc::Sender<Back>,
    client_gone: &AtomicBool,
) {
    while let Some(message) = messages.blocking_recv() {
        if client_gone.load(Ordering::SeqCst) {
            break;
        }
        let Some(answers) = exchange_while_there(server, message, client_gone) else {
            break;
        };
        for a in answers {
            {
                let mut session = server.session.lock().unwrap_or_else(|e| e.into_inner());
                if session.version.is_none()
                    && let Ok(v) = serde_json::from_str::<Value>(&a)
                    && let Some(p) = v["result"]["protocolVersion"].as_str()
                {
                    session.version = Some(p.to_string());
                }
            }
            if back.blocking_send(Back::Server(a + "\n")).is_err() {
                // The client is gone: the session still ends (below).
                client_gone.store(true, Ordering::SeqCst);
            }
        }
    }
    let id = {
        let mut session = server.session.lock().unwrap_or_else(|e| e.into_inner());
        session.ended = true;
        session.id.clone()
    };
    if let Some(s) = id {
        end_session(server, &s);
    }
}

/// Tell the server the session `id` is over (`DELETE`).
fn end_session(server: &Server, id: &str) {
    let _ = server
        .agent
        .delete(&server.url)
        .header("Mcp-Session-Id", id)
        .config()
        .timeout_global(Some(END_LIMIT))
        .build()
        .call();
}

/// One exchange, waited for while the client is there: its answers, or
/// `None` when the client left first (the exchange is left to end alone).
fn exchange_while_there(
    server: &Arc<Server>,
    message: Vec<u8>,
    client_gone: &AtomicBool,
) -> Option<Vec<String>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let id = serde_json::from_slice::<Value>(&message)
        .ok()
        .and_then(|v| v.get("id").cloned());
    let on_its_own = Arc::clone(server);
    let its_id = id.clone();
    let started = std::thread::Builder::new()
        .name(format!("mcp-{}-post", server.name))
        .spawn(move || {
            let _ = tx.send(exchange(&on_its_own, &message, its_id));
        });
    if let Err(e) = started {
        return Some(error_for(id, &server.name, &e.to_string()));
    }
    loop {
        match rx.recv_timeout(GONE_CHECK) {
            Ok(answers) => return Some(answers),
            Err(RecvTimeoutError::Timeout) if client_gone.load(Ordering::SeqCst) => return None,
            Err(RecvTimeoutError::Timeout) => {}
            // The exchange's thread died without a word.
            Err(RecvTimeoutError::Disconnected) => {
                return Some(error_for(id, &server.name, "the exchange failed"));
            }
        }
    }
}

/// Post one message (`id` its JSON-RPC id, if a request) and read what
/// the server answers to it.
fn exchange(server: &Server, message: &[u8], id: Option<Value>) -> Vec<String> {
    let name = server.name.as_str();
    match post(server, message) {
        Ok(mut resp) => {
            if let Some(s) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                let ended = {
                    let mut session = server.session.lock().unwrap_or_else(|e| e.into_inner());
                    let new = session.id.as_deref() != Some(s);
                    session.id = Some(s.to_string());
                    session.ended && new
                };
                // Left running by a client that is gone, after the
                // poster ended the session it knew of: this one ends here.
                if ended {
                    end_session(server, s);
                    return Vec::new();
                }
            }
            let status = resp.status().as_u16();
            let kind = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let body = resp.body_mut().as_reader();
            if status == 202 || status == 204 {
                Vec::new()
            } else if !(200..300).contains(&status) {
                error_for(id, name, &format!("it answered HTTP {status}"))
            } else if kind.starts_with("text/event-stream") {
                events(body)
            } else {
                let mut text = String::new();
                let _ = body.take(MAX_MESSAGE as u64).read_to_string(&mut text);
                json_lines(&text)
            }
        }
        Err(e) => error_for(id, name, &e.to_string()),
    }
}

/// A JSON body as message lines (one message, or a batch).
fn json_lines(text: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items.into_iter().map(|v| v.to_string()).collect(),
        Ok(v) => vec![v.to_string()],
        Err(_) => Vec::new(),
    }
}

/// The messages of an event stream (each event's `data`).
fn events(body: impl Read) -> Vec<String> {
    let mut out = Vec::new();
    let mut data = String::new();
    for line in StdBufReader::new(body.take(MAX_MESSAGE as u64 * 4)).lines() {
        let Ok(line) = line else { break };
        if line.is_empty() {
            if !data.is_empty() {
                out.extend(json_lines(&data));
                data.clear();
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    if !data.is_empty() {
        out.extend(json_lines(&data));
    }
    out
}

/// The answer to a request the server could not be asked (none for a
/// notification).
fn error_for(id: Option<Value>, server: &str, why: &str) -> Vec<String> {
    match id {
        Some(id) => vec![
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
                   "message": format!("orch could not reach MCP server `{server}`: {why}")}})
            .to_string(),
        ],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stream_is_read_as_its_messages() {
        let body = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n: ping\n\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"x\"}\n\n";
        let got = events(body.as_bytes());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1], r#"{"jsonrpc":"2.0","method":"x"}"#);
        assert_eq!(json_lines("[1, 2]"), ["1", "2"]);
        assert!(error_for(None, "s", "x").is_empty());
        let e: Value = serde_json::from_str(&error_for(Some(json!(3)), "s", "down")[0]).unwrap();
        assert_eq!(e["error"]["code"], -32603);
    }
}
