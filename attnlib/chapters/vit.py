"""Chapter 11's Vision Transformer, the small CNN and MLP it is measured against, and the digits.

The data are scikit-learn's bundled 8x8 handwritten digits (1,797 real
images, 0-16 grey levels, shipped inside the package: nothing is
downloaded). :func:`digits` splits them once, by a fixed permutation, into
1,437 training and 360 test images, scaled to 0-1.

:class:`TinyViT` is :class:`attnlib.PatchEmbedding` (2x2 patches: a 4x4 grid
of 16 tokens) + a class token + learned positions (optional: the
permutation test switches them off) + a stack of
:class:`attnlib.transformer.TransformerBlock` (no mask: every patch sees
every patch) + a LayerNorm + a linear head on the class token.
:class:`SmallCNN` and :class:`PixelMLP` have about as many parameters.

:func:`experiment` is what ``attnlib.chapters.spread`` sweeps; the chapter
runs the same functions with ``seed=0``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.positions import LearnedPositions
from attnlib.transformer import TransformerBlock
from attnlib.vision import PatchEmbedding, attention_rollout, patchify, unpatchify

__all__ = [
    "PixelMLP",
    "SmallCNN",
    "TinyViT",
    "accuracy",
    "attention_maps",
    "build",
    "digits",
    "experiment",
    "position_similarity",
    "rollout_to_image",
    "shuffle_patches",
    "train",
]

IMAGE_SIZE = 8
PATCH = 2
GRID = IMAGE_SIZE // PATCH  # 4 x 4 patches
N_TEST = 360
STEPS = 400
FRACTIONS = (0.1, 0.3, 1.0)


def digits() -> dict:
    """scikit-learn's 8x8 digits, split once: ``{"train": (x, y), "test": (x, y)}``.

    ``x`` is float32 ``(n, 1, 8, 8)`` in 0-1 (the grey levels 0-16 divided by
    16), ``y`` long ``(n,)``. The split is a fixed permutation (its own
    generator, seed 0): 1,437 training and :data:`N_TEST` = 360 test images.
    """
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (1797, 1, 8, 8)
    y = torch.tensor(bunch.target, dtype=torch.long)  # (1797,)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    test, train = order[:N_TEST], order[N_TEST:]
    return {"train": (x[train], y[train]), "test": (x[test], y[test])}


class TinyViT(nn.Module):
    """Patches -> tokens (+ class token, + positions) -> encoder blocks -> LayerNorm -> head.

    Parameters
    ----------
    d_model, num_heads, d_ff, num_layers : int
        The encoder's size (the chapter-10 block, no mask).
    patch_size : int
        Side of a square patch (2: 16 patches of an 8x8 image).
    positions : bool
        Add a learned position vector to every token (class token included).
    num_classes : int
    """

    def __init__(
        self,
        d_model: int = 32,
        num_heads: int = 4,
        d_ff: int = 64,
        num_layers: int = 2,
        patch_size: int = PATCH,
        positions: bool = True,
        num_classes: int = 10,
    ):
        super().__init__()
        self.n_patches = (IMAGE_SIZE // patch_size) ** 2
        self.patches = PatchEmbedding(1, patch_size, d_model)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)  # (1, 1, D)
        self.positions = LearnedPositions(self.n_patches + 1, d_model) if positions else None
        self.blocks = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)  # pre-norm blocks leave the stream unnormalised
        self.head = nn.Linear(d_model, num_classes)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, 1, 8, 8) -> tokens (B, 1 + N, D), class token first."""
        x = self.patches(images)  # (B, N, D)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        x = torch.cat([cls, x], dim=1)  # (B, 1 + N, D)
        return x if self.positions is None else self.positions(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, 1, 8, 8) -> class logits (B, num_classes)."""
        x = self.tokens(images)  # (B, 1 + N, D)
        for block in self.blocks:
            x = block(x)  # no mask: every token attends to every token
        return self.head(self.norm(x[:, 0]))  # class token -> (B, classes)


class SmallCNN(nn.Module):
    """Three 3x3 convolutions (two 2x2 max-pools) and a linear head: about a TinyViT's parameters."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 40, 3, padding=1)
        self.head = nn.Linear(40 * 2 * 2, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, 1, 8, 8) -> class logits (B, num_classes)."""
        x = F.relu(self.conv1(images))  # (B, 16, 8, 8)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 4, 4)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)  # (B, 40, 2, 2)
        return self.head(x.flatten(1))  # (B, 160) -> (B, classes)


class PixelMLP(nn.Module):
    """The 64 pixels through two hidden layers: no idea of neighbourhood at all."""

    def __init__(self, hidden: int = 128, num_classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),  # (B, 1, 8, 8) -> (B, 64)
            nn.Linear(IMAGE_SIZE * IMAGE_SIZE, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden // 2),
            nn.ReLU(),
            nn.Linear(hidden // 2, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, 1, 8, 8) -> class logits (B, num_classes)."""
        return self.net(images)


