#!/usr/bin/env bash
# Runs one agent CLI against tests/e2e/model_server.py for one scenario, inside
# a private network namespace (unshare -n: only a loopback interface, so
# neither the CLI nor the server can reach any other address).
#
#   tests/e2e/run_cli.sh CLI SCENARIO [--save]
#
#   CLI       claude | codex | gemini | opencode | copilot
#   SCENARIO  text-only      the model answers with plain text
#             write-allowed  the model calls the CLI's write tool; permissive mode
#             write-refused  the same call; restrictive mode
#             shell-allowed / shell-refused: the same with the CLI's shell tool
#                            running printf > out.txt (permissive / restrictive)
#             rate-limit     every model request gets HTTP 429 in the provider's
#                            shape (retry-after etc., reset RATE_LIMIT_SECONDS
#                            away, default 30); the CLI's own retries are off
#             usage-limit    the same with the plan/quota kind of 429 (Claude
#                            unified headers, Codex usage_limit_reached, Gemini
#                            per-day quota)
#   --save    copy stdout/stderr to tests/fixtures/streams/CLI/SCENARIO.{jsonl,stderr}
#             (the temporary directory is rewritten to /tmp/orch-e2e)
#
# Env: AGENT_CLIS_BIN (default .cache/agent-clis/node_modules/.bin),
#      E2E_TIMEOUT (seconds per CLI run, default 120; 300 for rate-limit and
#      usage-limit), E2E_KEEP=1 keeps the temp dir,
#      E2E_TMPDIR (where the temp dir goes, default /var/tmp),
#      E2E_ENV="K=V ..." extra env for the CLI, E2E_ARGS="..." extra argv words
#      (split on spaces), CODEX_MODEL (default gpt-5.5), COPILOT_TEST_MODEL
#      (default claude-sonnet-4.5), COPILOT_WIRE (completions|responses|anthropic),
#      OPENCODE_PERMISSION (JSON for opencode's "permission" key),
#      RATE_LIMIT_SECONDS (default 30), RATE_LIMIT_TIMES (default 1000: the CLI
#      gives up; 1 = one 429, then the answer), E2E_DEFAULT_RETRIES=1 (leave the
#      CLI's own retry settings at their defaults, for probes).
# Prints a summary: exit code, whether out.txt appeared, and per request the
# tools offered, the tool results sent back and the scripted reply.
# Needs root (or user namespaces) for unshare -n.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

if [ -z "${E2E_IN_NETNS:-}" ]; then
  # Re-run this script in a new network namespace with loopback up.
  exec unshare -n env E2E_IN_NETNS=1 bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
fi

cli=${1:?usage: run_cli.sh CLI SCENARIO [--save]}
scenario=${2:?usage: run_cli.sh CLI SCENARIO [--save]}
save=${3:-}
case $cli in claude|codex|gemini|opencode|copilot) ;; *) echo "unknown CLI: $cli" >&2; exit 2 ;; esac
case $scenario in
  text-only|write-allowed|write-refused|shell-allowed|shell-refused) ;;
  rate-limit|usage-limit) ;;
  *) echo "unknown scenario: $scenario" >&2; exit 2 ;;
esac
BIN=${AGENT_CLIS_BIN:-$REPO/.cache/agent-clis/node_modules/.bin}
BIN=$(cd "$BIN" && pwd)
NODE_DIR=$(dirname "$(command -v node)")
TIMEOUT=${E2E_TIMEOUT:-120}
# OpenCode and Copilot have no retry switch: on a 429 they wait out retry-after
# five times (about 2.5 minutes with the default 30 s reset).
case $scenario in rate-limit|usage-limit) TIMEOUT=${E2E_TIMEOUT:-300} ;; esac

# Under /var/tmp by default: codex refuses to set up its helper binaries
# (apply_patch on PATH) when CODEX_HOME is under /tmp, and warns on stderr.
T=$(mktemp -d "${E2E_TMPDIR:-/var/tmp}/orch-e2e-$cli-$scenario.XXXXXX")
W=$T/work                    # the CLI's working directory
H=$T/home                    # its HOME
mkdir -p "$W" "$H" "$T/tmp"
OUT=$W/out.txt               # the file the scripted write creates
CONTENT="hello from the scripted model"
PROMPT="Write the file out.txt, then stop."
case $scenario in text-only|rate-limit|usage-limit) PROMPT="Say hello." ;; esac
# The CLIs' own retry settings are turned off unless E2E_DEFAULT_RETRIES=1.
retries_off=1; [ -n "${E2E_DEFAULT_RETRIES:-}" ] && retries_off=

server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "${E2E_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

