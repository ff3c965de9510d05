"""Convert a jupytext "percent" script into a clean notebook (authoring aid).

    python tools/py2nb.py chapter.py book/NN-slug.ipynb

Cell metadata written in the cell header (``# %% attnlib={"exercise": "ex-02-1", "points": 2}``)
is kept; jupytext's own bookkeeping is dropped, the notebook gets the
``python3`` kernel and the setup cell that installs attnlib where it is missing
(Colab), as tools/setup_cell.py writes it. Execute solution notebooks afterwards with
``python tools/execute.py solutions/NN-slug.ipynb``.
"""

import sys

import jupytext
import nbformat
from setup_cell import apply as add_setup_cell
from setup_cell import setup_source

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def convert(src: str, dst: str) -> None:
    nb = jupytext.read(src, fmt="py:percent")
    for cell in nb.cells:
        for key in ("lines_to_next_cell", "lines_to_end_of_cell_marker", "cell_marker"):
            cell.metadata.pop(key, None)
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    add_setup_cell(nb, setup_source())  # installs attnlib in Colab; see tools/setup_cell.py
    nbformat.validate(nb)
    nbformat.write(nb, dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    convert(sys.argv[1], sys.argv[2])
