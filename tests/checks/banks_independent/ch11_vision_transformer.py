"""Independent bank for chapter 11 (the Vision Transformer), #25.

Written on 2026-11-27 from the exercise text alone (exercises/11-vision-
transformer.ipynb), by an engineer who did not read the checks
(attnlib/checks/ch11_vision_transformer.py), the solutions, the other bank of
chapter 11 or attnlib's own patch and rollout code. The wrong answers are the
slips the text makes likely (patch order, layout inside a patch, the class
token's place and position row, the order and the residual of the rollout);
the right answers are written differently from the obvious reshape/permute
and use only basic torch operations, none that the text forbids.
"""

import torch
from bank import Right, Wrong

# ---- ex-11-1 patchify ---------------------------------------------------------------


def _grid(images, p):
    B, C, H, W = images.shape
    return images.reshape(B, C, H // p, p, W // p, p)  # (B, C, rows, p, cols, p)


def pf_plain_reshape(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    return images.reshape(B, (H // p) * (W // p), C * p * p)  # no rearranging at all


def pf_column_major(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    x = _grid(images, p).permute(0, 4, 2, 1, 3, 5)  # patch columns first: down, then across
    return x.reshape(B, -1, C * p * p)


def pf_channels_last(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    x = _grid(images, p).permute(0, 2, 4, 3, 5, 1)  # (p, p, C) inside the patch
    return x.reshape(B, -1, C * p * p)


def pf_pixels_transposed(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    x = _grid(images, p).permute(0, 2, 4, 1, 5, 3)  # (C, column, row) inside the patch
    return x.reshape(B, -1, C * p * p)


def pf_assumes_square(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    n = H // p  # patches per side, as if W == H
    x = images.reshape(B, C, n, p, n, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, n * n, C * p * p)


def pf_height_width_swapped(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    # the grid read as (W/p, p, H/p, p): right for square images only
    x = images.reshape(B, C, W // p, p, H // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * p * p)


def pf_tensor_unfold(images, patch_size):
    # Tensor.unfold (a strided view), not torch.nn.functional.unfold
    B, C, H, W = images.shape
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)  # (B, C, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)


def pf_loop(images, patch_size):
    B, C, H, W = images.shape
    p = patch_size
    out = []
    for r in range(H // p):
        for c in range(W // p):
            square = images[:, :, r * p : (r + 1) * p, c * p : (c + 1) * p]  # (B, C, p, p)
            out.append(square.reshape(B, C * p * p))
    return torch.stack(out, dim=1)


def pf_rows_then_split(images, patch_size):
    # cut the strips of p rows, then the squares in each strip, with movedim/flatten
    B, C, H, W = images.shape
    p = patch_size
    strips = images.view(B, C, H // p, p, W)  # (B, C, R, p, W)
    squares = strips.view(B, C, H // p, p, W // p, p)  # (B, C, R, p, Q, p)
    squares = squares.movedim((2, 4), (1, 2))  # (B, R, Q, C, p, p)
    return squares.flatten(3).flatten(1, 2)


# ---- ex-11-2 unpatchify -------------------------------------------------------------


def up_plain_reshape(patches, patch_size, height, width):
    B = patches.shape[0]
    C = patches.shape[-1] // (patch_size * patch_size)
    return patches.reshape(B, C, height, width)  # the inverse of the plain reshape


def up_same_permute_as_patchify(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    x = patches.reshape(B, height // p, width // p, C, p, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # patchify's permutation again, not its inverse
    return x.reshape(B, C, height, width)


def up_pixels_transposed(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    x = patches.reshape(B, height // p, width // p, C, p, p)
    x = x.permute(0, 3, 1, 5, 2, 4)  # the patch's rows and columns swapped
    return x.reshape(B, C, height, width)


def up_column_major(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    x = patches.reshape(B, width // p, height // p, C, p, p)  # patches read down the columns
    x = x.permute(0, 3, 2, 4, 1, 5)
    return x.reshape(B, C, height, width)


def up_one_channel(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    x = patches[..., : p * p].reshape(B, height // p, width // p, p, p)  # C taken as 1
    x = x.permute(0, 1, 3, 2, 4).reshape(B, 1, height, width)
    return x


def up_height_width_swapped(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    x = patches.reshape(B, width // p, height // p, C, p, p)
    x = x.permute(0, 3, 1, 4, 2, 5)  # right for square images only
    return x.reshape(B, C, width, height)


def up_loop(patches, patch_size, height, width):
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    cols = width // p
    out = patches.new_zeros(B, C, height, width)
    for n in range(N):
        r, c = divmod(n, cols)
        out[:, :, r * p : (r + 1) * p, c * p : (c + 1) * p] = patches[:, n].reshape(B, C, p, p)
    return out


def up_index_scatter(patches, patch_size, height, width):
    # patchify the pixel numbers 0 .. C*H*W-1 to learn where each value came from
    B, N, D = patches.shape
    p = patch_size
    C = D // (p * p)
    where = torch.arange(C * height * width).reshape(1, C, height, width)
    where = pf_loop(where, p).reshape(-1)  # the source index of every patch value
    out = patches.new_zeros(B, C * height * width)
    out[:, where] = patches.reshape(B, -1)
    return out.reshape(B, C, height, width)


# ---- ex-11-3 vit_tokens -------------------------------------------------------------


def _cls(patch_vectors, cls_token):
    B, N, D = patch_vectors.shape
    return cls_token.reshape(1, 1, D).expand(B, 1, D)


def vt_positions_before_cls(patch_vectors, cls_token, positions):
    N = patch_vectors.shape[1]
    x = patch_vectors + positions[:N]  # rows 0 .. N-1 to the patches, before the prepend
    return torch.cat([_cls(patch_vectors, cls_token), x], dim=1)


def vt_cls_without_position(patch_vectors, cls_token, positions):
    x = patch_vectors + positions[1:]
    return torch.cat([_cls(patch_vectors, cls_token), x], dim=1)  # row 0 forgotten


def vt_cls_last(patch_vectors, cls_token, positions):
    x = torch.cat([patch_vectors, _cls(patch_vectors, cls_token)], dim=1)  # class token at the end
    return x + positions


def vt_cls_last_row_zero(patch_vectors, cls_token, positions):
    # row 0 given to the class token, but the class token put after the patches
    cls = _cls(patch_vectors, cls_token) + positions[0]
    return torch.cat([patch_vectors + positions[1:], cls], dim=1)


def vt_patches_rows_off_by_one(patch_vectors, cls_token, positions):
    N = patch_vectors.shape[1]
    cls = _cls(patch_vectors, cls_token) + positions[0]
    return torch.cat([cls, patch_vectors + positions[:N]], dim=1)  # patch n gets row n


def vt_positions_reversed(patch_vectors, cls_token, positions):
    x = torch.cat([_cls(patch_vectors, cls_token), patch_vectors], dim=1)
    return x + positions.flip(0)


def vt_fill(patch_vectors, cls_token, positions):
    B, N, D = patch_vectors.shape
    out = patch_vectors.new_empty(B, N + 1, D)
    out[:, 0] = cls_token + positions[0]
    out[:, 1:] = patch_vectors + positions[1:]
    return out


def vt_add_then_cat(patch_vectors, cls_token, positions):
    B = patch_vectors.shape[0]
    first = (cls_token + positions[0]).repeat(B, 1).unsqueeze(1)  # (B, 1, D)
    return torch.cat((first, patch_vectors + positions[1:].unsqueeze(0)), 1)


# ---- ex-11-4 rollout ----------------------------------------------------------------


def _layers(weights, *, residual=True, reduce="mean"):
    L = weights.shape[-1]
    eye = torch.eye(L, dtype=weights.dtype)
    out = []
    for w in weights:
        A = w.mean(1) if reduce == "mean" else w.max(1).values if reduce == "max" else w.sum(1)
        out.append(0.5 * A + 0.5 * eye if residual else A)
    return out


def ro_wrong_order(weights):
    layers = _layers(weights)
    R = layers[0]
    for A in layers[1:]:
        R = R @ A  # A_1 @ A_2 @ ... @ A_n
    return R


def ro_no_residual(weights):
    layers = _layers(weights, residual=False)
    R = layers[0]
    for A in layers[1:]:
        R = A @ R
    return R


def ro_identity_not_halved(weights):
    L = weights.shape[-1]
    eye = torch.eye(L, dtype=weights.dtype)
    R = None
    for w in weights:
        A = w.mean(1) + eye  # rows sum to 2, never renormalised
        R = A if R is None else A @ R
    return R


def ro_max_heads(weights):
    layers = _layers(weights, reduce="max")
    R = layers[0]
    for A in layers[1:]:
        R = A @ R
    return R


def ro_sum_heads(weights):
    layers = _layers(weights, reduce="sum")  # the heads summed, not averaged
    R = layers[0]
    for A in layers[1:]:
        R = A @ R
    return R


def ro_last_layer_only(weights):
    return _layers(weights)[-1]


def ro_skips_first_layer(weights):
    layers = _layers(weights)
    R = torch.eye(weights.shape[-1], dtype=weights.dtype).expand_as(layers[0])
    for A in layers[1:]:  # off by one: the first layer left out
        R = A @ R
    return R


def ro_transposed(weights):
    layers = _layers(weights)
    R = layers[0].transpose(-1, -2)
    for A in layers[1:]:
        R = A.transpose(-1, -2) @ R  # the keys' view, not the queries'
    return R


def ro_residual_per_head_reversed_loop(weights):
    # the residual on every head before the average (linear: the same A), and the
    # product built from the last layer: R = I; R = R @ A_n; ...; R = R @ A_1
    n, B, h, L, _ = weights.shape
    eye = torch.eye(L, dtype=weights.dtype)
    R = eye.expand(B, L, L)
    for i in range(n - 1, -1, -1):
        A = (0.5 * weights[i] + 0.5 * eye).mean(1)
        R = R @ A
    return R


def ro_einsum(weights):
    n, B, h, L, _ = weights.shape
    A = 0.5 * torch.einsum("nbhij->nbij", weights) / h + 0.5 * torch.eye(L, dtype=weights.dtype)
    R = A[0]
    for i in range(1, n):
        R = torch.einsum("bij,bjk->bik", A[i], R)
    return R


WRONG = [
    Wrong("ex-11-1", pf_plain_reshape, "a plain reshape, no rearranging"),
    Wrong("ex-11-1", pf_column_major, "patches numbered column by column"),
    Wrong("ex-11-1", pf_channels_last, "(p, p, C) inside a patch, channel last"),
    Wrong("ex-11-1", pf_pixels_transposed, "pixel columns before rows inside a patch"),
    Wrong("ex-11-1", pf_assumes_square, "assumes a square image"),
    Wrong("ex-11-1", pf_height_width_swapped, "height and width swapped in the grid"),
    Wrong("ex-11-2", up_plain_reshape, "a plain reshape back"),
    Wrong("ex-11-2", up_same_permute_as_patchify, "patchify's permutation, not its inverse"),
    Wrong("ex-11-2", up_pixels_transposed, "rows and columns inside a patch swapped"),
    Wrong("ex-11-2", up_column_major, "patches put back column by column"),
    Wrong("ex-11-2", up_one_channel, "assumes one channel"),
    Wrong("ex-11-2", up_height_width_swapped, "height and width swapped"),
    Wrong("ex-11-3", vt_positions_before_cls, "positions added before the class token is prepended"),
    Wrong("ex-11-3", vt_cls_without_position, "class token without its position row"),
    Wrong("ex-11-3", vt_cls_last, "class token appended at the end"),
    Wrong("ex-11-3", vt_cls_last_row_zero, "class token at the end, with row 0"),
    Wrong("ex-11-3", vt_patches_rows_off_by_one, "patch n gets row n, not n + 1"),
    Wrong("ex-11-3", vt_positions_reversed, "position table read backwards"),
    Wrong("ex-11-4", ro_wrong_order, "multiplied in the wrong order (A_1 @ ... @ A_n)"),
    Wrong("ex-11-4", ro_no_residual, "no residual identity"),
    Wrong("ex-11-4", ro_identity_not_halved, "A + I, rows not renormalised"),
    Wrong("ex-11-4", ro_max_heads, "max over heads instead of mean"),
    Wrong("ex-11-4", ro_sum_heads, "heads summed, not averaged"),
    Wrong("ex-11-4", ro_last_layer_only, "only the last layer"),
    Wrong("ex-11-4", ro_skips_first_layer, "first layer left out"),
    Wrong("ex-11-4", ro_transposed, "every layer transposed"),
]

RIGHT = [
    Right("ex-11-1", pf_tensor_unfold),
    Right("ex-11-1", pf_loop),
    Right("ex-11-1", pf_rows_then_split),
    Right("ex-11-2", up_loop),
    Right("ex-11-2", up_index_scatter),
    Right("ex-11-3", vt_fill),
    Right("ex-11-3", vt_add_then_cat),
    Right("ex-11-4", ro_residual_per_head_reversed_loop),
    Right("ex-11-4", ro_einsum),
]

# The phrases were chosen after reading the feedback (the bank itself was not
# changed); None: the answer loses marks but no feedback names its mistake.
NAMED = {
    "pf_plain_reshape": "reshape without moving the axes",
    "pf_column_major": "patches in column-major order",
    "pf_channels_last": "channels last inside a patch",
    "pf_pixels_transposed": "each patch read column by column",
    "pf_assumes_square": None,
    "pf_height_width_swapped": None,
    "up_plain_reshape": "reshape without moving the axes",
    "up_same_permute_as_patchify": None,
    "up_pixels_transposed": None,
    "up_column_major": None,
    "up_one_channel": None,
    "up_height_width_swapped": "the last two axes look swapped",
    "vt_positions_before_cls": None,
    "vt_cls_without_position": "the class token gets no position",
    "vt_cls_last": "the class token put last",
    "vt_cls_last_row_zero": None,
    "vt_patches_rows_off_by_one": None,
    "vt_positions_reversed": None,
    "ro_wrong_order": "the layers multiplied in the wrong order",
    "ro_no_residual": "the residual path left out",
    "ro_identity_not_halved": "the identity added without halving",
    "ro_max_heads": "the heads' maximum instead of their mean",
    "ro_sum_heads": None,
    "ro_last_layer_only": "only the last layer",
    "ro_skips_first_layer": None,
    "ro_transposed": None,
}
