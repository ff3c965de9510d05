#!/usr/bin/env bash
# Build the website into _build/html (strict: every warning is an error).
# Extra arguments go to jupyter-book, e.g.  bash tools/build-book.sh --all
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
unset MPLBACKEND  # Jupyter kernels need their inline backend to show figures
.venv/bin/jupyter-book build . -W -n --keep-going "$@"
echo "open _build/html/index.html"
