"""Alias: ``python -m attnlib.grade ...`` runs ``python -m coursetools.grade ...``."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    print("note: this command now lives in `python -m coursetools.grade`; running it", file=sys.stderr)
    from coursetools.grade.__main__ import main

    sys.exit(main())
