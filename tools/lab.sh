#!/usr/bin/env bash
# Open the course in JupyterLab (installed into .venv on first use; not needed for tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/python -c "import jupyterlab" 2>/dev/null || .venv/bin/python -m pip install --quiet "jupyterlab==4.*"
exec .venv/bin/jupyter lab "$@"
