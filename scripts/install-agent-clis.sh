#!/usr/bin/env bash
# Installs the five agent CLIs that orch drives, at exactly the pinned
# versions, into .cache/agent-clis/ (gitignored via /.cache). Idempotent: when
# every pinned package is already installed at its pinned version, its binary
# is in place and the last install passed the smoke test (the stamp file
# .installed-pins matches the pins), npm is not run at all (~0.5 s).
#
#   scripts/install-agent-clis.sh            # install or verify
#   scripts/install-agent-clis.sh --check    # only verify; exit 1 if not installed
#   scripts/install-agent-clis.sh --force    # reinstall from scratch
#
# Env:
#   AGENT_CLIS_DIR=DIR          install elsewhere (default: <repo>/.cache/agent-clis)
#   AGENT_CLIS_ALLOW_NEAREST=1  if a pin does not exist in the registry, install
#                               the nearest existing version instead of failing
#
# Prints the binaries' paths on the last lines as NAME=PATH.
set -euo pipefail

# --- The pins: ci/agent-clis/package.json, the one place to change a
# version (orch reads it when it is built: `orch doctor`'s verified versions;
# exported CI jobs install from it and its lock). Each package's binary:
BINS=(
  "@anthropic-ai/claude-code  claude"
  "@openai/codex              codex"
  "@google/gemini-cli         gemini"
  "opencode-ai                opencode"
  "@github/copilot            copilot"
)
# ---------------------------------------------------------------------------

cd "$(dirname "$0")/.."
REPO=$(pwd)
DIR=${AGENT_CLIS_DIR:-$REPO/.cache/agent-clis}
BIN=$DIR/node_modules/.bin

mode=install
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --force) mode=force ;;
  *) echo "usage: $0 [--check|--force]" >&2; exit 2 ;;
esac

