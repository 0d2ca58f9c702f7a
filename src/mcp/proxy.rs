//! A stdio MCP server of the pipeline's, served to one attempt through its
//! endpoint: orch starts the server for the connection, confined at the
//! phase's level with the server's own environment, and carries the
//! messages between them line by line, holding the server to the tools the
//! ToolSet grants on it: a `tools/call` of another tool is answered with a
//! tool error (the server never sees it), and the answer to `tools/list`
//! lists only the granted ones. The server ends with the connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::pipe::{Receiver, Sender};
use tokio::sync::mpsc;

use super::host::{ServerSpawn, ServerTransport};
use super::wire::MAX_MESSAGE;
use crate::confine::{Child, Io, Launch, ProcessTree};

/// Serve a client (what it sends, where to answer) with a new process of
/// `spawn`, in `tree`.
pub(super) async fn serve<R, W>(
    from_client: R,
    mut to_client: W,
    spawn: ServerSpawn,
    tree: Arc<ProcessTree>,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Starting it waits until it executes: off the runtime's workers.
    let Some(mut child) = crate::blocking::in_place(|| start(&spawn, &tree)) else {
        let _ = to_client
            .write_all(
                error_line(
                    Value::Null,
                    &format!("orch could not start MCP server `{}`", spawn.name),
                )
                .as_bytes(),
            )
            .await;
        return;
    };
    let (Some(Ok(mut to_server)), Some(Ok(from_server))) = (
        child.stdin.take().map(Sender::from_owned_fd),
        child.stdout.take().map(Receiver::from_owned_fd),
    ) else {
        return;
    };
    let scope = spawn.tools.clone();
    // Ids of `tools/list` requests whose answers are narrowed.
    let awaited: Arc<Awaited> = Default::default();
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let writer = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if to_client.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    // The server's answers, narrowed where they list tools. When its
    // output ends (it exited), every request still waiting gets an error
    // and the client's side closes: a client is never left waiting.
    let (gone, mut server_gone) = tokio::sync::oneshot::channel::<()>();
    let answers = {
        let tx = tx.clone();
        let awaited = Arc::clone(&awaited);
        let scope = scope.clone();
        let name = spawn.name.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(from_server);
            let mut buf = Vec::new();
            while let Ok((n, _)) =
                crate::lines::read_capped(&mut reader, &mut buf, MAX_MESSAGE).await
            {
                if n == 0 {
                    break;
                }
                let line = narrow_answer(&buf, scope.as_deref(), &awaited);
                if tx.send(line).await.is_err() {
                    break;
                }
            }
            answer_waiting(&awaited, &name, &tx).await;
            let _ = gone.send(());
        })
    };
    let mut reader = BufReader::with_capacity(64 * 1024, from_client);
    let mut buf = Vec::new();
    loop {
        let read = tokio::select! {
            read = crate::lines::read_capped(&mut reader, &mut buf, MAX_MESSAGE) => read,
            _ = &mut server_gone => break,
            // The server exited, though its output may stay open (a child
            // of its holds it): what it wrote gets a moment to arrive,
            // then what still waits is answered all the same.
            Ok(()) = child.ended() => {
                server_ended(&mut server_gone, &answers, &awaited, &spawn.name, &tx).await;
                break;
            }
        };
        match read {
            Ok((0, _)) | Err(_) => break,
            Ok(_) => {}
        }
        match check_request(&buf, scope.as_deref(), &awaited, &spawn.name) {
            Ok(mut line) => {
                line.push(b'\n');
                // A write the server does not read (it exited, a child of
                // its holds its input) must not keep orch from seeing it
                // exit.
                let wrote = tokio::select! {
                    wrote = to_server.write_all(&line) => wrote.is_ok(),
                    Ok(()) = child.ended() => false,
                };
                if !wrote {
                    server_ended(&mut server_gone, &answers, &awaited, &spawn.name, &tx).await;
                    break;
                }
            }
            Err(answer) => {
                if tx.send(answer).await.is_err() {
                    break;
                }
            }
        }
    }
    drop(to_server);
    // Its whole process group (it leads one: `npx` and the node it starts,
    // a child holding its output), while it is not reaped yet: until then
    // the group's number names no other process.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    child.kill();
    // Reaped and forgotten by orch's registry at once.
    let _ = child.wait().await;
    answers.abort();
    drop(tx);
    let _ = writer.await;
}

