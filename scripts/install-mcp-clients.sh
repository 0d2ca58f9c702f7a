#!/usr/bin/env bash
# Installs the MCP clients orch did not write that the tests drive orch's
# MCP server with, at pinned versions, into .cache/mcp-clients/ (reused
# when present):
#   - the official Python SDK (`mcp` on PyPI), in a virtualenv;
#   - the MCP Inspector CLI (npm `@modelcontextprotocol/inspector`).
# Prints PYTHON=... and INSPECTOR=... on its last lines.
set -euo pipefail

# --- The pins ---------------------------------------------------------------
PY_MCP=2.3.0
INSPECTOR=2.12.0
# -----------------------------------------------------------------------------

cd "$(dirname "$0")/.."
DIR=${MCP_CLIENTS_DIR:-$PWD/.cache/mcp-clients}
STAMP="$DIR/.installed-pins"
WANT="mcp==$PY_MCP @modelcontextprotocol/inspector@$INSPECTOR"
log() { printf 'install-mcp-clients: %s\n' "$*" >&2; }

if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  log "installing $WANT into $DIR"
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$PY_MCP"
  (cd "$DIR" && npm install --silent --no-audit --no-fund --prefix "$DIR" \
    "@modelcontextprotocol/inspector@$INSPECTOR" >/dev/null)
  "$DIR/venv/bin/python" -c 'import mcp.client.stdio' || { log "error: the Python SDK does not import"; exit 1; }
  [ -x "$DIR/node_modules/.bin/mcp-inspector" ] || { log "error: no mcp-inspector binary"; exit 1; }
  echo "$WANT" >"$STAMP"
fi
echo "PYTHON=$DIR/venv/bin/python"
echo "INSPECTOR=$DIR/node_modules/.bin/mcp-inspector"
