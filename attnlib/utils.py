"""Small helpers shared by the chapters."""

from __future__ import annotations

import numbers
import random

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's generators so that a chapter reruns identically on a CPU.

    Parameters
    ----------
    seed : int
        In ``[0, 2**32)``, the range NumPy's legacy generator accepts.

    Returns
    -------
    None
        The three global generators are seeded as a side effect.

    Raises
    ------
    TypeError
        ``seed`` is not an integer.
    ValueError
        ``seed`` is negative or too large.

    Examples
    --------
    >>> import torch
    >>> seed_everything(0); a = torch.rand(1)
    >>> seed_everything(0); torch.equal(a, torch.rand(1))
    True
    """
    import torch

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed_everything: seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed_everything: seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - chapters and seeds use the legacy global generator
    torch.manual_seed(seed)


def glue(name: str, value, display: bool = True) -> None:
    """Record ``value`` for the book's text under ``name`` (myst-nb's ``glue``), wherever the chapter runs.

    In the built book (myst-nb installed) this is ``myst_nb.glue``, so the page's
    ``{glue:text}`` roles show the value. Where myst-nb is not installed (Binder, Colab, a
    plain Jupyter) the chapter still runs: the value is shown when ``display`` is true and
    otherwise only kept in ``attnlib.utils.GLUED``.

    Parameters
    ----------
    name : str
        The key the book's text refers to.
    value : object
        What to show (a number, a figure, a string).
    display : bool, optional
        Show the value in the cell's output as well (myst-nb's default).

    Returns
    -------
    None

    Examples
    --------
    >>> glue("answer", 42, display=False)
    >>> GLUED["answer"]
    42
    """
    GLUED[name] = value
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:
        if display:
            from IPython.display import display as _show

            _show(value)
        return
    _myst_glue(name, value, display=display)


GLUED: dict = {}
# every value glued in this Python session, by name (see glue)


def show_source(obj, docstrings: bool = False, width: int = 80):
    """The source of a library function or class, syntax-highlighted in a notebook.

    For a chapter that wants to show how ``attnlib`` computes something. Docstrings are
    left out unless asked for: the page shows the code that carries the idea.

    Parameters
    ----------
    obj : callable
        What to show.
    docstrings : bool, optional
        Keep the docstrings (default: drop them).
    width : int, optional
        The page's column count (default 80): a trailing comment that would push its
        line past it is shown on its own lines above the code instead.

    Returns
    -------
    IPython.display.Markdown
        A fenced Python block: highlighted in Jupyter and, with the site's own colours, on
        the built page; ``.data`` is its text.

    Examples
    --------
    >>> print(show_source(seed_everything).data.splitlines()[1])
    def seed_everything(seed: int) -> None:
    """
    import ast
    import inspect
    import textwrap

    from IPython.display import Markdown

    source = textwrap.dedent(inspect.getsource(obj))
    if not docstrings:
        lines = source.splitlines()
        drop: set[int] = set()
        for node in ast.walk(ast.parse(source)):
            body = getattr(node, "body", None)
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                drop.update(range(body[0].lineno - 1, body[0].end_lineno))
        source = "\n".join(line for i, line in enumerate(lines) if i not in drop) + "\n"
    return Markdown(f"```python\n{_fit_comments(source, width)}```")


def _fit_comments(source: str, width: int) -> str:
    """Move each trailing comment that pushes its line past ``width`` onto its own lines above.

    The page shows the library's code in a column of ``width`` characters; a long
    comment after the code would otherwise run off it. Only comments move (found by
    :mod:`tokenize`, so a ``#`` inside a string stays), wrapped at ``width`` with the
    code's indentation; the code itself is unchanged.
    """
    import io
    import textwrap
    import tokenize

    lines = source.splitlines()
    comments = {}  # line index -> column where its trailing comment starts
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            if lines[row - 1][:col].strip():  # code before it: a trailing comment
                comments[row - 1] = col
    out = []
    for i, line in enumerate(lines):
        if i in comments and len(line) > width:
            col = comments[i]
            code, comment = line[:col].rstrip(), line[col:].lstrip("#").strip()
            indent = code[: len(code) - len(code.lstrip())]
            wrapped = textwrap.wrap(comment, width=max(width - len(indent) - 2, 20))
            out += [f"{indent}# {part}" for part in wrapped] + [code]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def reset_parameters(module, generator):
    """Draw every parameter of a torch module from ``generator``, never from the global RNG.

    A model built by an exercise case or a chapter's experiment must not depend
    on, nor change, torch's global random state (the grader runs cases in
    concurrent threads; a chapter's cells must give the same result when run
    again). Embeddings get N(0, 1) (their padding row zero), recurrent and
    linear layers U(-1/sqrt(n), 1/sqrt(n)) with n the hidden size or the input
    size, as torch's own initialisation; anything else N(0, 0.1^2).

    Parameters
    ----------
    module : torch.nn.Module
        The model; its parameters are overwritten in place.
    generator : torch.Generator
        Where the draws come from.

    Returns
    -------
    torch.nn.Module
        ``module`` itself.

    Examples
    --------
    >>> import torch
    >>> make = lambda: reset_parameters(torch.nn.Linear(3, 2), torch.Generator().manual_seed(0))
    >>> torch.equal(make().weight, make().weight)
    True
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for sub in module.modules():
            for p in sub.parameters(recurse=False):
                if isinstance(sub, nn.Embedding):
                    p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))
                    if sub.padding_idx is not None:
                        p[sub.padding_idx].zero_()
                    continue
                if isinstance(sub, nn.RNNBase):
                    bound = sub.hidden_size**-0.5
                elif isinstance(sub, nn.Linear):
                    bound = sub.in_features**-0.5
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
                    continue
                p.copy_((torch.rand(p.shape, generator=generator, dtype=p.dtype) * 2 - 1) * bound)
    return module
