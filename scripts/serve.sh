#!/usr/bin/env bash
# Set up (idempotent) and start the grader service with its web page on embedded defaults:
# http://127.0.0.1:8000, SQLite in ./data. Extra arguments go to `gspo-grader serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/gspo-grader serve "$@"