log() { printf 'install-agent-clis: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node not found on PATH (need Node >= 20)"
command -v npm >/dev/null || die "npm not found on PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node >= 20 needed (gemini-cli requires it), found $(node -v)"

# The pin file must say each fact once and exactly: every dependency has
# its binary above, every pin is an exact version, and an install script
# approved in `allowScripts` is approved for the pinned version.
PINS=$REPO/ci/agent-clis/package.json
problems=$(node -e '
  const f = require(process.argv[1]);
  const bins = process.argv.slice(2);
  const deps = f.dependencies || {};
  const out = [];
  for (const [p, v] of Object.entries(deps)) {
    if (!bins.includes(p)) out.push(`${p} has no binary in BINS (scripts/install-agent-clis.sh)`);
    if (!/^\d+\.\d+\.\d+$/.test(String(v))) out.push(`${p}: "${v}" is not an exact version`);
  }
  for (const key of Object.keys(f.allowScripts || {})) {
    const at = key.lastIndexOf("@");
    if (at <= 0) continue;
    const [p, v] = [key.slice(0, at), key.slice(at + 1)];
    if (p in deps && deps[p] !== v) out.push(`allowScripts approves ${key} but ${p} is pinned at ${deps[p]}`);
  }
  process.stdout.write(out.join("\n"));' "$PINS" $(for line in "${BINS[@]}"; do read -r p _ <<<"$line"; printf '%s ' "$p"; done)) \
  || die "cannot read ci/agent-clis/package.json"
[ -z "$problems" ] || die "ci/agent-clis/package.json: $problems"

pkgs=() vers=() bins=()
for line in "${BINS[@]}"; do
  read -r p b <<<"$line"
  v=$(node -e 'const d=require(process.argv[1]).dependencies||{};process.stdout.write(String(d[process.argv[2]]||""))' \
    "$REPO/ci/agent-clis/package.json" "$p") || die "cannot read ci/agent-clis/package.json"
  [ -n "$v" ] || die "ci/agent-clis/package.json pins no version of $p"
  pkgs+=("$p") vers+=("$v") bins+=("$b")
done

# installed_version PKG: the version in node_modules/PKG/package.json, or "".
installed_version() {
  local f=$DIR/node_modules/$1/package.json
  [ -f "$f" ] || return 0
  node -e 'try{process.stdout.write(String(require(process.argv[1]).version||""))}catch(e){}' "$f"
}

# all_installed: 0 when every pin is installed at its version with its binary.
all_installed() {
  local i ok=0 have
  for i in "${!pkgs[@]}"; do
    have=$(installed_version "${pkgs[$i]}")
    if [ "$have" != "${vers[$i]}" ]; then
      log "${pkgs[$i]}: want ${vers[$i]}, have ${have:-nothing}"
      ok=1
    elif [ ! -x "$BIN/${bins[$i]}" ]; then
      log "${pkgs[$i]}: ${vers[$i]} installed but $BIN/${bins[$i]} is missing"
      ok=1
    fi
  done
  return $ok
}

print_bins() {
  local i
  log "binaries (in $BIN; copilot's unpacked cache: COPILOT_CACHE_HOME=$DIR/copilot-cache):"
  for i in "${!pkgs[@]}"; do
    printf '%s=%s\n' "${bins[$i]}" "$BIN/${bins[$i]}"
  done
}

# Written only after a successful install and smoke test; records the pins.
STAMP=$DIR/.installed-pins
stamp_text=$(for i in "${!pkgs[@]}"; do printf '%s@%s\n' "${pkgs[$i]}" "${vers[$i]}"; done)

if [ "$mode" != force ] && all_installed && [ "$(cat "$STAMP" 2>/dev/null)" = "$stamp_text" ]; then
  log "all ${#pkgs[@]} CLIs already at their pinned versions; npm not run"
  print_bins
  exit 0
fi
[ "$mode" = check ] && die "not installed at the pinned versions; run $0"

# nearest_version PKG WANT: the existing version of PKG closest to WANT
# (same major.minor preferred, then smallest distance in patch/minor/major).
nearest_version() {
  npm view "$1" versions --json 2>/dev/null | node -e '
    const want = process.argv[1].split(/[.-]/).slice(0, 3).map(Number);
    let all = JSON.parse(require("fs").readFileSync(0, "utf8"));
    if (!Array.isArray(all)) all = [all];
    const rel = all.filter(v => /^\d+\.\d+\.\d+$/.test(v));
    const key = v => { const p = v.split(".").map(Number);
      return [Math.abs(p[0]-want[0]), Math.abs(p[1]-want[1]), Math.abs(p[2]-want[2]), -p[2]]; };
    rel.sort((a, b) => { const x = key(a), y = key(b);
      for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] - y[i]; return 0; });
    process.stdout.write(rel[0] || "");' "$2"
}

# Check every pin exists in the registry before touching node_modules.
missing=0
for i in "${!pkgs[@]}"; do
  spec=${pkgs[$i]}@${vers[$i]}
  got=$(npm view "$spec" version 2>/dev/null | tail -n1 || true)
  if [ "$got" = "${vers[$i]}" ]; then
    continue
  fi
  near=$(nearest_version "${pkgs[$i]}" "${vers[$i]}" || true)
  if [ -z "$near" ]; then
    log "${pkgs[$i]}: pinned ${vers[$i]} not found and no versions listed (registry unreachable?)"
    missing=1
  elif [ "${AGENT_CLIS_ALLOW_NEAREST:-0}" = 1 ]; then
    log "${pkgs[$i]}: pinned ${vers[$i]} does not exist; using nearest existing $near"
    vers[$i]=$near
  else
    log "${pkgs[$i]}: pinned ${vers[$i]} does not exist in the registry; nearest existing is $near" \
        "(update its pin in ci/agent-clis/package.json, or set AGENT_CLIS_ALLOW_NEAREST=1)"
    missing=1
  fi
done
[ "$missing" = 0 ] || die "some pinned versions do not exist"

# One package.json with exact versions; npm keeps its lock file beside it.
mkdir -p "$DIR"
rm -f "$STAMP"
if [ "$mode" = force ]; then
  rm -rf "$DIR/node_modules" "$DIR/package-lock.json"
fi
# The pin file's dependencies (at the versions chosen above) and its
# `allowScripts`: npm 11 blocks install scripts nobody approved. The pin
# file approves the CLIs whose postinstall puts the native binary in place,
# for their pinned version only (a version chosen in its place with
# AGENT_CLIS_ALLOW_NEAREST=1 is not approved: its binary may then be
# missing, which the smoke test below reports), and denies gemini's
# optional native addons (they would need node-gyp and Node headers;
# gemini ships a prebuilt @lydell/node-pty).
node -e '
  const f = require(process.argv[1]);
  const chosen = JSON.parse(process.argv[2]);
  const allow = {};
  for (const [key, yes] of Object.entries(f.allowScripts || {})) {
    const at = key.lastIndexOf("@");
    const p = at > 0 ? key.slice(0, at) : key;
    if (at > 0 && p in chosen && key.slice(at + 1) !== chosen[p]) continue;
    allow[key] = yes;
  }
  process.stdout.write(JSON.stringify({
    name: "orch-agent-clis", private: true,
    description: "Generated by scripts/install-agent-clis.sh; do not edit.",
    dependencies: chosen, allowScripts: allow }, null, 2) + "\n");' "$PINS" \
  "$(for i in "${!pkgs[@]}"; do printf '%s\n%s\n' "${pkgs[$i]}" "${vers[$i]}"; done \
     | node -e 'const l=require("fs").readFileSync(0,"utf8").split("\n");const o={};for(let i=0;i+1<l.length;i+=2)if(l[i])o[l[i]]=l[i+1];process.stdout.write(JSON.stringify(o))')" \
  >"$DIR/package.json.new" || die "cannot write $DIR/package.json"
mv "$DIR/package.json.new" "$DIR/package.json"

log "installing into $DIR: $(for i in "${!pkgs[@]}"; do printf '%s@%s ' "${pkgs[$i]}" "${vers[$i]}"; done)"
start=$(date +%s.%N)
# Optional dependencies carry the native binaries (claude, codex, opencode,
# copilot): never omit them. Install scripts are needed (claude, opencode).
npm install --prefix "$DIR" --no-audit --no-fund --include=optional \
  --save-exact --loglevel=warn >&2 \
  || die "npm install failed"
end=$(date +%s.%N)

all_installed || die "npm install finished but some CLIs are not at their pinned versions"

# Smoke test: each binary must run and report its pinned version. This catches
# a skipped postinstall (claude, opencode) or a missing platform package (the
# native binaries come as optional dependencies). Fresh HOME, no inherited env.
# Copilot unpacks itself (~235 MB) into $COPILOT_CACHE_HOME/pkg on first run
# (default ~/.cache/copilot, i.e. once per fresh HOME); this warms a shared
# one in $DIR/copilot-cache that callers can pass as COPILOT_CACHE_HOME.
smoke_home=$(mktemp -d)
trap 'rm -rf "$smoke_home"' EXIT
bad=0
for i in "${!pkgs[@]}"; do
  out=$(cd "$smoke_home" && env -i PATH="$BIN:$(dirname "$(command -v node)"):/usr/bin:/bin" \
        HOME="$smoke_home" COPILOT_CACHE_HOME="$DIR/copilot-cache" COPILOT_AUTO_UPDATE=false \
        timeout 60 "$BIN/${bins[$i]}" --version </dev/null 2>/dev/null) || true
  if [[ $out != *"${vers[$i]}"* ]]; then
    log "${bins[$i]} --version printed '${out//$'\n'/ }', expected ${vers[$i]}"
    bad=1
  fi
done
[ "$bad" = 0 ] || die "some CLIs do not run"
printf '%s\n' "$stamp_text" >"$STAMP"
secs=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')
total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
size=$(du -sh "$DIR" | cut -f1)
log "npm install took ${secs}s (${total}s with the smoke test); $DIR is $size"
print_bins
