#!/usr/bin/env bash
# Build the website into _build/html (strict: every warning is an error).
# Extra arguments go to jupyter-book, e.g.  bash tools/build-book.sh --all
# The site ships the learner's attnlib wheel (_static/) and writes into the notebooks it offers
# for download where to install it from: COURSE_REPOSITORY, else the site's address
# (COURSE_SITE_URL, else html.baseurl of _config.yml), else the wheel beside the notebook
# (book/_ext/course_wheel.py; the log's "course_wheel:" line says which).
# The last means downloads that cannot install attnlib by themselves: the build warns, and so
# fails, unless told that this site has no address on purpose (a local or offline build):
#   COURSE_SITE_URL=https://<org>.github.io/<repo>/ bash tools/build-book.sh   # to publish
#   COURSE_SITE_URL=none bash tools/build-book.sh                              # local, offline
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
unset MPLBACKEND  # Jupyter kernels need their inline backend to show figures
.venv/bin/jupyter-book build . -W -n --keep-going "$@"
echo "open _build/html/index.html"
