#!/usr/bin/env bash
# Installs the validators the export tests check workflows with, at pinned
# versions, into .cache/ci-validators/ (a virtualenv; reused when present):
#   - check-jsonschema (its vendored GitHub workflow and GitLab CI schemas);
#   - zizmor (a security linter for GitHub workflows), run with --offline.
set -euo pipefail

# --- The pins ---------------------------------------------------------------
CHECK_JSONSCHEMA=0.39.0
ZIZMOR=1.32.0
# -----------------------------------------------------------------------------

cd "$(dirname "$0")/.."
DIR=${CI_VALIDATORS_DIR:-$PWD/.cache/ci-validators}
STAMP="$DIR/.installed-pins"
WANT="check-jsonschema==$CHECK_JSONSCHEMA zizmor==$ZIZMOR"
log() { printf 'install-ci-validators: %s\n' "$*" >&2; }

if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  log "installing $WANT into $DIR"
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "check-jsonschema==$CHECK_JSONSCHEMA" "zizmor==$ZIZMOR"
  "$DIR/venv/bin/check-jsonschema" --version >/dev/null || { log "error: no check-jsonschema"; exit 1; }
  "$DIR/venv/bin/zizmor" --version >/dev/null || { log "error: no zizmor"; exit 1; }
  printf '%s' "$WANT" > "$STAMP"
else
  log "already at $WANT; pip not run"
fi