/// How long the output of a server that exited is read before what still
/// waits is answered with an error.
const SERVER_END_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The server's process exited (or stopped reading): what it wrote gets
/// [`SERVER_END_GRACE`] to arrive (its output may stay open, a child of
/// its holding it), then what still waits is answered with an error.
async fn server_ended(
    server_gone: &mut tokio::sync::oneshot::Receiver<()>,
    answers: &tokio::task::JoinHandle<()>,
    awaited: &Awaited,
    name: &str,
    tx: &mpsc::Sender<String>,
) {
    if tokio::time::timeout(SERVER_END_GRACE, server_gone)
        .await
        .is_err()
    {
        answers.abort();
        answer_waiting(awaited, name, tx).await;
    }
}

/// Answer every request still waiting for server `name` with an error.
async fn answer_waiting(awaited: &Awaited, name: &str, tx: &mpsc::Sender<String>) {
    let waiting = awaited.lock().unwrap_or_else(|e| e.into_inner()).drain();
    for id in waiting {
        let why = format!("MCP server `{name}` ended before it answered");
        if tx.send(error_line(id, &why)).await.is_err() {
            break;
        }
    }
}

/// Start the server, confined as the attempt is, as one of orch's own
/// children (the orphan sweep leaves it alone) in the attempt's tree.
fn start(spawn: &ServerSpawn, tree: &ProcessTree) -> Option<Child> {
    use std::os::unix::fs::DirBuilderExt;
    let ServerTransport::Stdio {
        argv,
        env,
        own,
        git,
        confinement,
    } = &spawn.transport
    else {
        return None;
    };
    let (program, args) = argv.split_first()?;
    for d in [own.join("home"), own.join("tmp")] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .ok()?;
    }
    // Its git directory, filled the first time the server starts (a
    // relay may start it again).
    match std::fs::DirBuilder::new().mode(0o700).create(&git.dir) {
        Ok(()) => git.make(),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(own)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    let launch = Launch::from_command(&cmd, false)
        .stdin(Io::Pipe)
        .stdout(Io::Pipe)
        .stderr(Io::Null)
        .own_group();
    // It is born in the attempt's cgroup (and enters the confinement)
    // before it executes: whatever it starts is in there.
    crate::children::start(|| {
        let spawned = crate::confine::start(confinement.as_ref(), Some(tree), &launch)
            .ok()
            .and_then(Result::ok);
        let pid = spawned.as_ref().map(Child::id);
        (spawned, pid)
    })
}

/// The client's requests a server whose tools the grant limits has not
/// answered yet (see [`Pending`]).
pub(super) type Awaited = Mutex<Pending>;

/// The requests sent on to a server whose tools the grant limits, by the
/// id orch gave each: the server sees orch's ids (1, 2, ...) only, and an
/// answer goes back under the client's id once orch has narrowed it. An
/// answer to no request of the client's is not passed on: nothing the
/// server writes as an id (a float for an integer, the same id twice)
/// can slip an answer past the narrowing.
#[derive(Debug, Default)]
pub(super) struct Pending {
    next: u64,
    /// orch's id: the client's, and what the request asked.
    by_id: HashMap<u64, (Value, Option<Asked>)>,
    /// The client's id (as JSON text): orch's ids for it (a cancel names
    /// the client's, and costs one lookup).
    by_theirs: HashMap<String, Vec<u64>>,
}

impl Pending {
    /// Note a request the client sent under `theirs`: orch's id for it,
    /// or none when too many wait already.
    fn note(&mut self, theirs: &Value, asked: Option<Asked>) -> Option<u64> {
        if self.by_id.len() >= MAX_PENDING {
            return None;
        }
        self.next += 1;
        let ours = self.next;
        self.by_id.insert(ours, (theirs.clone(), asked));
        self.by_theirs
            .entry(theirs.to_string())
            .or_default()
            .push(ours);
        Some(ours)
    }

    /// The request orch sent under `ours`, forgotten: the client's id and
    /// what it asked.
    fn answered(&mut self, ours: u64) -> Option<(Value, Option<Asked>)> {
        let (theirs, asked) = self.by_id.remove(&ours)?;
        let key = theirs.to_string();
        if let Some(list) = self.by_theirs.get_mut(&key) {
            list.retain(|o| *o != ours);
            if list.is_empty() {
                self.by_theirs.remove(&key);
            }
        }
        Some((theirs, asked))
    }

