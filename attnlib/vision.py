"""Images as sequences of patches, and attention rollout (chapter 11).

A Vision Transformer (Dosovitskiy et al. 2021) cuts an image into square
patches, flattens each one, projects it to ``d_model`` and hands the row of
patch vectors to an ordinary Transformer encoder. This module holds the
pieces that do not depend on the task:

* :func:`patchify` and its inverse :func:`unpatchify`: images
  ``(..., C, H, W)`` <-> patches ``(..., N, C * p * p)``, row-major patch order;
* :class:`PatchEmbedding`: patchify, then one linear map per patch (the same
  function as a ``Conv2d`` with ``kernel_size = stride = p``);
* :func:`attention_rollout`: Abnar & Zuidema (2020)'s estimate of how much each
  input token flows into each output token through a stack of attention
  layers (heads averaged, the residual path added as ``0.5 A + 0.5 I``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from attnlib._tensors import check_floating_tensors, check_tensors
from attnlib._validate import check_flag, check_positive_int

__all__ = ["PatchEmbedding", "attention_rollout", "patchify", "unpatchify"]


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping square patches, each flattened.

    Patch ``n`` is the one in patch-row ``n // (W / p)`` and patch-column
    ``n % (W / p)`` (row-major, as one reads); inside a patch the values are
    flattened in ``(C, p, p)`` order, the order of a ``Conv2d`` weight.

    Parameters
    ----------
    images : torch.Tensor
        ``(..., C, H, W)``, any dtype; ``H`` and ``W`` divisible by ``patch_size``.
    patch_size : int
        The side ``p`` of a patch (1 or more).

    Returns
    -------
    torch.Tensor
        ``(..., N, C * p * p)`` with ``N = (H / p) * (W / p)``; the same values,
        rearranged (no arithmetic).

    Examples
    --------
    >>> image = torch.arange(16).reshape(1, 4, 4)  # (C, H, W)
    >>> patchify(image, 2)
    tensor([[ 0,  1,  4,  5],
            [ 2,  3,  6,  7],
            [ 8,  9, 12, 13],
            [10, 11, 14, 15]])
    """
    fn = "patchify"
    check_tensors(fn, images=images)
    p = check_positive_int(fn, "patch_size", patch_size)
    if images.dim() < 3:
        raise ValueError(f"{fn}: images must be (..., C, H, W), got {tuple(images.shape)}")
    *lead, C, H, W = images.shape
    if H % p or W % p:
        raise ValueError(f"{fn}: patch_size {p} must divide the image's height and width, got H={H}, W={W}")
    x = images.reshape(*lead, C, H // p, p, W // p, p)  # (..., C, rows, p, cols, p)
    k = len(lead)
    # (..., rows, cols, C, p, p): the patch grid first, each patch's values last
    x = x.permute(*range(k), k + 1, k + 3, k, k + 2, k + 4)
    return x.reshape(*lead, (H // p) * (W // p), C * p * p)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """The inverse of :func:`~attnlib.patchify`: put the patches back where they came from.

    Parameters
    ----------
    patches : torch.Tensor
        ``(..., N, C * p * p)`` with ``N = (height / p) * (width / p)``.
    patch_size : int
        The side ``p`` of a patch (1 or more).
    height, width : int
        The image's size (1 or more), both divisible by ``patch_size``.

    Returns
    -------
    torch.Tensor
        ``(..., C, height, width)``; ``unpatchify(patchify(x, p), p, H, W)`` equals
        ``x`` exactly.

    Examples
    --------
    >>> image = torch.arange(16.0).reshape(1, 4, 4)
    >>> torch.equal(unpatchify(patchify(image, 2), 2, 4, 4), image)
    True
    """
    fn = "unpatchify"
    check_tensors(fn, patches=patches)
    p = check_positive_int(fn, "patch_size", patch_size)
    H = check_positive_int(fn, "height", height)
    W = check_positive_int(fn, "width", width)
    if H % p or W % p:
        raise ValueError(f"{fn}: patch_size {p} must divide height and width, got height={H}, width={W}")
    if patches.dim() < 2:
        raise ValueError(f"{fn}: patches must be (..., N, C * p * p), got {tuple(patches.shape)}")
    *lead, N, K = patches.shape
    rows, cols = H // p, W // p
    if N != rows * cols:
        raise ValueError(
            f"{fn}: patches must hold (height / p) * (width / p) = {rows * cols} patches, got N={N}"
        )
    if K % (p * p) or K == 0:
        raise ValueError(f"{fn}: each patch must hold C * {p} * {p} values, got {K}")
    C = K // (p * p)
    x = patches.reshape(*lead, rows, cols, C, p, p)
    k = len(lead)
    x = x.permute(*range(k), k + 2, k, k + 3, k + 1, k + 4)  # (..., C, rows, p, cols, p)
    return x.reshape(*lead, C, H, W)


class PatchEmbedding(nn.Module):
    """Patches of ``p x p`` pixels, each flattened and mapped linearly to ``d_model``.

    The same function as ``nn.Conv2d(in_channels, d_model, p, stride=p)``
    followed by flattening the output grid row-major (see :meth:`from_conv`).

    Parameters
    ----------
    in_channels : int
        Channels ``C`` of the images (1 or more).
    patch_size : int
        The side ``p`` of a patch (1 or more).
    d_model : int
        Width of each patch's vector (1 or more).

    Examples
    --------
    >>> embed = PatchEmbedding(in_channels=1, patch_size=2, d_model=16)
    >>> embed(torch.zeros(5, 1, 8, 8)).shape  # 16 patches of 2 x 2
    torch.Size([5, 16, 16])
    """

    def __init__(self, in_channels: int, patch_size: int, d_model: int):
        super().__init__()
        fn = "PatchEmbedding"
        self.in_channels = check_positive_int(fn, "in_channels", in_channels)
        self.patch_size = check_positive_int(fn, "patch_size", patch_size)
        self.d_model = check_positive_int(fn, "d_model", d_model)
        self.proj = nn.Linear(self.in_channels * self.patch_size**2, self.d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` (or ``(..., C, H, W)``) -> patch vectors ``(..., N, d_model)``."""
        check_floating_tensors("PatchEmbedding", images=images)
        if images.dim() < 3 or images.shape[-3] != self.in_channels:
            raise ValueError(
                f"PatchEmbedding: images must be (..., {self.in_channels}, H, W), got {tuple(images.shape)}"
            )
        return self.proj(patchify(images, self.patch_size))  # (..., N, C p p) -> (..., N, D)

    @classmethod
    def from_conv(cls, conv: nn.Conv2d) -> PatchEmbedding:
        """A :class:`PatchEmbedding` computing what ``conv`` computes (square kernel = stride, no padding)."""
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"PatchEmbedding.from_conv: conv must be an nn.Conv2d, got {type(conv).__name__}")
        p = conv.kernel_size[0]
        square = conv.kernel_size == (p, p) and conv.stride == (p, p)
        plain = conv.padding == (0, 0) and conv.dilation == (1, 1) and conv.groups == 1
        if not (square and plain and conv.bias is not None):
            raise ValueError(
                "PatchEmbedding.from_conv: conv must have a square kernel equal to its stride, no padding, "
                "dilation or groups, and a bias"
            )
        ref = conv.weight
        embed = cls(conv.in_channels, p, conv.out_channels).to(ref.device, ref.dtype)
        with torch.no_grad():
            embed.proj.weight.copy_(ref.flatten(1))  # (D, C, p, p) -> (D, C p p)
            embed.proj.bias.copy_(conv.bias)
        return embed

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, patch_size={self.patch_size}, d_model={self.d_model}"


def attention_rollout(weights: torch.Tensor | Sequence[torch.Tensor], residual: bool = True) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): attention weights multiplied through the layers.

    Each layer's heads are averaged, ``A = mean_h W_h``; with ``residual`` the
    skip connection is counted as half of the flow, ``A <- 0.5 A + 0.5 I``
    (each row still sums to 1). The rollout of layers ``1 .. n`` is
    ``A_n @ ... @ A_2 @ A_1``: row ``i`` says how much of output token ``i``
    comes from each *input* token, if information flowed only along attention
    weights and the identity. It ignores the values, the feed-forward nets and
    every nonlinearity: an estimate of where information comes from, not an
    explanation of the prediction.

    Parameters
    ----------
    weights : torch.Tensor or sequence of torch.Tensor
        The attention weights of each layer, first layer first: a tensor
        ``(layers, ..., h, L, L)`` or a sequence of ``(..., h, L, L)`` tensors,
        each row summing to 1.
    residual : bool, default True
        Add the identity for the residual path (``0.5 A + 0.5 I``).

    Returns
    -------
    torch.Tensor
        ``(..., L, L)``; each row sums to 1 when each input row does.

    Examples
    --------
    >>> uniform = torch.full((2, 1, 1, 3, 3), 1 / 3)  # 2 layers, batch 1, 1 head
    >>> attention_rollout(uniform, residual=False)[0]
    tensor([[0.3333, 0.3333, 0.3333],
            [0.3333, 0.3333, 0.3333],
            [0.3333, 0.3333, 0.3333]])
    """
    fn = "attention_rollout"
    residual = check_flag(fn, "residual", residual)
    if isinstance(weights, torch.Tensor):
        if weights.dim() < 4:
            raise ValueError(f"{fn}: weights must be (layers, ..., h, L, L), got {tuple(weights.shape)}")
        layers = list(weights.unbind(0))
    elif isinstance(weights, Sequence) and not isinstance(weights, str):
        layers = list(weights)
        if not layers:
            raise ValueError(f"{fn}: weights must hold at least one layer, got an empty sequence")
    else:
        raise TypeError(
            f"{fn}: weights must be a torch.Tensor or a sequence of tensors, got {type(weights).__name__}"
        )
    check_floating_tensors(fn, **{f"weights[{i}]": w for i, w in enumerate(layers)})
    shape = layers[0].shape
    if len(shape) < 3 or shape[-1] != shape[-2]:
        raise ValueError(f"{fn}: each layer's weights must be (..., h, L, L), got {tuple(shape)}")
    for i, w in enumerate(layers):
        if w.shape != shape:
            raise ValueError(
                f"{fn}: every layer's weights must have one shape; weights[0] is {tuple(shape)}, "
                f"weights[{i}] is {tuple(w.shape)}"
            )
    eye = torch.eye(shape[-1], dtype=layers[0].dtype, device=layers[0].device)
    rollout = None
    for w in layers:
        a = w.mean(dim=-3)  # (..., h, L, L) -> (..., L, L): heads averaged
        if residual:
            a = 0.5 * a + 0.5 * eye  # the skip connection carries half of the flow
        rollout = a if rollout is None else a @ rollout  # later layers on the left
    return rollout
