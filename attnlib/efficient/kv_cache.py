"""Incremental decoding: a key/value cache, its memory, and key/value heads shared by queries.

A decoder that generates one token at a time recomputes nothing for the
earlier tokens: their keys and values wait in a :class:`KVCache`, and
:func:`decode_step` appends the new position's and lets it attend to all of
them (tiled attention with the lower-right causal alignment). Multi-query and
grouped-query attention shrink the cache by letting several query heads share
a key/value head (:func:`repeat_kv` shows the sharing as a copy;
:func:`attnlib.efficient.tiled_attention` with ``enable_gqa=True`` does it
without one).
"""

from __future__ import annotations

import torch

from attnlib._tensors import check_tensors
from attnlib._validate import check_length, check_positive_int, check_scale
from attnlib.efficient.tiled import tiled_attention

__all__ = ["KVCache", "decode_step", "kv_cache_bytes", "repeat_kv"]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat key/value heads: ``(B, Hkv, S, d) -> (B, Hkv * n_rep, S, d)``.

    Head ``h`` of the result is head ``h // n_rep`` of the input (the grouping
    of ``torch.nn.functional.scaled_dot_product_attention(enable_gqa=True)``).
    This copies; :func:`attnlib.grouped_query_attention` does not need it.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, Hkv, S, d)`` keys or values.
    n_rep : int
        Copies of each head (1 or more).

    Returns
    -------
    torch.Tensor
        ``(B, Hkv * n_rep, S, d)``.

    Examples
    --------
    >>> repeat_kv(torch.arange(2.0).reshape(1, 2, 1, 1), 2).flatten().tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    check_tensors("repeat_kv", x=x)
    if x.dim() != 4:
        raise ValueError(f"repeat_kv: expected x of shape (B, Hkv, S, d), got {tuple(x.shape)}")
    n_rep = check_positive_int("repeat_kv", "n_rep", n_rep)
    return x.repeat_interleave(n_rep, dim=1)


def kv_cache_bytes(
    layers: int,
    batch: int,
    kv_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: torch.dtype | int = torch.float32,
) -> int:
    """Bytes held by a KV cache: ``2 * layers * batch * kv_heads * seq_len * head_dim * b``.

    Parameters
    ----------
    layers, batch, kv_heads, seq_len, head_dim : int
        The cache's sizes (0 or more).
    dtype : torch.dtype or int, default torch.float32
        The elements' dtype, or the number of bytes ``b`` of one element.

    Returns
    -------
    int
        The bytes of keys and values (the 2 counts both).

    Examples
    --------
    >>> sizes = dict(layers=32, batch=1, kv_heads=32, seq_len=4096, head_dim=128)
    >>> kv_cache_bytes(**sizes, dtype=torch.float16) // 2**20  # MiB
    2048
    """
    fn = "kv_cache_bytes"
    sizes = {"layers": layers, "batch": batch, "kv_heads": kv_heads, "seq_len": seq_len, "head_dim": head_dim}
    layers, batch, kv_heads, seq_len, head_dim = (check_length(fn, n, x) for n, x in sizes.items())
    if isinstance(dtype, torch.dtype):
        nbytes = torch.empty((), dtype=dtype).element_size()
    else:
        try:
            nbytes = check_positive_int(fn, "dtype", dtype)
        except (TypeError, ValueError):
            raise ValueError(
                f"{fn}: dtype must be a torch.dtype or a positive byte count, got {dtype!r}"
            ) from None
    return 2 * layers * batch * kv_heads * seq_len * head_dim * nbytes