    /// The client's ids of every request still waiting, forgotten.
    pub(super) fn drain(&mut self) -> Vec<Value> {
        let mut waiting: Vec<(u64, Value)> = self
            .by_id
            .drain()
            .map(|(ours, (theirs, _))| (ours, theirs))
            .collect();
        self.by_theirs.clear();
        waiting.sort_by_key(|(ours, _)| *ours);
        waiting.into_iter().map(|(_, theirs)| theirs).collect()
    }

    /// orch's ids of the requests the client sent under `theirs`,
    /// forgotten (their answers, if any come, are not passed on).
    fn cancel(&mut self, theirs: &Value) -> Vec<u64> {
        let ours = self
            .by_theirs
            .remove(&theirs.to_string())
            .unwrap_or_default();
        for o in &ours {
            self.by_id.remove(o);
        }
        ours
    }
}

/// At most this many requests wait for their answers at once.
const MAX_PENDING: usize = 4096;

/// The longest string a request to a server whose tools the grant limits
/// may have as its id: orch keeps each id until the answer, and a
/// megabyte id (or an object) held 4,096 times over would be orch's
/// memory an agent fills.
const MAX_ID_BYTES: usize = 256;

/// A request whose answer orch narrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// `initialize`: the server's capabilities, tools only.
    Initialize,
    /// `tools/list`: the granted tools only.
    Tools,
}

/// The methods a client may send a server whose tools the grant limits:
/// the protocol's own and the tools'. Resources, prompts and completions
/// (`resources/read`, `prompts/get`, ...) reach past a grant of tools (a
/// server that serves repository contents as resources would give them
/// whatever tool is granted): only a grant of the whole server reaches
/// them.
const LIMITED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
    // A tool call the server runs as a task (its own connection's, made
    // by a call orch let through): its status, result and cancel.
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

