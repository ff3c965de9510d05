"""Chapter 11's controls for the rollout: what position alone would put on the strokes.

The rollout of chapter 11's ViT puts more of its weight on patches with ink than an
even spread over the 16 patches would. But ink is not spread evenly over the grid: the
middle columns of patches have ink in nearly every digit, the outer ones in far fewer, so
a map that always looks at the middle "prefers ink" without looking at the picture. The
matched controls, on the same test images (:func:`rollout_baselines`): the mean map over
the images applied to every image (position alone), and every other image's map applied
to each image (the maps shuffled across images).

:func:`rollout_experiment` trains chapter 11's ViT from a seed (``vit.trained``, the
chapter's own recipe) and measures the rollout beside its controls; it is what
``attnlib.chapters.spread`` sweeps as ``ch11-rollout`` (a module of its own, so that the
record of :func:`attnlib.chapters.vit.experiment` stays as it was).
"""

from __future__ import annotations

import torch

from attnlib.chapters import vit
from attnlib.vision import patchify

__all__ = ["ink_patches", "rollout_baselines", "rollout_experiment"]


def ink_patches(images: torch.Tensor) -> torch.Tensor:
    """Which patches of ``images`` (B, 1, 8, 8) have ink (any pixel above 0): bool (B, 4, 4)."""
    return patchify(images, vit.PATCH).sum(-1).reshape(-1, vit.GRID, vit.GRID) > 0


@torch.no_grad()
def rollout_baselines(model, images: torch.Tensor) -> dict:
    """The rollout's share on ink beside what position alone would give, on the same images.

    Each map is the class token's rollout over the 16 patches (``vit.rollout_to_image``),
    normalised to sum to 1. Returns, each averaged over ``images``:

    * ``"own"``: each image's own map on its own ink (as ``vit.rollout_on_ink``);
    * ``"mean_map"``: the mean map over ``images``, one map for every image, on each
      image's ink: what a rollout that depends on the position alone would give;
    * ``"other_maps"``: every other image's map on each image's ink (all pairs
      ``i != j``): the maps shuffled across images;
    * ``"even"``: an even spread over the 16 patches (the share of patches with ink).
    """
    grid = vit.rollout_to_image(model, images)  # (B, 4, 4)
    maps = grid / grid.sum((1, 2), keepdim=True)  # (B, 4, 4), each sums to 1
    ink = ink_patches(images).to(maps.dtype)  # (B, 4, 4)
    n = maps.shape[0]
    own = (maps * ink).sum((1, 2))  # (B,)
    mean_map = maps.mean(0)  # (4, 4)
    on_mean = (mean_map * ink).sum((1, 2))  # (B,)
    others = (n * on_mean - own) / (n - 1)  # (B,): the mean over j != i of map j on ink i
    return {
        "own": own.mean().item(),
        "mean_map": on_mean.mean().item(),
        "other_maps": others.mean().item(),
        "even": ink.mean().item(),
    }


def rollout_experiment(seed: int) -> dict:
    """Chapter 11's ViT trained from ``seed`` (``vit.trained``) and its rollout on the 360 test images.

    Returns ``"vit"`` (test accuracy), ``"rollout_ink"`` (each image's own map on its ink),
    ``"rollout_ink_mean_map"`` and ``"rollout_ink_other_maps"`` (the controls of
    :func:`rollout_baselines`) and ``"ink_share"`` (an even spread).
    """
    data = vit.digits()
    x, y = data["train"]
    xt, yt = data["test"]
    model = vit.trained("vit", seed, x, y)
    base = rollout_baselines(model, xt)
    return {
        "vit": vit.accuracy(model, xt, yt),
        "rollout_ink": base["own"],
        "rollout_ink_mean_map": base["mean_map"],
        "rollout_ink_other_maps": base["other_maps"],
        "ink_share": base["even"],
    }
