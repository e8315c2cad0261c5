#!/usr/bin/env bash
# Idempotent set-up shared by scripts/serve.sh and scripts/test.sh.
#   scripts/setup.sh           Python venv (.venv) with the project, bubblewrap, the web build
#   scripts/setup.sh --test    the same, plus what the tests need (Chromium for browser tests,
#                              PostgreSQL's server binaries: the tests start their own cluster)
# Each step is skipped when its result is already there, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

log() { printf '[setup] %s\n' "$*" >&2; }

apt_install() {
    # Debian packages, only when missing, and only as root (otherwise say what to install).
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ $(id -u) -ne 0 ]]; then
        log "missing Debian packages ${missing[*]}; install them as root (apt-get install -y ${missing[*]})"
        return 0
    fi
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

python_env() {
    local python=${PYTHON:-python3}
    [[ -x .venv/bin/python ]] || { log "creating .venv"; "$python" -m venv .venv; }
    if ! .venv/bin/python -c "import grader, torch, fastapi, hypothesis, playwright" 2>/dev/null \
        || [[ pyproject.toml -nt .venv/.installed ]]; then
        log "pip install -e .[dev] (torch==2.13.0 CPU)"
        .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
        touch .venv/.installed
    fi
}

web_build() {
    [[ -f web/package.json ]] || return 0
    if ! command -v npm >/dev/null 2>&1; then
        log "npm not found: the web page will not be built (the API still works)"
        return 0
    fi
    if [[ ! -d web/node_modules ]] || [[ web/package-lock.json -nt web/node_modules/.package-lock.json ]]; then
        log "npm ci (web)"
        (cd web && npm ci --no-audit --no-fund --loglevel=error)
    fi
    log "npm run build (web)"
    (cd web && npm run --silent build)
}

apt_install bubblewrap
[[ $want_test -eq 1 ]] && apt_install chromium fonts-dejavu-core postgresql
python_env
web_build
log "ready"