/// Whether a request may go to the server (the message or messages to
/// send, one a line); if not, the answer to send back instead (empty: none). `initialize` and `tools/list` requests are noted, to
/// narrow their answers.
pub(super) fn check_request(
    line: &[u8],
    scope: Option<&[String]>,
    awaited: &Awaited,
    server: &str,
) -> Result<Vec<u8>, String> {
    let Some(scope) = scope else {
        return Ok(line.to_vec());
    };
    // What orch checks is what the server gets: the message as orch read
    // it, written out again. A line orch cannot read, or that is not one
    // request (a batch, a bare value), never reaches the server: its
    // parser might read in it a call orch did not see (a `NaN`, a lone
    // surrogate, nesting deeper than orch reads, a batch's second call).
    let refuse = |code: i64, message: &str| {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
            .to_string()
            + "\n"
    };
    let v = match serde_json::from_slice::<Value>(line) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Err(refuse(
                -32600,
                "not one JSON-RPC message: a batch or a bare value is not passed on to a server whose tools are limited",
            ));
        }
        Err(e) => {
            return Err(refuse(-32700, &format!("parse error: {e}")));
        }
    };
    let id = v.get("id").cloned();
    // Ids orch keeps: integers (a fraction, or a number beyond 64 bits,
    // which orch reads as a float, could be two ids that read the same)
    // and short strings.
    if v.get("method").is_some()
        && let Some(id) = &id
        && !matches!(id, Value::Number(n) if n.is_i64() || n.is_u64())
        && !matches!(id, Value::String(s) if s.len() <= MAX_ID_BYTES)
    {
        return Err(refuse(
            -32600,
            &format!(
                "a request's id must be an integer or a string of at most {MAX_ID_BYTES} bytes"
            ),
        ));
    }
    // A request gets orch's own id on its way to the server (what it asked
    // noted, to narrow the answer); an answer to the server's own request
    // (sampling, roots) keeps the server's id.
    let forward = |mut v: Value, asked: Option<Asked>| {
        if let Some(id) = &id
            && v.get("method").is_some()
        {
            let ours = awaited
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .note(id, asked);
            let Some(ours) = ours else {
                return Err(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "too many requests wait for the server's answers"}}).to_string() + "\n");
            };
            v["id"] = json!(ours);
        }
        serde_json::to_vec(&v).map_err(|e| refuse(-32603, &e.to_string()))
    };
    let checked = || forward(v.clone(), None);
    let method = match v.get("method") {
        // An answer to the server's own request (sampling, roots).
        None => return checked(),
        Some(Value::String(m)) => m.as_str(),
        Some(_) => return Err(refuse(-32600, "`method` is not a string")),
    };
    match method {
        "initialize" => forward(v.clone(), Some(Asked::Initialize)),
        "tools/list" => forward(v.clone(), Some(Asked::Tools)),
        "tools/call" => {
            let name = v["params"]["name"].as_str().unwrap_or("");
            if scope.iter().any(|t| t == name) {
                return checked();
            }
            let why = format!(
                "tool `{name}` of MCP server `{server}` is not granted here; granted: {}. The pipeline grants it with `mcp__{server}__{name}`",
                scope.join(", ")
            );
            Err(match id {
                Some(id) => {
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": why}], "isError": true}})
                        .to_string()
                        + "\n"
                }
                None => String::new(),
            })
        }
        // The client names its request by its own id; the server knows it
        // by orch's. A cancel of no request waiting is not passed on.
        "notifications/cancelled" => {
            if id.is_some() {
                return Err(refuse(-32600, "a notification has no id"));
            }
            let theirs = &v["params"]["requestId"];
            let ours = awaited
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cancel(theirs);
            let mut lines = Vec::new();
            for o in ours {
                let mut c = v.clone();
                c["params"]["requestId"] = json!(o);
                if !lines.is_empty() {
                    lines.push(b'\n');
                }
                lines.extend(serde_json::to_vec(&c).map_err(|e| refuse(-32603, &e.to_string()))?);
            }
            if lines.is_empty() {
                Err(String::new())
            } else {
                Ok(lines)
            }
        }
        m if LIMITED_METHODS.contains(&m) || m.starts_with("notifications/") => checked(),
        m => {
            let why = format!(
                "method `{m}` of MCP server `{server}` is not granted here: the grant covers its tools {} only. The pipeline grants all of the server with `mcp__{server}__*`",
                scope.join(", ")
            );
            Err(match id {
                Some(id) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": why}})
                        .to_string()
                        + "\n"
                }
                None => String::new(),
            })
        }
    }
}

/// The server's answer as the client gets it, when the grant limits its
/// tools: under the client's id (see [`Pending`]), a `tools/list` answer
/// with only the granted tools, an `initialize` answer with no capability
/// but tools (and the protocol's own: logging). A line orch cannot read,
/// or an answer to no request of the client's, is not passed on (an empty
/// string).
pub(super) fn narrow_answer(line: &[u8], scope: Option<&[String]>, awaited: &Awaited) -> String {
    let Some(scope) = scope else {
        return String::from_utf8_lossy(line).into_owned() + "\n";
    };
    let Ok(mut v) = serde_json::from_slice::<Value>(line) else {
        return String::new();
    };
    // A request or notification of the server's own (sampling, roots,
    // progress) is not an answer, whatever its id; a message that is both
    // (a `method` and a `result` or `error`) is neither, and not passed on.
    if v.get("method").is_some() {
        if v.get("result").is_some() || v.get("error").is_some() {
            return String::new();
        }
        return v.to_string() + "\n";
    }
    let Some(ours) = v.get("id").and_then(Value::as_u64) else {
        return String::new();
    };
    let Some((theirs, asked)) = awaited
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .answered(ours)
    else {
        return String::new();
    };
    v["id"] = theirs;
    match asked {
        None => {}
        Some(Asked::Tools) => {
            if let Some(tools) = v["result"]["tools"].as_array_mut() {
                tools.retain(|t| {
                    t["name"]
                        .as_str()
                        .is_some_and(|n| scope.iter().any(|s| s == n))
                });
            }
        }
        Some(Asked::Initialize) => {
            if let Some(caps) = v["result"]["capabilities"].as_object_mut() {
                caps.retain(|k, _| k == "tools" || k == "logging");
            }
        }
    }
    v.to_string() + "\n"
}