# --- The scripted turn: the CLI's own write tool and argument shape. ------
# (Turn 0 is the tool call; the final text comes once the result is back.)
write_call() {
  case $cli in
    claude)   printf '{"name":"Write","arguments":{"file_path":"%s","content":"%s\\n"}}' "$OUT" "$CONTENT" ;;
    # Codex offers apply_patch as a freeform ("custom") tool only for models in
    # its built-in catalog (gpt-5.5 is); for others (gpt-5.4) the model must
    # run apply_patch through exec_command, which Codex intercepts.
    codex)
      case ${CODEX_MODEL:-gpt-5.5} in
        gpt-5.5) printf '{"name":"apply_patch","arguments":"*** Begin Patch\\n*** Add File: %s\\n+%s\\n*** End Patch\\n"}' "$OUT" "$CONTENT" ;;
        *)       printf '{"name":"exec_command","arguments":{"cmd":"apply_patch <<'"'"'EOF'"'"'\\n*** Begin Patch\\n*** Add File: %s\\n+%s\\n*** End Patch\\nEOF\\n"}}' "$OUT" "$CONTENT" ;;
      esac ;;
    gemini)   printf '{"name":"write_file","arguments":{"file_path":"%s","content":"%s\\n"}}' "$OUT" "$CONTENT" ;;
    opencode) printf '{"name":"write","arguments":{"filePath":"%s","content":"%s\\n"}}' "$OUT" "$CONTENT" ;;
    # Copilot's tool set follows the model family: create/edit/view/grep for
    # Claude models, freeform apply_patch/view/rg for GPT models.
    copilot)
      case ${COPILOT_TEST_MODEL:-claude-sonnet-4.5} in
        gpt-*) printf '{"name":"apply_patch","arguments":"*** Begin Patch\\n*** Add File: %s\\n+%s\\n*** End Patch\\n"}' "$OUT" "$CONTENT" ;;
        *)     printf '{"name":"create","arguments":{"path":"%s","file_text":"%s\\n"}}' "$OUT" "$CONTENT" ;;
      esac ;;
    *) echo "unknown CLI $cli" >&2; exit 2 ;;
  esac
}
# The CLI's shell tool running a command that writes the same file.
shell_call() {
  local cmd="printf '%s\\n' '$CONTENT' > $OUT"
  case $cli in
    claude)   printf '{"name":"Bash","arguments":{"command":"%s","description":"write out.txt"}}' "$cmd" ;;
    codex)    printf '{"name":"exec_command","arguments":{"cmd":"%s"}}' "$cmd" ;;
    gemini)   printf '{"name":"run_shell_command","arguments":{"command":"%s","description":"write out.txt"}}' "$cmd" ;;
    opencode) printf '{"name":"bash","arguments":{"command":"%s"}}' "$cmd" ;;
    copilot)  printf '{"name":"bash","arguments":{"command":"%s","description":"write out.txt"}}' "$cmd" ;;
  esac
}
case $scenario in
  shell-allowed|shell-refused)
    printf '{"turns": [{"tool_call": %s}], "final_text": "done"}\n' "$(shell_call)" >"$T/script.json" ;;
  text-only) echo '[{"text": "Hello from the scripted model."}]' >"$T/script.json" ;;
  rate-limit|usage-limit)
    variant=default; [ "$scenario" = usage-limit ] && variant=usage_limit
    printf '{"turns": [{"rate_limit": {"seconds": %s, "times": %s, "variant": "%s"}}, {"text": "Hello after the rate limit."}]}\n' \
      "${RATE_LIMIT_SECONDS:-30}" "${RATE_LIMIT_TIMES:-1000}" "$variant" >"$T/script.json" ;;
  write-allowed|write-refused)
    printf '{"turns": [{"tool_call": %s}], "final_text": "done"}\n' "$(write_call)" >"$T/script.json" ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac

# --- The server. -----------------------------------------------------------
python3 "$HERE/model_server.py" --script "$T/script.json" --log "$T/requests.jsonl" \
  --port 0 --max-seconds $((TIMEOUT + 30)) >"$T/server.out" 2>"$T/server.err" &
server_pid=$!
for _ in $(seq 50); do
  grep -q '^PORT=' "$T/server.out" 2>/dev/null && break
  sleep 0.1
done
PORT=$(sed -n 's/^PORT=//p' "$T/server.out")
[ -n "$PORT" ] || { echo "model server did not start" >&2; cat "$T/server.err" >&2; exit 1; }
URL=http://127.0.0.1:$PORT

# --- The CLI's env and argv. -----------------------------------------------
ENV=(PATH="$BIN:$NODE_DIR:/usr/local/bin:/usr/bin:/bin" HOME="$H" TMPDIR="$T/tmp" NO_COLOR=1)
restrictive=; case $scenario in *-refused) restrictive=1 ;; esac