MODELS = {"vit": TinyViT, "cnn": SmallCNN, "mlp": PixelMLP}
LEARNING_RATES = {"vit": 5e-3, "cnn": 3e-3, "mlp": 3e-3}


def build(kind: str, seed: int, **kwargs) -> nn.Module:
    """A model of ``MODELS[kind]`` whose initial weights come from ``seed`` alone.

    Drawn inside :func:`torch.random.fork_rng`: the global generator is left as it was.
    """
    if kind not in MODELS:
        raise ValueError(f"build: kind must be one of {tuple(MODELS)}, got {kind!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[kind](**kwargs)


def train(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    steps: int = STEPS,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
) -> list[float]:
    """AdamW, a cosine-decayed learning rate, ``steps`` seeded minibatches.

    Returns the losses. Each step draws ``batch_size`` training images
    at random (with its own generator), so every data size gets the same
    number of steps.
    """
    g = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    model.train()
    losses = []
    for _ in range(steps):
        pick = torch.randint(0, len(labels), (batch_size,), generator=g)
        loss = F.cross_entropy(model(images[pick]), labels[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``images`` whose argmax logit is the label (the model left in eval mode)."""
    model.eval()
    return (model(images).argmax(-1) == labels).float().mean().item()


def shuffle_patches(images: torch.Tensor, order: torch.Tensor, patch_size: int = PATCH) -> torch.Tensor:
    """Images (..., C, H, W) with their patches moved: new patch ``n`` is old patch ``order[n]``.

    The same ``order`` for every image: a fixed rearrangement of the picture's tiles.
    """
    H, W = images.shape[-2:]
    return unpatchify(patchify(images, patch_size)[..., order, :], patch_size, H, W)


def patch_order(seed: int = 1) -> torch.Tensor:
    """The fixed shuffle of the 16 patches that the permutation test uses (its own generator)."""
    return torch.randperm(GRID * GRID, generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def position_similarity(model: TinyViT) -> torch.Tensor:
    """Cosine similarity (N, N) of the learned position vectors of the N patches (class token left out)."""
    pos = F.normalize(model.positions.weight[1:], dim=-1)  # (N, D)
    return pos @ pos.T


def neighbour_similarity(sim: torch.Tensor) -> tuple[float, float]:
    """Mean cosine similarity of grid neighbours (4-neighbourhood) and of all other pairs of patches."""
    n = sim.shape[0]
    side = int(round(n**0.5))
    rc = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij"), -1).reshape(n, 2)
    dist = (rc[:, None] - rc[None]).abs().sum(-1)  # (N, N) Manhattan distance on the grid
    return sim[dist == 1].mean().item(), sim[dist > 1].mean().item()


@torch.no_grad()
def attention_maps(model: TinyViT, images: torch.Tensor) -> torch.Tensor:
    """Every head's attention weights (layers, B, h, 1 + N, 1 + N) of ``images`` (B, 1, 8, 8)."""
    model.eval()
    maps = []
    x = model.tokens(images)  # (B, 1 + N, D)
    for block in model.blocks:
        normed = block.norm1(x)  # pre-norm: attention reads the normalised stream
        _, w = block.attn(normed, normed, normed, need_weights=True, average_attn_weights=False)
        maps.append(w)  # (B, h, 1 + N, 1 + N)
        x = block(x)
    return torch.stack(maps)


def rollout_to_image(model: TinyViT, images: torch.Tensor) -> torch.Tensor:
    """The class token's row of the attention rollout on the patch grid: (B, 4, 4), each summing to <= 1.

    The class token's own share (column 0) is left out.
    """
    rollout = attention_rollout(attention_maps(model, images))  # (B, 1 + N, 1 + N)
    return rollout[:, 0, 1:].reshape(-1, GRID, GRID)


def _subset(n: int, fraction: float) -> torch.Tensor:
    """The first ``fraction`` of a fixed shuffle of ``n`` training images (seed 2): nested subsets."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(2))
    return order[: round(fraction * n)]


@torch.no_grad()
def rollout_on_ink(model: TinyViT, images: torch.Tensor) -> tuple[float, float]:
    """Mean share of the class token's rollout over patches (its own share left out) that falls on ink.

    Returns ``(rollout share on patches with ink, share of patches with ink)``, both averaged
    over ``images``: a rollout blind to the picture would put the second number's share there.
    """
    grid = rollout_to_image(model, images)  # (B, 4, 4)
    ink = patchify(images, PATCH).sum(-1).reshape(-1, GRID, GRID) > 0  # (B, 4, 4)
    on_ink = (grid * ink).sum((1, 2)) / grid.sum((1, 2))
    return on_ink.mean().item(), ink.float().mean().item()


def trained(
    kind: str,
    seed: int,
    images: torch.Tensor,
    labels: torch.Tensor,
    **kwargs,
) -> nn.Module:
    """:func:`build` then :func:`train` with the kind's learning rate: the recipe of every model here."""
    model = build(kind, seed, **kwargs)
    train(model, images, labels, lr=LEARNING_RATES[kind], seed=seed)
    return model


def experiment(seed: int) -> dict:
    """Chapter 11's measurements, trained from ``seed`` (weights and minibatches).

    Full training set: ``"vit"``, ``"cnn"``, ``"mlp"`` (test accuracy);
    ``"vit_nopos"`` (the ViT without positions) and ``"nopos_shuffled"`` (the
    same model on the test images with :func:`patch_order`'s shuffle),
    ``"nopos_gap"`` (the largest difference of their logits); ``"cnn_shuffled"``
    and ``"mlp_shuffled"`` (trained and tested on shuffled images);
    ``"neighbour_cos"`` / ``"other_cos"`` (:func:`neighbour_similarity` of the
    ViT's positions); ``"rollout_ink"`` / ``"ink_share"`` (:func:`rollout_on_ink`
    on the test images). Data size: ``"<kind>_sizes"``, test accuracy trained on
    10%, 30% and 100% of the training set (:data:`FRACTIONS`).
    """
    data = digits()
    x, y = data["train"]
    xt, yt = data["test"]
    order = patch_order()
    models = {kind: trained(kind, seed, x, y) for kind in MODELS}
    out: dict = {kind: accuracy(model, xt, yt) for kind, model in models.items()}
    near, far = neighbour_similarity(position_similarity(models["vit"]))
    out["neighbour_cos"], out["other_cos"] = near, far
    out["rollout_ink"], out["ink_share"] = rollout_on_ink(models["vit"], xt)
    nopos = trained("vit", seed, x, y, positions=False)
    shuffled_xt = shuffle_patches(xt, order)
    out["vit_nopos"] = accuracy(nopos, xt, yt)
    out["nopos_shuffled"] = accuracy(nopos, shuffled_xt, yt)
    with torch.no_grad():
        out["nopos_gap"] = (nopos(xt) - nopos(shuffled_xt)).abs().max().item()
    for kind in ("cnn", "mlp"):
        model = trained(kind, seed, shuffle_patches(x, order), y)
        out[f"{kind}_shuffled"] = accuracy(model, shuffled_xt, yt)
    for kind in MODELS:
        sizes = [trained(kind, seed, x[p], y[p]) for p in (_subset(len(y), f) for f in FRACTIONS[:-1])]
        out[f"{kind}_sizes"] = [accuracy(m, xt, yt) for m in sizes] + [out[kind]]
    return out
