#!/usr/bin/env bash
# Create or update .venv with the pinned course environment and attnlib.
# Quick when nothing changed: a stamp holds the hash of the requirement files.
#
#   PYTHON=python3.11 bash tools/setup.sh    # choose the interpreter (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
stamp=.venv/.course-env-stamp
want=$(cat requirements.txt pyproject.toml tools/setup.sh | sha256sum | cut -d' ' -f1)

if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

echo "setting up the course environment in .venv (first run: a few minutes)"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --progress-bar off --upgrade pip
# torch first and alone, pinned to the CPU build (requirements.txt pins the same version).
.venv/bin/python -m pip install --quiet --progress-bar off "$(grep -E '^torch==' requirements.txt)"
.venv/bin/python -m pip install --quiet --progress-bar off -r requirements.txt
.venv/bin/python -m pip install --quiet --progress-bar off --no-deps -e .
.venv/bin/python -m pip check
echo "$want" > "$stamp"
echo "course environment ready: .venv"
