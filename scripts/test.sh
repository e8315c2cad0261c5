#!/usr/bin/env bash
# Set up (idempotent) and run every check: ruff, then the grader's own test suite
# (unit, sandbox adversarial, power, service and browser tests). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/pytest "$@"