case $cli in
claude)
  # usage-limit: a (fake) Claude subscription token instead of an API key; only
  # then does Claude read the anthropic-ratelimit-unified-* headers.
  if [ "$scenario" = usage-limit ]; then ENV+=(CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-test-local)
  else ENV+=(ANTHROPIC_API_KEY=sk-test-local); fi
  ENV+=(ANTHROPIC_BASE_URL="$URL"
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1
        DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1)
  [ -n "$retries_off" ] && ENV+=(CLAUDE_CODE_MAX_RETRIES=0)
  ARGV=(claude -p "$PROMPT" --output-format stream-json --verbose --model claude-sonnet-4-5)
  if [ -n "$restrictive" ]; then
    ARGV+=(--permission-mode dontAsk --tools Read,Grep,Glob)
  else
    ARGV+=(--permission-mode acceptEdits)
  fi
  ;;
codex)
  mkdir -p "$H/.codex"   # codex refuses a CODEX_HOME that does not exist
  ENV+=(CODEX_HOME="$H/.codex" MOCK_API_KEY=sk-test-local)
  ARGV=(codex exec --json --skip-git-repo-check --ephemeral --ignore-user-config
        -m "${CODEX_MODEL:-gpt-5.5}"
        -c model_provider=mock
        -c model_providers.mock.name=mock
        -c model_providers.mock.base_url="$URL/v1"
        -c model_providers.mock.env_key=MOCK_API_KEY
        -c model_providers.mock.wire_api=responses)
  [ -n "$retries_off" ] && ARGV+=(-c model_providers.mock.request_max_retries=0
                                  -c model_providers.mock.stream_max_retries=0)
  ARGV+=(--disable unbounded_connection_retries
        --disable plugins                     # else it contacts github.com, chatgpt.com
        -c check_for_update_on_startup=false
        -c analytics.enabled=false)
  if [ -n "$restrictive" ]; then ARGV+=(-s read-only); else ARGV+=(-s workspace-write); fi
  ARGV+=("$PROMPT")
  ;;
gemini)
  ENV+=(GEMINI_CLI_HOME="$H" GOOGLE_GEMINI_BASE_URL="$URL" GEMINI_API_KEY=test-local-key)
  mkdir -p "$H/.gemini"
  attempts=', "maxAttempts": 1'; [ -n "$retries_off" ] || attempts=
  cat >"$H/.gemini/settings.json" <<JSON
{
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false$attempts},
  "security": {"auth": {"selectedType": "gemini-api-key"}}
}
JSON
  ARGV=(gemini -p "$PROMPT" -o stream-json --skip-trust -m gemini-2.5-flash)
  # Headless: default offers read tools only, auto_edit adds write_file and
  # replace, only yolo offers run_shell_command.
  if [ -n "$restrictive" ]; then ARGV+=(--approval-mode default)
  elif [ "$scenario" = shell-allowed ]; then ARGV+=(--approval-mode yolo)
  else ARGV+=(--approval-mode auto_edit); fi
  ;;
opencode)
  if [ -n "${OPENCODE_PERMISSION:-}" ]; then
    perm=$OPENCODE_PERMISSION   # ad-hoc probes, e.g. '{"edit": "ask"}'
  elif [ -n "$restrictive" ]; then
    perm='{"edit": "deny", "bash": "deny"}'
  else
    perm='{"edit": "allow", "bash": "allow"}'
  fi
  cfg=$(cat <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "mock/mock-model",
  "small_model": "mock/mock-model",
  "provider": {
    "mock": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Mock",
      "options": {"baseURL": "$URL/v1", "apiKey": "sk-test-local"},
      "models": {"mock-model": {"name": "Mock model", "tool_call": true}}
    }
  },
  "permission": $perm
}
JSON
)
  ENV+=(XDG_CONFIG_HOME="$H/.config" XDG_DATA_HOME="$H/.local/share"
        XDG_CACHE_HOME="$H/.cache" XDG_STATE_HOME="$H/.local/state"
        OPENCODE_CONFIG_CONTENT="$cfg" OPENCODE_DISABLE_PROJECT_CONFIG=1
        OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
        OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1
        OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_CLAUDE_CODE=1)
  # --pure: no background npm install of plugins.
  ARGV=(opencode run --pure --format json -m mock/mock-model "$PROMPT")
  ;;
