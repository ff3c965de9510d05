"""Execute notebooks in place with stored outputs (for solutions/), as nbval will.

    python tools/execute.py solutions/02-additive-attention.ipynb [...]

Run from the repository root with the course environment; the kernel is this
interpreter, so it sees the installed attnlib.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

_DROP = ("execution", "ExecuteTime", "collapsed", "scrolled")


def execute(path: Path, timeout: int = 600) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    for cell in nb.cells:
        for key in _DROP:
            cell.metadata.pop(key, None)
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    print(f"executed {path}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        execute(Path(arg))
