"""Chapter 11's Vision Transformer as one file that the course's web page runs in the browser.

:func:`export_chapter_model` trains the chapter's :class:`~attnlib.chapters.vit.TinyViT` as the
chapter does (``vit.trained("vit", 0, ...)``: seed 0, the chapter's configuration and learning
rate, on one thread) and writes one JSON file: the configuration, every weight as little-endian
float32 (base64), one test digit of each class (their grey levels 0-16, as scikit-learn ships
them) and the **mean maps**: the class token's attention in every head and its attention
rollout, averaged over the 360 test images. The mean map is what position alone would give:
one map for every image (``attnlib.chapters.vit_controls``'s control). The chapter-11 page
(``book/_static/explorers/ch11.js``) runs the forward pass on a chosen or drawn digit and
shows its maps beside the mean maps; tests/site/test_explorer_ch11.py checks that its numbers
are :func:`forward_with_attention`'s, within float32 rounding.

The book's build calls :func:`export_chapter_model` (book/_ext/course_explorers.py, cached).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from attnlib.chapters import packing, vit
from attnlib.vision import attention_rollout, patchify

__all__ = [
    "CHAPTER_SEED",
    "chapter_model",
    "FORMAT",
    "examples",
    "export_chapter_model",
    "forward_with_attention",
    "load_model",
    "load_test",
    "mean_maps",
    "model_to_dict",
]

FORMAT = "attnlib-tiny-vit"
VERSION = 1
CHAPTER_SEED = 0  # book/11-vision-transformer.ipynb: vit.trained("vit", 0, x_train, y_train)
GREY_LEVELS = 16  # vit.digits() divides scikit-learn's grey levels 0-16 by 16


# the entries of the file's config that TinyViT takes (the others describe the input)
_MODEL_ARGUMENTS = ("d_model", "num_heads", "d_ff", "num_layers", "patch_size", "positions", "num_classes")


def _config(model: vit.TinyViT) -> dict:
    block = model.blocks[0]
    embed = model.patches
    return {
        "image_size": vit.IMAGE_SIZE,
        "patch_size": embed.patch_size,
        "in_channels": embed.in_channels,
        "d_model": embed.d_model,
        "num_heads": block.attn.num_heads,
        "d_ff": block.linear1.out_features,
        "num_layers": len(model.blocks),
        "num_classes": model.head.out_features,
        "positions": model.positions is not None,
        "layer_norm_eps": float(block.norm1.eps),
    }


def _check(model: nn.Module) -> None:
    if not isinstance(model, vit.TinyViT):
        raise TypeError(f"vit_export: model must be an attnlib.chapters.vit.TinyViT, got {type(model)}")
    for i, block in enumerate(model.blocks):
        plain = (
            block.norm_first
            and block.residual
            and block.activation == "relu"
            and block.linear1 is not None
            and isinstance(block.norm1, nn.LayerNorm)
            and block.attn.q_proj.bias is not None
        )
        if not plain:
            raise ValueError(
                f"vit_export: model.blocks[{i}] is not the chapter's block (pre-norm, residual, relu "
                "feed-forward, LayerNorm, projections with bias); the page runs that block only"
            )


@torch.no_grad()
def forward_with_attention(model: vit.TinyViT, images: torch.Tensor) -> dict:
    """What the page shows for ``images`` (B, 1, 8, 8), computed by attnlib.

    ``"logits"`` (B, classes), equal to ``model(images)``; ``"attention"`` every head's weights
    (layers, B, h, 1 + N, 1 + N) (``vit.attention_maps``); ``"rollout"`` (B, 1 + N), the class
    token's row of ``attention_rollout`` (its own share first, then the N patches, as
    ``vit.rollout_to_image`` reads them); ``"patches"`` (B, N, p * p) (``attnlib.patchify``).
    """
    model.eval()
    maps = vit.attention_maps(model, images)  # (layers, B, h, 1 + N, 1 + N)
    return {
        "logits": model(images),
        "attention": maps,
        "rollout": attention_rollout(maps)[:, 0],  # (B, 1 + N)
        "patches": patchify(images, model.patches.patch_size),
    }


@torch.no_grad()
def mean_maps(model: vit.TinyViT, images: torch.Tensor) -> dict:
    """The position-matched baseline: the class token's maps averaged over ``images``.

    ``"attention"`` (layers, h, 1 + N): each head's class-token row, averaged;
    ``"rollout"`` (1 + N): the class token's rollout row, averaged; ``"rollout_normalised"``
    (N): each image's rollout over the patches normalised to sum to 1, then averaged (the
    mean map of ``vit_controls.rollout_baselines``, with which the page measures the share
    on ink).
    """
    out = forward_with_attention(model, images)
    grid = vit.rollout_to_image(model, images).flatten(1)  # (B, N)
    return {
        "attention": out["attention"][:, :, :, 0].mean(1),  # (layers, h, 1 + N)
        "rollout": out["rollout"].mean(0),  # (1 + N,)
        "rollout_normalised": (grid / grid.sum(1, keepdim=True)).mean(0),  # (N,)
    }


def examples(images: torch.Tensor, labels: torch.Tensor) -> list[dict]:
    """The first test image of each class, as grey levels 0-16: ``{"index", "label", "pixels"}``."""
    levels = images * GREY_LEVELS
    if not torch.equal(levels, levels.round()):
        raise ValueError("vit_export.examples: images are not grey levels 0-16 divided by 16")
    out = []
    for label in sorted(set(labels.tolist())):
        index = int((labels == label).nonzero()[0])
        pixels = levels[index, 0].round().to(torch.int64)  # (8, 8)
        out.append({"index": index, "label": int(label), "pixels": pixels.tolist()})
    return out


def model_to_dict(model: vit.TinyViT, name: str = "", test: tuple | None = None) -> dict:
    """The JSON-ready description of ``model``; with ``test`` = (images, labels), also the
    test digits (:func:`examples`), the mean maps (:func:`mean_maps`) and the test accuracy."""
    _check(model)
    data = {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "config": _config(model),
        "grey_levels": GREY_LEVELS,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "tensors": {key: packing.pack(value) for key, value in model.state_dict().items()},
    }
    if test is not None:
        images, labels = test
        means = mean_maps(model, images)
        data["test"] = {
            "n_images": len(labels),
            "accuracy": vit.accuracy(model, images, labels),
            "examples": examples(images, labels),
            "mean_attention": packing.pack(means["attention"]),
            "mean_rollout": packing.pack(means["rollout"]),
            "mean_rollout_normalised": packing.pack(means["rollout_normalised"]),
        }
    return data


def load_model(path_or_dict, dtype: torch.dtype = torch.float32) -> vit.TinyViT:
    """A TinyViT (eval mode) with the weights of an exported file (or its dict)."""
    data = packing.read(path_or_dict, FORMAT)
    model = vit.TinyViT(**{name: data["config"][name] for name in _MODEL_ARGUMENTS})
    model.load_state_dict({key: packing.unpack(t) for key, t in data["tensors"].items()})
    return model.to(dtype).eval()


def load_test(path_or_dict) -> dict:
    """The test part of an exported file: its examples and its mean maps as tensors."""
    data = packing.read(path_or_dict)
    test = dict(data["test"])
    for key in ("mean_attention", "mean_rollout", "mean_rollout_normalised"):
        test[key] = packing.unpack(test[key])
    return test


def chapter_model() -> vit.TinyViT:
    """Chapter 11's ViT, trained as the chapter trains it (seed 0, one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, y = vit.digits()["train"]
        return vit.trained("vit", CHAPTER_SEED, x, y).eval()
    finally:
        torch.set_num_threads(threads)


def export_chapter_model(path: str | Path) -> Path:
    """Train chapter 11's ViT as the chapter does and write it, its test digits and mean maps."""
    model = chapter_model()
    test = vit.digits()["test"]
    data = model_to_dict(model, f"chapter 11's ViT (seed {CHAPTER_SEED})", test=test)
    if not data["test"]["accuracy"] > 0.5:
        raise RuntimeError(
            f"export_chapter_model: the chapter's ViT has test accuracy {data['test']['accuracy']:.3f}"
        )
    path = Path(path)
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    return path