copilot)
  # A shared COPILOT_CACHE_HOME saves unpacking 235 MB into every fresh HOME.
  cache=${COPILOT_CACHE_HOME:-$(dirname "$(dirname "$BIN")")/copilot-cache}
  [ -d "$cache" ] && ENV+=(COPILOT_CACHE_HOME="$cache")
  ENV+=(COPILOT_HOME="$H/.copilot" COPILOT_OFFLINE=true COPILOT_AUTO_UPDATE=false
        COPILOT_PROVIDER_API_KEY=sk-test-local COPILOT_MODEL="${COPILOT_TEST_MODEL:-claude-sonnet-4.5}")
  # COPILOT_WIRE picks the wire format: completions (default), responses, anthropic.
  case ${COPILOT_WIRE:-completions} in
    completions) ENV+=(COPILOT_PROVIDER_TYPE=openai COPILOT_PROVIDER_BASE_URL="$URL/v1") ;;
    responses)   ENV+=(COPILOT_PROVIDER_TYPE=openai COPILOT_PROVIDER_BASE_URL="$URL/v1"
                       COPILOT_PROVIDER_WIRE_API=responses) ;;
    anthropic)   ENV+=(COPILOT_PROVIDER_TYPE=anthropic COPILOT_PROVIDER_BASE_URL="$URL") ;;
  esac
  ARGV=(copilot -p "$PROMPT" --output-format json --no-ask-user)
  # A shell redirect into a file needs the write permission as well.
  if [ "$scenario" = shell-allowed ]; then ARGV+=(--allow-tool 'shell(printf:*)' --allow-tool write)
  elif [ -z "$restrictive" ]; then ARGV+=(--allow-tool write); fi
  ;;
esac
# Ad-hoc probes: E2E_ENV="K=V ..." adds env, E2E_ARGS="..." appends words to argv
# (both go at the end of argv, after the prompt for codex, whose parser accepts that).
set -f   # no globbing of patterns such as shell(git:*)
# shellcheck disable=SC2206
[ -n "${E2E_ENV:-}" ] && ENV+=(${E2E_ENV})
# shellcheck disable=SC2206
[ -n "${E2E_ARGS:-}" ] && ARGV+=(${E2E_ARGS})
set +f

# --- Run. --------------------------------------------------------------------
cd "$W"
set +e
timeout -k 5 "$TIMEOUT" env -i "${ENV[@]}" "${ARGV[@]}" </dev/null >"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=

# --- Summary. ----------------------------------------------------------------
echo "== $cli $scenario: exit $rc; out.txt $( [ -e "$OUT" ] && echo "EXISTS: $(cat "$OUT")" || echo absent)"
echo "-- argv: ${ARGV[*]}"
python3 - "$T/requests.jsonl" <<'PY'
import json, sys
try:
    lines = open(sys.argv[1]).read().splitlines()
except FileNotFoundError:
    lines = []
t0 = None
for line in lines:
    r = json.loads(line)
    if "method" not in r:  # a follow-up line (client_disconnected, server_error)
        print(f"   note: {line[:200]}")
        continue
    t0 = r["time"] if t0 is None else t0
    results = [(x.get("name"), x.get("is_error"), (x.get("text") or "")[:300]) for x in r.get("tool_results", [])]
    print(f"-- req {r['seq']} +{r['time'] - t0:.1f}s {r['method']} {r['path']} api={r['api']} side={r.get('side')} "
          f"turn={r.get('turn')} tools={r.get('tools')} kinds={r.get('tool_kinds')}")
    if results:
        print(f"   results={results}")
    status = f"status={r['status']} " if r.get("status") else ""
    print(f"   {status}reply={json.dumps(r.get('reply'))[:300]}")
PY
echo "-- stderr (last 15 lines):"; tail -n 15 "$T/stderr"
echo "-- stdout: $(wc -l <"$T/stdout") lines"

if [ "$save" = --save ]; then
  dest=$REPO/tests/fixtures/streams/$cli
  mkdir -p "$dest"
  # Stable paths in the fixtures: the temp dir becomes /tmp/orch-e2e, the
  # CLIs' bin dir and the repository become placeholders.
  # Claude also writes the dir as a slug (-var-tmp-orch-e2e-...), opencode
  # without its leading slash.
  slug=$(printf %s "$T" | sed 's#[^A-Za-z0-9]#-#g')
  sanitize() {
    sed -e "s#$T#/tmp/orch-e2e#g" -e "s#${T#/}#tmp/orch-e2e#g" -e "s#$slug#-tmp-orch-e2e#g" \
        -e "s#$BIN#<bin>#g" -e "s#$REPO#<repo>#g" "$1"
  }
  sanitize "$T/stdout" >"$dest/$scenario.jsonl"
  sanitize "$T/stderr" >"$dest/$scenario.stderr"
  echo "-- saved $dest/$scenario.{jsonl,stderr}"
fi
[ -n "${E2E_KEEP:-}" ] && echo "-- kept $T"
exit 0
