#!/usr/bin/env bash
# Run the whole test suite: lint, unit and property tests, nbval on the
# notebooks, the exercise-sync check and the strict book build.
# Extra arguments go to pytest, e.g.  bash tools/test.sh -m "not book" tests/
# The tests run on two workers where nproc gives two CPUs or more (COURSE_TEST_WORKERS=1:
# one process, e.g. to debug with -s or --pdb).
# Every book/ and solutions/ notebook runs twice: on this CPU's float path and as
# "[default-1thread]" (ATEN_CPU_CAPABILITY=default, one thread; see conftest.py);
# --native-only skips the second run. tests/test_float_paths.py runs tests/library on
# that path, tests/test_binder.py every notebook in Binder- and Colab-like environments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# No MPLBACKEND here: Jupyter kernels need their inline backend to show figures.
unset MPLBACKEND
export PYTHONHASHSEED=0
# Idle OpenMP threads sleep instead of spinning: the suite runs kernels, sandboxes and
# sweeps beside its own process on two cores, and torch's spinning threads then steal the
# cores they wait for (one exercise's bank: 4.9 s spinning, 1.1 s passive, at load 4.8).
# It changes no number: only how a waiting thread waits.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Two workers (pytest-xdist; conftest.py's scheduler keeps a notebook, a test module and the
# website's tests whole on one worker, and sends the longest units first); the times of both are
# in CONTRIBUTING.md ("Tests"). Not more than two by default: the course and its tests are made
# for two cores, and the grader's tests run sandboxes beside the workers.
cpus=$(nproc 2>/dev/null || echo 1)
n_workers="${COURSE_TEST_WORKERS:-$(( cpus >= 2 ? 2 : 1 ))}"
workers=()
if [ "$n_workers" -gt 1 ]; then
  workers=(-n "$n_workers" --dist loadscope --no-loadscope-reorder)
fi
exec .venv/bin/python -m pytest ${workers[@]+"${workers[@]}"} "$@"
