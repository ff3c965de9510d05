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
# coursetools (the instructor's tools) is not in the learner's package: it runs from this
# checkout. A .pth file puts the checkout on the course environment's path, so that
# `python -m coursetools.grade ...` works from any folder (the guide's commands run in the
# folder of a class's download).
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD" > "$site/course-checkout.pth"
# The accessibility test's axe-core, the current release from npm (tests/site/test_accessibility.py
# reads .venv/axe/node_modules/axe-core/axe.min.js). Without npm that test skips and says why.
AXE_CORE_VERSION=4.14.1
if command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund --no-save --prefix .venv/axe "axe-core@$AXE_CORE_VERSION" >/dev/null \
    || echo "warning: npm could not install axe-core $AXE_CORE_VERSION; the accessibility test will skip" >&2
fi
echo "$want" > "$stamp"
echo "course environment ready: .venv"
