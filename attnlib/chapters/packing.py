"""Tensors packed for the website's explorers: float32 little-endian bytes in base64.

The files of chapter 10's and chapter 11's explorers (:mod:`attnlib.chapters.web_export`,
:mod:`attnlib.chapters.vit_export`) hold every tensor as ``{"shape": [...], "data": "..."}``,
the form the page's JavaScript reads; this module writes and reads that form for both.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import torch


def pack(value: torch.Tensor) -> dict:
    """``value`` as ``{"shape", "data"}``: its float32 little-endian bytes in base64."""
    array = value.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
    return {"shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode("ascii")}


def unpack(packed: dict) -> torch.Tensor:
    """The float32 tensor of a :func:`pack` dict."""
    array = np.frombuffer(base64.b64decode(packed["data"]), dtype="<f4").reshape(packed["shape"])
    return torch.from_numpy(array.copy())


def read(path_or_dict, file_format: str | None = None) -> dict:
    """An exported file's dict: ``path_or_dict`` itself when it is one, else the JSON at that path.

    With ``file_format``, a dict whose ``"format"`` is another raises ValueError (as
    ``load_model`` says it).
    """
    data = path_or_dict
    if not isinstance(data, dict):
        data = json.loads(Path(path_or_dict).read_text(encoding="utf-8"))
    if file_format is not None and data.get("format") != file_format:
        raise ValueError(f"load_model: not an {file_format} file (format {data.get('format')!r})")
    return data
