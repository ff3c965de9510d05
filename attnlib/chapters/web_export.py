"""Chapter 10's language model as one file that the course's web page runs in the browser.

:func:`export_model` writes a :class:`~attnlib.chapters.tiny_lm.TinyDecoderLM` (the chapter's,
or the one a learner trained in the exercise notebook) to a JSON file: its configuration, the
copy language's vocabulary and every weight as little-endian float32 (base64). The chapter-10
page of the course's website opens such a file from a file picker and runs it in the page with
a small hand-written forward pass (``book/_static/explorers/ch10.js``): the same logits,
attention weights of every head and greedy tokens as torch, within float32 rounding
(tests/site/test_explorers.py checks it end to end).

:func:`export_chapter_model` trains the chapter's model (seed 0, 500 steps, the chapter's
configuration, one thread, as the chapter does) and exports it; the book's build calls it
(book/_ext/course_explorers.py). :func:`load_model` reads a file back into a model, and
:func:`forward_with_attention` gives the logits and every head's attention weights that the
page shows.

Example (in the chapter-10 exercise notebook)::

    from attnlib.chapters import web_export
    web_export.export_model(model, "my-copy-model.json")  # then open it in the chapter's page

Chapter 12's character model (the shipped checkpoint, or a learner's) goes to the page in a
binary file instead (3.3 MB of float32 is too much for base64 JSON): :func:`export_char_model`
writes ``ATTNCHAR``, a little-endian uint32 header length, a JSON header (configuration, the
characters of the vocabulary, each tensor's name, shape and offset) padded to 4 bytes, then
every weight as little-endian float32. ``book/_static/explorers/ch12.js`` reads it;
:func:`export_chapter_char_model` writes the shipped checkpoint (the book's build calls it)
and :func:`load_char_model` reads a file back (tests/site/test_explorer_ch12.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attnlib.chapters import packing, tiny_lm

__all__ = [
    "CHAR_FORMAT",
    "CHAR_MODEL_FILE",
    "FORMAT",
    "char_model_to_bytes",
    "export_chapter_char_model",
    "export_chapter_model",
    "export_char_model",
    "export_model",
    "forward_with_attention",
    "load_char_model",
    "load_model",
    "model_to_dict",
]

FORMAT = "attnlib-tiny-lm"
VERSION = 1
# The chapter's model (book/10-transformer.ipynb, "A small language model").
CHAPTER_CONFIG = {"d_model": 64, "num_heads": 4, "d_ff": 128, "num_layers": 2}
CHAPTER_SEED, CHAPTER_STEPS = 0, 500


def _config(model: tiny_lm.TinyDecoderLM) -> dict:
    block = model.blocks[0]
    return {
        "d_model": model.embed.embedding_dim,
        "num_heads": block.attn.num_heads,
        "d_ff": block.linear1.out_features if block.linear1 is not None else 0,
        "num_layers": len(model.blocks),
        "max_len": model.positions.max_len,
        "vocab_size": model.embed.num_embeddings,
        "norm_first": bool(block.norm_first),
        "residual": bool(block.residual),
        "layer_norm": isinstance(block.norm1, nn.LayerNorm),
        "feed_forward": block.linear1 is not None,
        "final_norm": isinstance(model.norm, nn.LayerNorm),
        "layer_norm_eps": float(block.norm1.eps) if isinstance(block.norm1, nn.LayerNorm) else 1e-5,
    }


def model_to_dict(model: tiny_lm.TinyDecoderLM, name: str = "") -> dict:
    """The JSON-ready description of ``model``: configuration, vocabulary and float32 weights.

    Raises TypeError for anything but a TinyDecoderLM, ValueError for a block the page does
    not run (an activation other than relu, blocks that differ from each other, a vocabulary
    other than the copy language's).
    """
    if not isinstance(model, tiny_lm.TinyDecoderLM):
        raise TypeError(
            f"export_model: model must be an attnlib.chapters.tiny_lm.TinyDecoderLM, got {type(model)}"
        )
    config = _config(model)
    _check_blocks(model, "export_model")
    if config["vocab_size"] != tiny_lm.COPY_VOCAB_SIZE:
        raise ValueError(
            f"export_model: model has {config['vocab_size']} tokens; "
            f"the copy language has {tiny_lm.COPY_VOCAB_SIZE}"
        )
    tensors = {key: packing.pack(value) for key, value in model.state_dict().items()}
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "config": config,
        "vocabulary": {
            "letters": tiny_lm.ALPHABET,
            "pad": tiny_lm.COPY_PAD,
            "bos": tiny_lm.COPY_BOS,
            "sep": tiny_lm.COPY_SEP,
            "eos": tiny_lm.COPY_EOS,
        },
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "tensors": tensors,
    }


def _check_blocks(model: tiny_lm.TinyDecoderLM, who: str) -> None:
    """ValueError for a block the page does not run: an activation other than relu,
    projections without bias, blocks that differ from each other in their switches."""
    for i, block in enumerate(model.blocks):
        if block.activation != "relu":
            raise ValueError(f"{who}: model.blocks[{i}] uses {block.activation!r}; the page runs relu only")
        if block.attn.q_proj.bias is None:
            raise ValueError(f"{who}: model.blocks[{i}] has projections without bias; the page needs them")
        if _config_of_block(block) != _config_of_block(model.blocks[0]):
            raise ValueError(f"{who}: model.blocks[{i}] differs from model.blocks[0] in its switches")


def _config_of_block(block) -> dict:
    return {
        "norm_first": block.norm_first,
        "residual": block.residual,
        "layer_norm": isinstance(block.norm1, nn.LayerNorm),
        "feed_forward": block.linear1 is not None,
        "activation": block.activation,
    }


def export_model(model: tiny_lm.TinyDecoderLM, path: str | Path, name: str = "") -> Path:
    """Write ``model`` to ``path`` (JSON) for the chapter-10 page's file picker; returns the path.

    One call from the exercise notebook: ``web_export.export_model(model, "my-copy-model.json")``.
    The weights are stored as float32 whatever the model's dtype.
    """
    path = Path(path)
    data = model_to_dict(model, name or path.stem)
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    return path


def _model_from_config(c: dict) -> tiny_lm.TinyDecoderLM:
    """The untrained TinyDecoderLM an exported config describes (both file formats share it)."""
    return tiny_lm.TinyDecoderLM(
        d_model=c["d_model"],
        num_heads=c["num_heads"],
        d_ff=max(c["d_ff"], 1),
        num_layers=c["num_layers"],
        max_len=c["max_len"],
        vocab_size=c["vocab_size"],
        norm_first=c["norm_first"],
        residual=c["residual"],
        layer_norm=c["layer_norm"],
        feed_forward=c["feed_forward"],
        layer_norm_eps=c["layer_norm_eps"],
    )


def load_model(path_or_dict, dtype: torch.dtype = torch.float32) -> tiny_lm.TinyDecoderLM:
    """A TinyDecoderLM (eval mode) with the weights of an exported file (or its dict)."""
    data = packing.read(path_or_dict, FORMAT)
    model = _model_from_config(data["config"])
    model.load_state_dict({key: packing.unpack(t) for key, t in data["tensors"].items()})
    return model.to(dtype).eval()


@torch.no_grad()
def forward_with_attention(
    model: tiny_lm.TinyDecoderLM, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (B, L, V) and every head's causal attention weights (layers, B, h, L, L) for ``tokens`` (B, L).

    What the chapter-10 page shows; the logits equal ``model(tokens)``.
    """
    x = model.positions(model.embed(tokens))  # (B, L, D)
    maps = []
    for block in model.blocks:
        y = block.norm1(x) if block.norm_first else x
        _, w = block.attn(y, y, y, is_causal=True, need_weights=True, average_attn_weights=False)
        maps.append(w)  # (B, h, L, L)
        x = block(x, is_causal=True)
    return model.head(model.norm(x)), torch.stack(maps)


def export_chapter_model(path: str | Path) -> Path:
    """Train chapter 10's language model as the chapter does (seed 0, 500 steps, one thread) and export it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = tiny_lm.build_model(CHAPTER_SEED, **CHAPTER_CONFIG)
        tiny_lm.train(model, steps=CHAPTER_STEPS, seed=CHAPTER_SEED)
    finally:
        torch.set_num_threads(threads)
    accuracy = tiny_lm.copy_accuracy(model, tiny_lm.test_set())
    if not math.isfinite(accuracy) or accuracy <= 0.9:
        raise RuntimeError(
            f"export_chapter_model: expected the chapter's accuracy above 0.9, got {accuracy:.3f}"
        )
    return export_model(model, path, name="chapter 10's model (seed 0, 500 steps)")


# --- chapter 12: a character model, in a binary file ------------------------------------------

CHAR_FORMAT = "attnlib-char-lm"
CHAR_VERSION = 1
CHAR_MAGIC = b"ATTNCHAR"
CHAR_MODEL_FILE = "ch12-char-model.bin"  # the chapter's model on the site (_static/explorers/models/)


def char_model_to_bytes(model: tiny_lm.TinyDecoderLM, chars, name: str = "") -> bytes:
    """``model`` (a character model of chapter 12) and its vocabulary ``chars`` (the characters
    of token ids 0 .. V-1, as :class:`attnlib.chapters.char_lm.CharVocab`'s ``chars``) as the
    bytes of the page's binary file (see the module's docstring).

    Raises TypeError for anything but a TinyDecoderLM, ValueError for a block the page does not
    run or a vocabulary whose size is not the model's.
    """
    if not isinstance(model, tiny_lm.TinyDecoderLM):
        raise TypeError(
            f"export_char_model: model must be an attnlib.chapters.tiny_lm.TinyDecoderLM, got {type(model)}"
        )
    chars = list(getattr(chars, "chars", chars))
    config = _config(model)
    _check_blocks(model, "export_char_model")
    if len(chars) != config["vocab_size"] or len(set(chars)) != len(chars):
        raise ValueError(
            f"export_char_model: the model has {config['vocab_size']} tokens but the vocabulary "
            f"has {len(chars)} characters ({len(set(chars))} distinct)"
        )
    if any(not isinstance(c, str) or len(c) != 1 for c in chars):
        raise ValueError("export_char_model: every token of the vocabulary must be one character")
    arrays, tensors, offset = [], [], 0
    for key, value in model.state_dict().items():  # a tied head is written twice (33 kB)
        array = value.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
        tensors.append({"name": key, "shape": list(array.shape), "offset": offset})
        arrays.append(array.ravel())
        offset += array.size
    header = {
        "format": CHAR_FORMAT,
        "version": CHAR_VERSION,
        "name": name,
        "config": config,
        "vocabulary": {"chars": chars},
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "values": offset,
        "tensors": tensors,
    }
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(CHAR_MAGIC) + 4 + len(text)) % 4)  # the weights start on a 4-byte boundary
    head = CHAR_MAGIC + len(text).to_bytes(4, "little") + text
    return head + np.concatenate(arrays).astype("<f4").tobytes()


def export_char_model(model: tiny_lm.TinyDecoderLM, chars, path: str | Path, name: str = "") -> Path:
    """Write ``model`` with its vocabulary ``chars`` (a CharVocab or its characters) to ``path``
    for the chapter-12 page's file picker; returns the path.

    One call from the exercise notebook: ``web_export.export_char_model(model, vocab, "my-char-model.bin")``.
    """
    path = Path(path)
    path.write_bytes(char_model_to_bytes(model, chars, name or path.stem))
    return path


def _read_char_file(data: bytes) -> tuple[dict, np.ndarray]:
    if data[: len(CHAR_MAGIC)] != CHAR_MAGIC:
        raise ValueError(f"load_char_model: not an {CHAR_FORMAT} file (no {CHAR_MAGIC!r} at its start)")
    n = int.from_bytes(data[8:12], "little")
    header = json.loads(data[12 : 12 + n].decode("utf-8"))
    if header.get("format") != CHAR_FORMAT:
        raise ValueError(f"load_char_model: not an {CHAR_FORMAT} file (format {header.get('format')!r})")
    return header, np.frombuffer(data[12 + n :], dtype="<f4")


def load_char_model(
    path_or_bytes, dtype: torch.dtype = torch.float32
) -> tuple[tiny_lm.TinyDecoderLM, list[str]]:
    """(model in eval mode, its characters) from a file :func:`export_char_model` wrote (or its bytes)."""
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    header, values = _read_char_file(data)
    model = _model_from_config(header["config"])
    state = {}
    for t in header["tensors"]:
        size = int(np.prod(t["shape"], dtype=np.int64))
        state[t["name"]] = torch.from_numpy(
            values[t["offset"] : t["offset"] + size].reshape(t["shape"]).copy()
        )
    model.load_state_dict(state)
    return model.to(dtype).eval(), list(header["vocabulary"]["chars"])


def export_chapter_char_model(path: str | Path) -> Path:
    """Write chapter 12's shipped checkpoint (:func:`attnlib.chapters.checkpoint.load_checkpoint`,
    whatever weights are shipped now) with the Tiny Shakespeare vocabulary to ``path``."""
    from attnlib.chapters import char_lm, checkpoint

    model = checkpoint.load_checkpoint()
    vocab = char_lm.CharVocab(char_lm.load_text())
    log = checkpoint.load_log()
    steps = log.get("practice", {}).get("steps")
    val = log.get("val")
    about = ", ".join(
        part
        for part in (
            f"{steps} steps" if steps else "",
            f"held-out loss {val:.3f} nats per character" if isinstance(val, float) else "",
        )
        if part
    )
    name = "chapter 12's checkpoint" + (f" ({about})" if about else "")
    return export_char_model(model, vocab, path, name=name)