class KVCache:
    """Keys and values of the tokens decoded so far, for one attention layer.

    Storage is allocated once, ``(batch, kv_heads, capacity, head_dim)`` for
    keys and ``(..., value_dim)`` for values; :meth:`append` writes new
    positions in place, so decoding ``T`` tokens costs no reallocation.

    Parameters
    ----------
    batch, kv_heads, capacity, head_dim : int
        The storage's sizes (1 or more).
    value_dim : int, optional
        The values' width; default ``head_dim``.
    dtype : torch.dtype, default torch.float32
        A floating dtype.
    device : torch.device or str, optional
        Where the storage lives.

    Examples
    --------
    >>> cache = KVCache(batch=1, kv_heads=2, capacity=16, head_dim=4)
    >>> k, v = cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    >>> k.shape, len(cache)
    (torch.Size([1, 2, 3, 4]), 3)
    """

    def __init__(
        self,
        batch: int,
        kv_heads: int,
        capacity: int,
        head_dim: int,
        value_dim: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        value_dim = head_dim if value_dim is None else value_dim
        sizes = {
            "batch": batch,
            "kv_heads": kv_heads,
            "capacity": capacity,
            "head_dim": head_dim,
            "value_dim": value_dim,
        }
        batch, kv_heads, capacity, head_dim, value_dim = (
            check_positive_int("KVCache", n, x) for n, x in sizes.items()
        )
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"KVCache: dtype must be a floating point torch.dtype, got {dtype!r}")
        self._k = torch.zeros(batch, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self._v = torch.zeros(batch, kv_heads, capacity, value_dim, dtype=dtype, device=device)
        self.length = 0

    @property
    def capacity(self) -> int:
        """How many positions the storage holds."""
        return self._k.shape[2]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The keys' storage ``(batch, kv_heads, capacity, head_dim)``."""
        return tuple(self._k.shape)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the cached keys and values."""
        return self._k.dtype

    def __len__(self) -> int:
        return self.length

    @property
    def keys(self) -> torch.Tensor:
        """The cached keys, (batch, kv_heads, len, head_dim) (a view)."""
        return self._k[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor:
        """The cached values, (batch, kv_heads, len, value_dim) (a view)."""
        return self._v[:, :, : self.length]

    @property
    def nbytes(self) -> int:
        """Bytes allocated for keys and values (at full capacity)."""
        return self._k.nbytes + self._v.nbytes

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``t`` new positions; key ``(B, Hkv, t, d)``, value ``(B, Hkv, t, dv)``.

        Returns the views ``(keys, values)`` of everything cached so far. A
        refused call leaves the cache as it was.
        """
        self.check_append(key, value)
        return self._write(key, value)

    def _write(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = key.shape[2]
        self._k[:, :, self.length : self.length + t] = key
        self._v[:, :, self.length : self.length + t] = value
        self.length += t
        return self.keys, self.values

    def check_append(self, key: object, value: object, fn: str = "KVCache.append") -> None:
        """Raise (and change nothing) unless ``append(key, value)`` would succeed.

        TypeError for a non-tensor or a non-floating dtype, ValueError for a
        shape that does not fit the cache or a full cache; messages name ``fn``.
        """
        B, H, _, d = self._k.shape
        dv = self._v.shape[-1]
        check_tensors(fn, key=key, value=value)
        if (
            key.dim() != 4
            or value.dim() != 4
            or key.shape[:2] != (B, H)
            or key.shape[3] != d
            or value.shape[:3] != key.shape[:3]
            or value.shape[3] != dv
        ):
            raise ValueError(
                f"{fn}: expected key ({B}, {H}, t, {d}) and value ({B}, {H}, t, {dv}); "
                f"got key {tuple(key.shape)}, value {tuple(value.shape)}"
            )
        t = key.shape[2]
        if self.length + t > self.capacity:
            raise ValueError(f"{fn}: full, {self.length} + {t} positions exceed capacity {self.capacity}")
        if not key.is_floating_point() or not value.is_floating_point():
            raise TypeError(f"{fn}: key and value must be floating point, got {key.dtype}, {value.dtype}")

    def reset(self) -> None:
        """Forget every position (the storage is kept)."""
        self.length = 0

    def __repr__(self) -> str:
        B, H, cap, d = self._k.shape
        return (
            f"KVCache(batch={B}, kv_heads={H}, len={self.length}/{cap}, head_dim={d}, "
            f"dtype={self._k.dtype}, nbytes={self.nbytes})"
        )


def decode_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cache: KVCache,
    scale: float | None = None,
) -> torch.Tensor:
    """One step of incremental decoding: cache the new keys/values, then attend.

    New query ``i`` (absolute position ``P + i``) attends the cached keys
    ``0 .. P + i``: causal attention aligned to the lower right
    (``diagonal = P``). ``Hq`` may be a multiple of ``Hkv`` (MQA/GQA).

    Parameters
    ----------
    query : torch.Tensor
        ``(B, Hq, t, E)``, the new position(s), usually ``t = 1``.
    key : torch.Tensor
        ``(B, Hkv, t, E)``, their keys.
    value : torch.Tensor
        ``(B, Hkv, t, Ev)``, their values.
    cache : KVCache
        Holds the ``P`` earlier positions; the new ones are appended.
    scale : float, optional
        Default ``1 / sqrt(E)``.

    Returns
    -------
    torch.Tensor
        ``(B, Hq, t, Ev)``, the attention output of the ``t`` new positions.

    Examples
    --------
    >>> cache = KVCache(batch=1, kv_heads=1, capacity=8, head_dim=4)
    >>> x = torch.randn(1, 1, 3, 4)
    >>> out = decode_step(x, x, x, cache)  # three positions at once, causal
    >>> step = decode_step(x[:, :, :1], x[:, :, :1], x[:, :, :1], cache)  # then one more
    >>> out.shape, step.shape, len(cache)
    (torch.Size([1, 1, 3, 4]), torch.Size([1, 1, 1, 4]), 4)
    """
    fn = "decode_step"
    if not isinstance(cache, KVCache):
        raise TypeError(f"{fn}: cache must be a KVCache, got {type(cache).__name__}")
    check_tensors(fn, query=query, key=key, value=value)
    if query.dim() != 4 or key.dim() != 4 or query.shape[2] != key.shape[2]:
        raise ValueError(
            f"{fn}: expected query (B, Hq, t, E) and key (B, Hkv, t, E) with the same t; got "
            f"query {tuple(query.shape)}, key {tuple(key.shape)}"
        )
    B, Hkv, _, E = cache.shape
    Hq = query.shape[1]
    if query.shape[0] != B or query.shape[3] != E or Hq == 0 or Hq % Hkv != 0:
        raise ValueError(
            f"{fn}: query {tuple(query.shape)} must be (B, Hq, t, E) = ({B}, Hq, t, {E}) "
            f"with Hq a multiple of the cache's Hkv = {Hkv}"
        )
    dtypes = (query.dtype, key.dtype, getattr(value, "dtype", type(value)), cache.dtype)
    if len(set(dtypes)) != 1:
        raise TypeError(
            f"{fn}: query, key, value and the cache must share one dtype, got {', '.join(map(str, dtypes))}"
        )
    if not query.is_floating_point():
        raise TypeError(f"{fn}: query must be floating point, got {query.dtype}")
    scale = check_scale(fn, scale)
    # Validate the cache's part (shapes, capacity) before anything is written, so that
    # a refused call leaves the cache as it was; then write without checking again.
    cache.check_append(key, value, fn)
    past = len(cache)
    keys, values = cache._write(key, value)
    return tiled_attention(query, keys, values, is_causal=True, scale=scale, enable_gqa=True, diagonal=past)
