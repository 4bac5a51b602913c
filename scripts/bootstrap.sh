#!/usr/bin/env bash
# Idempotent developer/CI setup:
#   - from Debian (apt), when missing: redis-server, chromium (browser tests) and fonts with Hebrew
#     and Cyrillic glyphs (DejaVu), in one apt-get run,
#   - .venv (python3.11) with every package of the repo installed editable, pinned by constraints.txt,
#     plus the test tools (Playwright's Python client drives Debian's chromium: never `playwright
#     install`, nothing is downloaded at run time),
#   - the studio web app: `npm ci` in web/ and `npm run build` into the gateway's package,
#   - the tool-pack tests' third-party OpenAPI documents (the Swagger Petstore of
#     @readme/oas-examples): `npm ci` in tests/openapi, never committed, never fetched by a test.
# Stamps make a second run a fast no-op: .venv's keyed on constraints.txt, the pyproject.toml files
# and this script; web/'s on its lock file (npm ci) and its sources (build); tests/openapi's on its
# lock file. FORCE=1 redoes them all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
STAMP="$VENV/.spotter-bootstrap"
PACKAGES=(shared services/gateway services/orchestrator services/tool-runner services/billing services/rag simulator cli)
TEST_DEPS=(pytest pytest-asyncio pytest-timeout testcontainers httpx playwright kubernetes-validate jsonschema pyyaml py-spy)
WEB="$ROOT/web"
WEB_DIST="$ROOT/services/gateway/spotter_gateway/web/dist"

log() { echo "[bootstrap] $*" >&2; }

# --- system packages --------------------------------------------------------------------------
deb_installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
APT=()
if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then APT+=(redis-server); fi
[ -x /usr/bin/chromium ] || APT+=(chromium)
# DejaVu covers Latin, Hebrew and Cyrillic: the browser tests' screenshots show real glyphs, not boxes.
deb_installed fonts-dejavu-core || APT+=(fonts-dejavu-core)
if [ ${#APT[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { log "missing ${APT[*]} and we are not root: apt-get install ${APT[*]}"; exit 1; }
        SUDO="sudo"
    fi
    log "installing ${APT[*]} (apt)"
    $SUDO apt-get update -qq
    # policy-rc.d on these machines keeps the package from starting a system-wide redis
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${APT[@]}" >/dev/null
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

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
PIPLOG="$VENV/bootstrap.log"
pip_run() {  # pip's chatter goes to $PIPLOG; shown only when it fails
    if ! "${PIP[@]}" "$@" >>"$PIPLOG" 2>&1; then
        tail -n 60 "$PIPLOG" >&2
        log "pip $1 failed (full log: $PIPLOG)"
        exit 1
    fi
}

python_env() {
    local want
    want=$(hash_inputs)
    if [ "${FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
        log "python: up to date (.venv matches constraints.txt and pyproject files)"
        return
    fi
    : > "$PIPLOG"
    SECONDS=0
    log "installing pinned pip + setuptools"
    pip_run install -c constraints.txt pip setuptools
    local editables=()
    for p in "${PACKAGES[@]}"; do editables+=(-e "$p"); done
    log "installing ${PACKAGES[*]} (editable) + ${TEST_DEPS[*]}"
    # --no-build-isolation: build the editables with the pinned setuptools above, no per-package build env
    pip_run install --no-build-isolation -c constraints.txt "${editables[@]}" "${TEST_DEPS[@]}"
    pip_run check
    echo "$want" > "$STAMP"
    log "python: done in ${SECONDS}s (pip log: $PIPLOG)"
}

# --- web app ---------------------------------------------------------------------------------
web_hash() {  # $@: files whose names and contents decide the stamp
    { node --version; for f in "$@"; do echo "== $f"; cat "$f"; done; } | sha256sum | cut -d' ' -f1
}

web_app() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        log "node and npm are needed to build the web app (web/): install Node.js >= 20.19 with npm, then re-run"
        exit 1
    fi
    local deps_stamp="$WEB/node_modules/.spotter-npm-ci" build_stamp="$WEB/node_modules/.spotter-build"
    local deps build npmlog="$WEB/node_modules/.spotter-npm.log"
    deps=$(cd "$WEB" && web_hash package.json package-lock.json)
    if [ "${FORCE:-0}" = 1 ] || [ ! -f "$deps_stamp" ] || [ "$(cat "$deps_stamp")" != "$deps" ]; then
        SECONDS=0
        log "web: npm ci"
        local out
        if ! out=$(cd "$WEB" && npm ci --no-audit --no-fund 2>&1); then
            echo "$out" | tail -n 60 >&2
            log "web: npm ci failed"
            exit 1
        fi
        echo "$out" > "$npmlog"
        echo "$deps" > "$deps_stamp"
        log "web: npm ci done in ${SECONDS}s"
    fi
    build=$(cd "$WEB" && web_hash package.json package-lock.json tsconfig.json vite.config.ts index.html \
        $(find src -type f | LC_ALL=C sort))
    if [ "${FORCE:-0}" = 1 ] || [ ! -f "$WEB_DIST/index.html" ] || [ ! -f "$build_stamp" ] || [ "$(cat "$build_stamp")" != "$build" ]; then
        SECONDS=0
        log "web: npm run build (tsc --noEmit, vite build)"
        local out
        if ! out=$(cd "$WEB" && npm run build 2>&1); then
            echo "$out" | tail -n 60 >&2
            log "web: build failed"
            exit 1
        fi
        echo "$build" > "$build_stamp"
        log "web: built in ${SECONDS}s"
    else
        log "web: up to date (bundle matches web/ sources)"
    fi
}

# --- third-party OpenAPI documents for the tests -----------------------------------------------
openapi_docs() {  # node and npm: checked by web_app, which runs first
    local dir="$ROOT/tests/openapi"
    local stamp="$dir/node_modules/.spotter-npm-ci" deps
    deps=$(cd "$dir" && web_hash package.json package-lock.json)
    if [ "${FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$deps" ]; then
        log "openapi: up to date (tests/openapi/node_modules matches its lock file)"
        return
    fi
    SECONDS=0
    log "openapi: npm ci in tests/openapi"
    local out
    if ! out=$(cd "$dir" && npm ci --no-audit --no-fund 2>&1); then
        echo "$out" | tail -n 60 >&2
        log "openapi: npm ci failed"
        exit 1
    fi
    echo "$deps" > "$stamp"
    log "openapi: npm ci done in ${SECONDS}s"
}

python_env
web_app
openapi_docs
