#!/usr/bin/env bash
# Idempotent developer/CI setup:
#   - redis-server from Debian (apt) when missing,
#   - .venv (python3.11) with every package of the repo installed editable, pinned by constraints.txt,
#     plus the test tools.
# A stamp in .venv keyed on constraints.txt, the pyproject.toml files and this script makes a
# second run a fast no-op. FORCE=1 re-installs anyway.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
STAMP="$VENV/.spotter-bootstrap"
PACKAGES=(shared services/gateway services/orchestrator services/tool-runner services/billing services/rag simulator cli)
TEST_DEPS=(pytest pytest-asyncio pytest-timeout testcontainers httpx)

log() { echo "[bootstrap] $*" >&2; }

# --- system packages --------------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { log "redis-server is missing and we are not root: apt-get install redis-server"; exit 1; }
        SUDO="sudo"
    fi
    log "installing redis-server (apt)"
    $SUDO apt-get update -qq
    # policy-rc.d on these machines keeps the package from starting a system-wide redis
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

# --- python ----------------------------------------------------------------------------------
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            PYTHON=$cand; break
        fi
    done
fi
[ -n "$PYTHON" ] || { log "python3.11 not found"; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi

hash_inputs() {
    {
        echo "python $("$VENV/bin/python" -c 'import sys; print(sys.version)')"
        cat constraints.txt scripts/bootstrap.sh
        for p in "${PACKAGES[@]}"; do echo "== $p"; cat "$p/pyproject.toml"; done
    } | sha256sum | cut -d' ' -f1
}
WANT=$(hash_inputs)
if [ "${FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    log "up to date (.venv matches constraints.txt and pyproject files)"
    exit 0
fi

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
PIPLOG="$VENV/bootstrap.log"
: > "$PIPLOG"
pip_run() {  # pip's chatter goes to $PIPLOG; shown only when it fails
    if ! "${PIP[@]}" "$@" >>"$PIPLOG" 2>&1; then
        tail -n 60 "$PIPLOG" >&2
        log "pip $1 failed (full log: $PIPLOG)"
        exit 1
    fi
}
SECONDS=0
log "installing pinned pip + setuptools"
pip_run install -c constraints.txt pip setuptools
EDITABLES=()
for p in "${PACKAGES[@]}"; do EDITABLES+=(-e "$p"); done
log "installing ${PACKAGES[*]} (editable) + ${TEST_DEPS[*]}"
# --no-build-isolation: build the editables with the pinned setuptools above, no per-package build env
pip_run install --no-build-isolation -c constraints.txt "${EDITABLES[@]}" "${TEST_DEPS[@]}"
pip_run check
echo "$WANT" > "$STAMP"
log "done in ${SECONDS}s (pip log: $PIPLOG)"
