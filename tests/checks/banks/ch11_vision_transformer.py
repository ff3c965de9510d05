"""Answer bank for chapter 11 (the Vision Transformer): plausible wrong answers and correct alternatives."""

import torch
import torch.nn.functional as F
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-11-1 patchify


def patchify_view(images, patch_size):
    B, C, H, W = images.shape
    return images.view(B, H * W // patch_size**2, C * patch_size**2)


def patchify_columns_first(images, patch_size):
    p = patch_size
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * p * p)


def patchify_channels_last(images, patch_size):
    p = patch_size
    x = images.permute(0, 2, 3, 1)  # (B, H, W, C)
    B, H, W, C = x.shape
    x = x.reshape(B, H // p, p, W // p, p, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, -1, p * p * C)


def patchify_flat_runs(images, patch_size):
    B, C, H, W = images.shape
    flat = images.reshape(B, C, H * W)
    chunks = flat.split(patch_size * patch_size, dim=-1)  # p * p pixels in a row
    return torch.stack([c.reshape(B, -1) for c in chunks], dim=1)


def patchify_with_unfold(images, patch_size):
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


def patchify_loops(images, patch_size):
    p = patch_size
    B, C, H, W = images.shape
    patches = []
    for r in range(0, H, p):
        for c in range(0, W, p):
            patches.append(images[:, :, r : r + p, c : c + p].reshape(B, -1))
    return torch.stack(patches, dim=1)


def patchify_unflatten(images, patch_size):
    p = patch_size
    x = images.unflatten(2, (-1, p)).unflatten(4, (-1, p))  # (B, C, rows, p, cols, p)
    x = x.movedim((2, 4), (1, 2))  # (B, rows, cols, C, p, p)
    return x.flatten(1, 2).flatten(2)


# --------------------------------------------------------------------------- ex-11-2 unpatchify


def unpatchify_view(patches, patch_size, height, width):
    B, N, K = patches.shape
    return patches.reshape(B, K // patch_size**2, height, width)


def unpatchify_hw_swapped(patches, patch_size, height, width):
    p = patch_size
    B, N, K = patches.shape
    C = K // (p * p)
    x = patches.reshape(B, width // p, height // p, C, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, C, width, height).transpose(2, 3)


def unpatchify_blocks_not_interleaved(patches, patch_size, height, width):
    p = patch_size
    B, N, K = patches.shape
    C = K // (p * p)
    x = patches.reshape(B, height // p, width // p, C, p, p).permute(0, 3, 1, 2, 4, 5)
    return x.reshape(B, C, height, width)


def unpatchify_channels_last(patches, patch_size, height, width):
    p = patch_size
    B, N, K = patches.shape
    C = K // (p * p)
    x = patches.reshape(B, height // p, width // p, p, p, C).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(B, C, height, width)


def unpatchify_with_fold(patches, patch_size, height, width):
    return F.fold(patches.transpose(1, 2), (height, width), kernel_size=patch_size, stride=patch_size)


def unpatchify_loops(patches, patch_size, height, width):
    p = patch_size
    B, N, K = patches.shape
    C = K // (p * p)
    out = torch.zeros(B, C, height, width, dtype=patches.dtype)
    cols = width // p
    for n in range(N):
        r, c = divmod(n, cols)
        out[:, :, r * p : (r + 1) * p, c * p : (c + 1) * p] = patches[:, n].reshape(B, C, p, p)
    return out


def unpatchify_einsum_free_permute(patches, patch_size, height, width):
    p = patch_size
    B = patches.shape[0]
    x = patches.unflatten(1, (height // p, width // p))  # (B, rows, cols, C p p)
    x = x.unflatten(-1, (-1, p, p))  # (B, rows, cols, C, p, p)
    return x.movedim(3, 1).transpose(3, 4).reshape(B, -1, height, width)


# --------------------------------------------------------------------------- ex-11-3 class token + positions


def tokens_cls_at_end(patch_vectors, cls_token, positions):
    B = patch_vectors.shape[0]
    return torch.cat([patch_vectors, cls_token.expand(B, 1, -1)], 1) + positions


def tokens_cls_unpositioned(patch_vectors, cls_token, positions):
    B = patch_vectors.shape[0]
    return torch.cat([cls_token.expand(B, 1, -1), patch_vectors + positions[1:]], 1)


def tokens_positions_first(patch_vectors, cls_token, positions):
    B, N, D = patch_vectors.shape
    x = patch_vectors + positions[:N]
    return torch.cat([(cls_token + positions[N]).expand(B, 1, D), x], 1)


def tokens_added_not_prepended(patch_vectors, cls_token, positions):
    return patch_vectors + cls_token + positions[:-1]


def tokens_repeat(patch_vectors, cls_token, positions):
    B = patch_vectors.shape[0]
    cls = cls_token[None, None, :].repeat(B, 1, 1)
    return torch.cat((cls, patch_vectors), dim=-2) + positions[None]


def tokens_by_assignment(patch_vectors, cls_token, positions):
    B, N, D = patch_vectors.shape
    out = torch.empty(B, N + 1, D, dtype=patch_vectors.dtype)
    out[:, 0] = cls_token
    out[:, 1:] = patch_vectors
    return out + positions


# --------------------------------------------------------------------------- ex-11-4 rollout


def rollout_reversed(weights):
    L = weights.shape[-1]
    result = torch.eye(L, dtype=weights.dtype)
    for layer in weights:
        result = result @ (0.5 * layer.mean(1) + 0.5 * torch.eye(L, dtype=weights.dtype))
    return result


def rollout_no_identity(weights):
    result = weights[0].mean(1)
    for layer in weights[1:]:
        result = layer.mean(1) @ result
    return result


def rollout_plus_identity(weights):
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    result = weights[0].mean(1) + eye
    for layer in weights[1:]:
        result = (layer.mean(1) + eye) @ result
    return result


def rollout_per_head(weights):
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    result = 0.5 * weights[0] + 0.5 * eye
    for layer in weights[1:]:
        result = (0.5 * layer + 0.5 * eye) @ result
    return result.mean(1)


def rollout_last_layer(weights):
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    return 0.5 * weights[-1].mean(1) + 0.5 * eye


def rollout_renormalised(weights):
    """A + I, then each row divided by its sum: the same 0.5 A + 0.5 I, written as the paper does."""
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
    result = None
    for layer in weights:
        a = layer.mean(1) + eye
        a = a / a.sum(-1, keepdim=True)
        result = a if result is None else torch.bmm(a, result)
    return result


def rollout_einsum_reduce(weights):
    n, B, h, L, _ = weights.shape
    a = 0.5 * torch.einsum("nbhij->nbij", weights) / h + 0.5 * torch.eye(L, dtype=weights.dtype)
    result = torch.eye(L, dtype=weights.dtype).expand(B, L, L)
    for k in range(n):
        result = torch.einsum("bij,bjk->bik", a[k], result)
    return result


WRONG = [
    Wrong("ex-11-1", patchify_view, "reshape without moving the axes"),
    Wrong("ex-11-1", patchify_columns_first, "column-major"),
    Wrong("ex-11-1", patchify_channels_last, "channels last"),
    Wrong("ex-11-1", patchify_flat_runs, "runs of p * p consecutive pixels"),
    Wrong("ex-11-1", patchify_with_unfold, "torch.nn.functional.unfold"),
    Wrong("ex-11-2", unpatchify_view, "reshape without moving the axes"),
    Wrong("ex-11-2", unpatchify_hw_swapped, "height and width swapped"),
    Wrong("ex-11-2", unpatchify_blocks_not_interleaved, "not interleaved"),
    Wrong("ex-11-2", unpatchify_channels_last, "channels last"),
    Wrong("ex-11-2", unpatchify_with_fold, "torch.nn.functional.fold"),
    Wrong("ex-11-3", tokens_cls_at_end, "class token put last"),
    Wrong("ex-11-3", tokens_cls_unpositioned, "class token gets no position"),
    Wrong("ex-11-3", tokens_positions_first, "positions added before the class token"),
    Wrong("ex-11-3", tokens_added_not_prepended, "added to the patches instead"),
    Wrong("ex-11-4", rollout_reversed, "wrong order"),
    Wrong("ex-11-4", rollout_no_identity, "residual path left out"),
    Wrong("ex-11-4", rollout_plus_identity, "without halving"),
    Wrong("ex-11-4", rollout_per_head, "every head rolled out alone"),
    Wrong("ex-11-4", rollout_last_layer, "only the last layer"),
]

RIGHT = [
    Right("ex-11-1", patchify_loops),
    Right("ex-11-1", patchify_unflatten),
    Right("ex-11-2", unpatchify_loops),
    Right("ex-11-2", unpatchify_einsum_free_permute),
    Right("ex-11-3", tokens_repeat),
    Right("ex-11-3", tokens_by_assignment),
    Right("ex-11-4", rollout_renormalised),
    Right("ex-11-4", rollout_einsum_reduce),
]
