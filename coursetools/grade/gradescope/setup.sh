#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source when it builds the
# autograder image. Base images: Ubuntu 22.04 (its python3 is 3.10) or 24.04 (3.12).
# The pinned numpy, scipy and matplotlib need Python >= @MIN_MAJOR@.@MIN_MINOR@: the environment is
# built with the system's python3 where it is new enough (24.04), else with Ubuntu's
# python3.11 (22.04's universe), else with a standalone Python 3.11 installed by uv.
# COURSE_SETUP_SOURCE, COURSE_SETUP_VENV and COURSE_SETUP_STOP=venv are for testing this
# script outside Gradescope (tests/grader/stories/test_setup_sh.py); on Gradescope the defaults hold.
set -euo pipefail
SOURCE="${COURSE_SETUP_SOURCE:-/autograder/source}"
VENV="${COURSE_SETUP_VENV:-@VENV@}"
cd "$SOURCE"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip

new_enough() {
  "$1" -c 'import sys; sys.exit(sys.version_info < (@MIN_MAJOR@, @MIN_MINOR@))' 2>/dev/null
}
pick_python() {
  local candidate
  for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && new_enough "$(command -v "$candidate")"; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}
PY="$(pick_python || true)"
if [ -z "$PY" ]; then
  echo "setup.sh: python3 is $(python3 --version 2>&1); installing Python 3.11 (Ubuntu's python3.11)"
  if apt-get install -y --no-install-recommends python3.11 python3.11-venv; then
    PY="$(pick_python || true)"
  fi
fi
if [ -z "$PY" ]; then
  echo "setup.sh: no python3.11 package here; installing a standalone Python 3.11 with uv"
  python3 -m pip install --no-cache-dir uv
  python3 -m uv python install 3.11
  PY="$(python3 -m uv python find 3.11)"
fi
echo "setup.sh: building the environment with $PY ($("$PY" --version 2>&1))"
"$PY" -m venv "$VENV"
if [ "${COURSE_SETUP_STOP:-}" = "venv" ]; then
  exit 0
fi
"$VENV/bin/python" -m pip install --no-cache-dir --upgrade pip
# the course's pinned CPU environment: torch from the CPU wheel index, never a CUDA build
"$VENV/bin/python" -m pip install --no-cache-dir -r requirements.txt
# attnlib itself, from this archive, without resolving torch again
"$VENV/bin/python" -m pip install --no-cache-dir --no-deps -e "$SOURCE"
"$VENV/bin/python" -c "import attnlib, torch; print('attnlib', attnlib.__version__, torch.__version__)"