fn error_line(id: Value, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}).to_string()
        + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_outside_the_grant_are_answered_by_orch_and_lists_narrowed() {
        let scope = vec!["echo".to_string()];
        let listing = Awaited::default();
        let call = |name: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
            )
        };
        assert!(check_request(call("echo").as_bytes(), Some(&scope), &listing, "fx").is_ok());
        // A call orch cannot read, or one in a batch, is not passed on
        // (another parser might read it as a call of `write`).
        for hidden in [
            call("write").replace("{}}", "{\"x\":NaN}}"),
            call("write").replace("{}}", "{\"x\":\"\\ud800\"}}"),
            call("write").replace(
                "{}}",
                &format!("{{\"x\":{}{}}}}}", "[".repeat(200), "]".repeat(200)),
            ),
            format!("[{}]", call("write")),
            format!("[{}, {}]", call("echo"), call("write")),
            "5".to_string(),
        ] {
            let answer =
                check_request(hidden.as_bytes(), Some(&scope), &listing, "fx").unwrap_err();
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert!(v["error"]["code"].is_i64(), "{hidden}: {answer}");
        }
        // What passes is what orch read, written out again: a key given
        // twice reaches the server once, as orch took it.
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write","name":"echo"}}"#;
        let passed = check_request(twice.as_bytes(), Some(&scope), &listing, "fx").unwrap();
        let v: Value = serde_json::from_slice(&passed).unwrap();
        assert_eq!(v["params"]["name"], "echo");
        assert_eq!(
            String::from_utf8(passed)
                .unwrap()
                .matches("\"name\"")
                .count(),
            1
        );
        let refused =
            check_request(call("write").as_bytes(), Some(&scope), &listing, "fx").unwrap_err();
        let v: Value = serde_json::from_str(&refused).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["isError"], true);
        assert!(
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("`write`")
        );
        // All granted: nothing is checked.
        assert!(check_request(call("write").as_bytes(), None, &listing, "fx").is_ok());
        // A list request goes on under orch's id; its answer comes back
        // under the client's, narrowed.
        let list = br#"{"jsonrpc":"2.0","id":"l1","method":"tools/list"}"#;
        let ours = sent_id(&check_request(list, Some(&scope), &listing, "fx").unwrap());
        let answer = tools_answer(ours);
        let got: Value =
            serde_json::from_str(&narrow_answer(answer.as_bytes(), Some(&scope), &listing))
                .unwrap();
        assert_eq!(got["id"], "l1");
        assert_eq!(got["result"]["tools"], json!([{"name": "echo"}]));
        // The same answer again, or one to no request, is not passed on.
        assert_eq!(narrow_answer(answer.as_bytes(), Some(&scope), &listing), "");
        let other = br#"{"jsonrpc":"2.0","id":9,"result":{"x":1}}"#;
        assert_eq!(narrow_answer(other, Some(&scope), &listing), "");
        // All granted: answers pass as they are.
        assert_eq!(
            narrow_answer(other, None, &listing),
            format!("{}\n", String::from_utf8_lossy(other))
        );
    }

    /// Round y: a cancel reaches the server under orch's id for the
    /// request (none for a request not waiting); an id orch would have to
    /// hold that is not a number or a short string is refused; a request
    /// refused for too many waiting gets the client's id; a server message
    /// that is a request and an answer at once is not passed on; what
    /// still waits when the server ends is answered with an error.
    #[test]
    fn cancels_ids_and_the_end_of_a_server() {
        let scope = vec!["echo".to_string()];
        let awaited = Awaited::default();
        let call = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo"}}}}"#
            )
        };
        let cancel = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"x"}}}}"#
            )
        };
        let first =
            sent_id(&check_request(call("3").as_bytes(), Some(&scope), &awaited, "fx").unwrap());
        let second =
            sent_id(&check_request(call("2").as_bytes(), Some(&scope), &awaited, "fx").unwrap());
        assert_ne!(first, 3, "the server sees orch's ids");
        let sent = check_request(cancel("2").as_bytes(), Some(&scope), &awaited, "fx").unwrap();
        let v: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(v["params"]["requestId"], second);
        assert_eq!(v["params"]["reason"], "x");
        // Cancelled: forgotten, and a second cancel goes nowhere.
        assert_eq!(
            check_request(cancel("2").as_bytes(), Some(&scope), &awaited, "fx").unwrap_err(),
            ""
        );
        assert_eq!(
            check_request(cancel("99").as_bytes(), Some(&scope), &awaited, "fx").unwrap_err(),
            ""
        );
        // A cancel that carries an id of its own is not a notification.
        let with_id = r#"{"jsonrpc":"2.0","id":4,"method":"notifications/cancelled","params":{"requestId":3}}"#;
        assert!(
            check_request(with_id.as_bytes(), Some(&scope), &awaited, "fx")
                .unwrap_err()
                .contains("-32600")
        );
        // Answered: a cancel of it goes nowhere.
        let done =
            sent_id(&check_request(call("6").as_bytes(), Some(&scope), &awaited, "fx").unwrap());
        let answer = format!(r#"{{"jsonrpc":"2.0","id":{done},"result":{{}}}}"#);
        assert!(!narrow_answer(answer.as_bytes(), Some(&scope), &awaited).is_empty());
        assert_eq!(
            check_request(cancel("6").as_bytes(), Some(&scope), &awaited, "fx").unwrap_err(),
            ""
        );
        // Two requests under one id: both are cancelled, one line each.
        let a =
            sent_id(&check_request(call("8").as_bytes(), Some(&scope), &awaited, "fx").unwrap());
        let b =
            sent_id(&check_request(call("8").as_bytes(), Some(&scope), &awaited, "fx").unwrap());
        let sent = check_request(cancel("8").as_bytes(), Some(&scope), &awaited, "fx").unwrap();
        let ids: Vec<Value> = sent
            .split(|c| *c == b'\n')
            .map(|l| serde_json::from_slice::<Value>(l).unwrap()["params"]["requestId"].clone())
            .collect();
        assert_eq!(ids, [json!(a), json!(b)]);

        // Ids orch would hold: numbers and strings up to 256 bytes.
        let long = format!("\"{}\"", "x".repeat(MAX_ID_BYTES + 1));
        for bad in [long.as_str(), "{}", "[1]", "null", "true"] {
            let answer =
                check_request(call(bad).as_bytes(), Some(&scope), &awaited, "fx").unwrap_err();
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(v["error"]["code"], -32600, "{bad}");
        }
        let fits = format!("\"{}\"", "x".repeat(MAX_ID_BYTES));
        assert!(check_request(call(&fits).as_bytes(), Some(&scope), &awaited, "fx").is_ok());

        // Full: refused under the client's id.
        let full = Awaited::default();
        for i in 0..MAX_PENDING {
            check_request(call(&i.to_string()).as_bytes(), Some(&scope), &full, "fx").unwrap();
        }
        let answer =
            check_request(call("\"last\"").as_bytes(), Some(&scope), &full, "fx").unwrap_err();
        assert_eq!(
            serde_json::from_str::<Value>(&answer).unwrap()["id"],
            "last"
        );

        // A request and an answer at once, under a waiting id: dropped,
        // and the real answer still comes back narrowed.
        let list = br#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#;
        let ours = sent_id(&check_request(list, Some(&scope), &awaited, "fx").unwrap());
        let both = format!(
            r#"{{"jsonrpc":"2.0","id":{ours},"method":"x","result":{{"tools":[{{"name":"write"}}]}}}}"#
        );
        assert_eq!(narrow_answer(both.as_bytes(), Some(&scope), &awaited), "");
        let got: Value = serde_json::from_str(&narrow_answer(
            tools_answer(ours).as_bytes(),
            Some(&scope),
            &awaited,
        ))
        .unwrap();
        assert_eq!(got["result"]["tools"], json!([{"name": "echo"}]));

        // The server ended: what still waits, in the order sent.
        let left = awaited.lock().unwrap().drain();
        assert_eq!(left, [json!(3), json!(fits.trim_matches('"'))]);
        assert!(awaited.lock().unwrap().drain().is_empty());
    }

    /// The id orch gave a request it passed on.
    fn sent_id(forwarded: &[u8]) -> u64 {
        serde_json::from_slice::<Value>(forwarded).unwrap()["id"]
            .as_u64()
            .unwrap()
    }

    /// A server's `tools/list` answer, with `echo` and `write`.
    fn tools_answer(id: impl std::fmt::Display) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo"}},{{"name":"write"}}]}}}}"#
        )
    }

    /// A grant of some tools reaches no resource, prompt or completion of
    /// the server, and its `initialize` answer offers none; the protocol's
    /// own messages and answers to the server's requests pass.
    #[test]
    fn a_grant_of_tools_reaches_nothing_else() {
        let scope = vec!["echo".to_string()];
        let awaited = Awaited::default();
        for method in [
            "resources/read",
            "resources/list",
            "prompts/get",
            "completion/complete",
            "x/y",
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"{method}","params":{{"uri":"file:///etc/passwd"}}}}"#
            );
            let answer = check_request(line.as_bytes(), Some(&scope), &awaited, "fx").unwrap_err();
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(v["id"], 3, "{method}");
            assert_eq!(v["error"]["code"], -32601, "{method}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("mcp__fx__*")
            );
            // All granted: it passes.
            assert!(check_request(line.as_bytes(), None, &awaited, "fx").is_ok());
        }
        // A notification outside the grant is dropped, unanswered.
        let note = br#"{"jsonrpc":"2.0","method":"resources/subscribe","params":{}}"#;
        assert_eq!(
            check_request(note, Some(&scope), &awaited, "fx").unwrap_err(),
            ""
        );
        // A method that is not a string is refused.
        let odd = br#"{"jsonrpc":"2.0","id":4,"method":["resources/read"]}"#;
        assert!(check_request(odd, Some(&scope), &awaited, "fx").is_err());
        for passes in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}"#,
        ] {
            assert!(
                check_request(passes.as_bytes(), Some(&scope), &awaited, "fx").is_ok(),
                "{passes}"
            );
        }
        // A fraction or a number beyond 64 bits (read as a float, so two
        // such ids may read the same) is refused as an id.
        for theirs in ["1.0", "1e0", "123456789012345678901234567890", "-0.0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{theirs},"method":"tools/list"}}"#);
            let answer = check_request(line.as_bytes(), Some(&scope), &awaited, "fx").unwrap_err();
            assert!(answer.contains("-32600"), "{theirs}: {answer}");
        }
        // Whatever the client's ids (beyond 32 bits, the same id twice),
        // the server sees orch's, and each answer comes back narrowed
        // under the client's own; what the server writes as an id (a float
        // for an integer, a guess) reaches the client not at all.
        let mut sent = Vec::new();
        for theirs in [
            "1",
            "18446744073709551615",
            "-9223372036854775808",
            "5",
            "5",
            r#""5""#,
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{theirs},"method":"tools/list"}}"#);
            let ours =
                sent_id(&check_request(line.as_bytes(), Some(&scope), &awaited, "fx").unwrap());
            sent.push((theirs, ours));
        }
        let mut ids: Vec<u64> = sent.iter().map(|s| s.1).collect();
        ids.dedup();
        assert_eq!(ids.len(), sent.len(), "orch's ids are all different");
        let float = format!("{}.0", sent[0].1);
        assert_eq!(
            narrow_answer(tools_answer(float).as_bytes(), Some(&scope), &awaited),
            ""
        );
        // A request of the server's with one of orch's ids takes nothing
        // away from the narrowing of the answer.
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"sampling/createMessage","params":{{}}}}"#,
            sent[3].1
        );
        assert!(!narrow_answer(request.as_bytes(), Some(&scope), &awaited).is_empty());
        for (theirs, ours) in &sent {
            let got: Value = serde_json::from_str(&narrow_answer(
                tools_answer(ours).as_bytes(),
                Some(&scope),
                &awaited,
            ))
            .unwrap();
            assert_eq!(got["id"], serde_json::from_str::<Value>(theirs).unwrap());
            assert_eq!(
                got["result"]["tools"],
                json!([{"name": "echo"}]),
                "{theirs}"
            );
        }
        let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
        let ours = sent_id(&check_request(init, Some(&scope), &awaited, "fx").unwrap());
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{ours},"result":{{"capabilities":{{"tools":{{}},"resources":{{"subscribe":true}},"prompts":{{}},"completions":{{}},"logging":{{}}}}}}}}"#
        );
        let got: Value =
            serde_json::from_str(&narrow_answer(answer.as_bytes(), Some(&scope), &awaited))
                .unwrap();
        assert_eq!(got["id"], 0);
        assert_eq!(
            got["result"]["capabilities"],
            json!({"tools": {}, "logging": {}})
        );
    }
}
