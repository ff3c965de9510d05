"""Attention layers built from the functions of ``attnlib`` (chapters 2 and 6).

Both layers are batch first and check their inputs before any projection, so a
wrong size is a ValueError naming both sizes, not an error from inside ``matmul``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._tensors import check_tensors
from attnlib._validate import as_shape, check_flag, check_length, check_positive_int, check_probability
from attnlib.attention import scaled_dot_product_attention
from attnlib.functional import _masked_softmax
from attnlib.masks import expand_key_mask, merge_key_mask
from attnlib.scores import _additive_scores

__all__ = [
    "AdditiveAttention",
    "MultiHeadAttention",
    "merge_heads",
    "parameter_count",
    "split_heads",
]


def _check_inputs(fn: str, module: nn.Module, sizes: dict[str, int | None], **tensors: torch.Tensor) -> None:
    """Tensors of the module's dtype, with the last dimension ``sizes[name]`` (None: any size)."""
    dtype = next(module.parameters()).dtype
    check_tensors(fn, **tensors)
    for name, t in tensors.items():
        if t.dtype != dtype:
            raise TypeError(
                f"{fn}: {name} has dtype {t.dtype} but the module's weights are {dtype}"
                f" (convert one of them, e.g. module.to({dtype}) or {name}.to({dtype}))"
            )
    for name, t in tensors.items():
        if sizes[name] is not None and t.dim() >= 1 and t.shape[-1] != sizes[name]:
            raise ValueError(
                f"{fn}: {name} has last dimension {t.shape[-1]} (shape {as_shape(t.shape)}),"
                f" but the module expects {sizes[name]}"
            )


class AdditiveAttention(nn.Module):
    """Bahdanau (additive) attention: ``score(q, k) = v^T tanh(W_q q + W_k k)`` (chapter 2).

    Parameters
    ----------
    query_dim : int
        E_q, size of a decoder state.
    key_dim : int
        E_k, size of an encoder state.
    hidden_dim : int
        H, size of the hidden layer of the score network.

    Raises
    ------
    TypeError
        A size that is not a number.
    ValueError
        A negative size, or ``hidden_dim < 1``.

    Examples
    --------
    >>> attn = AdditiveAttention(query_dim=4, key_dim=6, hidden_dim=8)
    >>> context, weights = attn(torch.randn(2, 4), torch.randn(2, 5, 6))  # one decoder step
    >>> context.shape, weights.shape
    (torch.Size([2, 6]), torch.Size([2, 5]))
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        fn = "AdditiveAttention"
        query_dim = check_length(fn, "query_dim", query_dim)  # 0 is allowed: every score is then 0
        key_dim = check_length(fn, "key_dim", key_dim)
        hidden_dim = check_positive_int(fn, "hidden_dim", hidden_dim)
        self.w_query = nn.Linear(query_dim, hidden_dim, bias=False)
        self.w_key = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from decoder states to encoder states.

        Parameters
        ----------
        query : torch.Tensor
            (B, L, E_q), or (B, E_q) for a single decoder step; the module's dtype.
        key : torch.Tensor
            (B, S, E_k).
        value : torch.Tensor, optional
            (B, S, E_v); defaults to ``key``.
        key_mask : torch.Tensor, optional
            bool (B, S) or (S,), True for real tokens. A float mask is refused.

        Returns
        -------
        tuple of torch.Tensor
            ``(context, weights)``: context (B, L, E_v) and weights (B, L, S),
            or (B, E_v) and (B, S) for a single step. A query whose keys are
            all masked gets zero weights and a zero context.

        Raises
        ------
        TypeError
            Non-tensor inputs, a dtype other than the module's, a non-bool ``key_mask``.
        ValueError
            Wrong ranks, sizes that differ from ``query_dim``/``key_dim``, or
            a ``key_mask`` of the wrong shape.
        """
        fn = "AdditiveAttention"
        if value is None:
            value = key
        sizes = {"query": self.w_query.in_features, "key": self.w_key.in_features, "value": None}
        _check_inputs(fn, self, sizes, query=query, key=key, value=value)
        if query.dim() not in (2, 3) or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                f"{fn}: expected query (B, L, E_q) or (B, E_q), key (B, S, E_k), value (B, S, E_v);"
                f" got query {as_shape(query.shape)}, key {as_shape(key.shape)},"
                f" value {as_shape(value.shape)}"
            )
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                f"{fn}: query {as_shape(query.shape)}, key {as_shape(key.shape)} and value"
                f" {as_shape(value.shape)} must share B, and key and value must share (B, S)"
            )
        single_step = query.dim() == 2
        if single_step:
            query = query.unsqueeze(1)  # (B, E_q) -> (B, 1, E_q)
        B, S = key.shape[0], key.shape[1]
        if key_mask is not None:
            key_mask = expand_key_mask(key_mask, (B,), S, fn=fn)  # (B, S) -> (B, 1, S), shared by every query
        v = self.v.weight.squeeze(0)  # (1, H) -> (H,)
        # the inputs are checked above, once: the unchecked kernels of additive_scores and
        # masked_softmax (a decoder calls this at every step)
        scores = _additive_scores(query, key, self.w_query.weight, self.w_key.weight, v)  # (B, L, S)
        weights = _masked_softmax(scores, key_mask, dim=-1)  # (B, L, S)
        context = weights @ value  # (B, L, S) @ (B, S, E_v) -> (B, L, E_v)
        if single_step:
            context, weights = context.squeeze(1), weights.squeeze(1)  # (B, E_v), (B, S)
        return context, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Give each head its own slice of the features: (B, L, h*d) -> (B, h, L, d).

    Parameters
    ----------
    x : torch.Tensor
        (B, L, D) with D divisible by ``num_heads``.
    num_heads : int
        h >= 1.

    Returns
    -------
    torch.Tensor
        (B, h, L, D // h), a view of ``x`` (no copy).

    Raises
    ------
    TypeError
        ``x`` is not a tensor, or ``num_heads`` is not a number.
    ValueError
        ``x`` is not 3-D, ``num_heads`` is not a positive int, or D is not divisible by it.

    Examples
    --------
    >>> split_heads(torch.arange(8.0).reshape(1, 2, 4), 2)[0, 1]  # head 1: features 2 and 3
    tensor([[2., 3.],
            [6., 7.]])
    """
    fn = "split_heads"
    check_tensors(fn, x=x)
    num_heads = check_positive_int(fn, "num_heads", num_heads)
    if x.dim() != 3:
        raise ValueError(f"{fn}: x must have shape (B, L, D), got {as_shape(x.shape)}")
    B, L, D = x.shape
    if D % num_heads != 0:
        raise ValueError(
            f"{fn}: last dimension of {as_shape(x.shape)} is not divisible by num_heads={num_heads}"
        )
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)  # (B, h, L, d)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads again: (B, h, L, d) -> (B, L, h*d), the inverse of :func:`attnlib.split_heads`.

    Parameters
    ----------
    x : torch.Tensor
        (B, h, L, d).

    Returns
    -------
    torch.Tensor
        (B, L, h*d), contiguous.

    Raises
    ------
    TypeError
        ``x`` is not a tensor.
    ValueError
        ``x`` is not 4-D.

    Examples
    --------
    >>> x = torch.randn(2, 3, 4)
    >>> torch.equal(merge_heads(split_heads(x, 2)), x)
    True
    """
    fn = "merge_heads"
    check_tensors(fn, x=x)
    if x.dim() != 4:
        raise ValueError(f"{fn}: x must have shape (B, h, L, d), got {as_shape(x.shape)}")
    B, h, L, d = x.shape
    return x.transpose(1, 2).contiguous().view(B, L, h * d)  # (B, L, h*d)


def _check_sizes(
    fn: str, embed_dim: int, num_heads: int, bias: bool, kdim: int | None, vdim: int | None
) -> tuple[int, int, bool, int, int]:
    """Validate multi-head sizes; return them, with ``kdim`` and ``vdim`` defaulted to ``embed_dim``."""
    embed_dim = check_positive_int(fn, "embed_dim", embed_dim)
    num_heads = check_positive_int(fn, "num_heads", num_heads)
    bias = check_flag(fn, "bias", bias)
    if embed_dim % num_heads != 0:
        raise ValueError(f"{fn}: embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
    kdim = embed_dim if kdim is None else check_positive_int(fn, "kdim", kdim)
    vdim = embed_dim if vdim is None else check_positive_int(fn, "vdim", vdim)
    return embed_dim, num_heads, bias, kdim, vdim


def parameter_count(
    embed_dim: int,
    num_heads: int,
    bias: bool = True,
    kdim: int | None = None,
    vdim: int | None = None,
) -> int:
    """Number of parameters of :class:`attnlib.MultiHeadAttention` (and of torch's MultiheadAttention).

    Four projections: E*E for queries, kdim*E for keys, vdim*E for values and
    E*E for the output, plus 4E biases. The number of heads does not change it.

    Parameters
    ----------
    embed_dim : int
        E >= 1.
    num_heads : int
        h >= 1, dividing E.
    bias : bool
        Count the four bias vectors.
    kdim, vdim : int, optional
        Sizes of the key and value inputs (default E).

    Returns
    -------
    int
        The number of scalars.

    Raises
    ------
    ValueError
        Non-positive sizes or E not divisible by h.

    Examples
    --------
    >>> parameter_count(8, 2)  # 4 * 8 * 8 + 4 * 8
    288
    """
    embed_dim, num_heads, bias, kdim, vdim = _check_sizes(
        "parameter_count", embed_dim, num_heads, bias, kdim, vdim
    )
    weights = embed_dim * (embed_dim + kdim + vdim + embed_dim)
    return weights + (4 * embed_dim if bias else 0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, equal to ``torch.nn.MultiheadAttention`` (chapter 6).

    Parameters
    ----------
    embed_dim : int
        E, model size; also the size of every head's output concatenated.
    num_heads : int
        h; each head has d = E / h features.
    dropout : float
        Dropout probability on the attention weights in training, as torch's
        (default 0: none). Chapter 10's ``TransformerBlock`` uses it.
    bias : bool
        Add biases to the four projections.
    kdim : int, optional
        Size of the key inputs (default E).
    vdim : int, optional
        Size of the value inputs (default E).

    Raises
    ------
    TypeError
        A size that is not a number, or a non-bool ``bias``.
    ValueError
        Non-positive sizes, or E not divisible by h.

    Examples
    --------
    >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
    >>> x = torch.randn(3, 5, 8)                       # (B, L, E)
    >>> key_mask = torch.tensor([True] * 4 + [False])  # the last key is padding
    >>> out, weights = mha(x, x, x, key_mask=key_mask, need_weights=True)
    >>> out.shape, weights.shape
    (torch.Size([3, 5, 8]), torch.Size([3, 5, 5]))
    >>> weights[..., -1].abs().max()
    tensor(0., grad_fn=<MaxBackward1>)
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ):
        super().__init__()
        embed_dim, num_heads, bias, kdim, vdim = _check_sizes(
            "MultiHeadAttention", embed_dim, num_heads, bias, kdim, vdim
        )
        self.dropout = check_probability("MultiHeadAttention", "dropout", dropout)  # a float, as torch's
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim
        self.vdim = vdim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # h*d_v -> E

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        *,
        attn_mask: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        average_attn_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Multi-head attention of ``query`` over ``key``/``value``.

        Everything after ``value`` is keyword-only: torch's fourth positional
        argument is ``key_padding_mask`` (True = padding), so a call ported
        positionally, ``mha(q, k, v, padding)``, raises ``TypeError`` here
        instead of reading the padding mask as an ``attn_mask``.

        Parameters
        ----------
        query : torch.Tensor
            (B, L, E), the module's dtype.
        key : torch.Tensor
            (B, S, kdim).
        value : torch.Tensor
            (B, S, vdim).
        attn_mask : torch.Tensor, optional
            bool broadcastable to (B, h, L, S), e.g. (L, S), True = may
            attend (the opposite of torch's boolean ``attn_mask``); or a float
            mask added to the scores.
        key_mask : torch.Tensor, optional
            bool (B, S) or (S,), True for real tokens (the opposite of torch's
            ``key_padding_mask``). A float key mask is refused.
        is_causal : bool
            Forbid key j > query i (top-left aligned); may be combined with ``attn_mask``.
        need_weights : bool
            Also return the attention weights (default False; torch's default is True);
            in training with ``dropout > 0`` they are the weights after dropout, as torch's.
        average_attn_weights : bool
            Average the weights over the heads.

        Returns
        -------
        tuple
            ``(output, weights)``: output (B, L, E); weights None, (B, L, S)
            when averaged, or (B, h, L, S) per head. A query that may attend
            to no key gets zero weights and the output bias ``out_proj.bias``.

        Raises
        ------
        TypeError
            Non-tensor inputs, a dtype other than the module's, masks of the
            wrong kind (a Python list, a float ``key_mask``), non-bool flags.
        ValueError
            Inputs that are not 3-D, last dimensions other than E/kdim/vdim
            (the message names both sizes), batch or sequence sizes that
            disagree, masks that do not broadcast.
        """
        fn = "MultiHeadAttention"
        sizes = {"query": self.embed_dim, "key": self.kdim, "value": self.vdim}
        _check_inputs(fn, self, sizes, query=query, key=key, value=value)
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                f"{fn}: expected batch-first query (B, L, E), key (B, S, kdim), value (B, S, vdim),"
                f" got {as_shape(query.shape)}, {as_shape(key.shape)}, {as_shape(value.shape)}"
            )
        if not (query.shape[0] == key.shape[0] == value.shape[0]) or key.shape[1] != value.shape[1]:
            raise ValueError(
                f"{fn}: query {as_shape(query.shape)}, key {as_shape(key.shape)} and value"
                f" {as_shape(value.shape)} must share B, and key and value must share S"
            )
        is_causal = check_flag(fn, "is_causal", is_causal)
        need_weights = check_flag(fn, "need_weights", need_weights)
        average_attn_weights = check_flag(fn, "average_attn_weights", average_attn_weights)
        B, S = key.shape[0], key.shape[1]
        h = self.num_heads
        # checked before the projections: a wrong mask fails fast, with its own name
        mask = merge_key_mask(attn_mask, key_mask, (B, h), S, fn=fn)  # broadcasts to (B, h, L, S)
        q = split_heads(self.q_proj(query), h)  # (B, L, E) -> (B, h, L, d)
        k = split_heads(self.k_proj(key), h)  # (B, S, kdim) -> (B, h, S, d)
        v = split_heads(self.v_proj(value), h)  # (B, S, vdim) -> (B, h, S, d)
        drop = self.training and self.dropout > 0.0  # dropout acts on the weights: they are needed
        out = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=need_weights or drop
        )
        weights = None
        if need_weights or drop:
            out, weights = out  # (B, h, L, d), (B, h, L, S)
        if drop:  # as torch: each weight zeroed with probability p, the others scaled by 1 / (1 - p)
            weights = F.dropout(weights, self.dropout)
            out = weights @ v  # (B, h, L, S) @ (B, h, S, d) -> (B, h, L, d)
        if need_weights and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, h, L, S) -> (B, L, S)
        out = self.out_proj(merge_heads(out))  # (B, h, L, d) -> (B, L, E)
        return out, weights if need_weights else None

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` into a new module.

        The copy computes the same outputs and weights (batch first, and with
        ``key_mask = ~key_padding_mask``). The dropout probability is copied;
        the random draws are the same as torch's with ``need_weights=True``
        (torch's ``need_weights=False`` path draws its own).

        Parameters
        ----------
        mha : torch.nn.MultiheadAttention
            Without ``add_bias_kv`` or ``add_zero_attn``.

        Returns
        -------
        MultiHeadAttention
            On the device and in the dtype of ``mha``.

        Raises
        ------
        TypeError
            ``mha`` is not a ``torch.nn.MultiheadAttention``.
        ValueError
            ``mha`` uses ``add_bias_kv`` or ``add_zero_attn``.

        Examples
        --------
        >>> ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> mine = MultiHeadAttention.from_torch(ref)
        >>> x = torch.randn(1, 3, 8)
        >>> torch.allclose(mine(x, x, x)[0], ref(x, x, x)[0], atol=1e-6)
        True
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(
                f"MultiHeadAttention.from_torch: expected nn.MultiheadAttention, got {type(mha).__name__}"
            )
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("MultiHeadAttention.from_torch: add_bias_kv/add_zero_attn unsupported")
        E, h = mha.embed_dim, mha.num_heads
        bias = mha.in_proj_bias is not None
        ref = next(mha.parameters())
        new = cls(E, h, mha.dropout, bias=bias, kdim=mha.kdim, vdim=mha.vdim).to(ref.device, ref.dtype)
        if mha._qkv_same_embed_dim:
            w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)  # (3E, E) -> 3 x (E, E)
        else:
            w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        with torch.no_grad():
            new.q_proj.weight.copy_(w_q)
            new.k_proj.weight.copy_(w_k)
            new.v_proj.weight.copy_(w_v)
            new.out_proj.weight.copy_(mha.out_proj.weight)
            if bias:
                b_q, b_k, b_v = mha.in_proj_bias.chunk(3)  # (3E,) -> 3 x (E,)
                new.q_proj.bias.copy_(b_q)
                new.k_proj.bias.copy_(b_k)
                new.v_proj.bias.copy_(b_v)
                new.out_proj.bias.copy_(mha.out_proj.bias)
        return new

    def to_torch(self) -> nn.MultiheadAttention:
        """The same weights and dropout in a new ``torch.nn.MultiheadAttention(batch_first=True)``.

        The inverse of :meth:`from_torch`: the result computes the same
        function, given torch's masks: ``key_padding_mask = ~key_mask`` and,
        for a boolean ``attn_mask``, ``~attn_mask``. (Fully masked query rows
        are NaN in torch and zero-weighted here.)

        Returns
        -------
        torch.nn.MultiheadAttention
            On the device and in the dtype of this module's weights.

        Examples
        --------
        >>> mine = MultiHeadAttention(8, 2)
        >>> ref = mine.to_torch()
        >>> x = torch.randn(1, 3, 8)
        >>> torch.allclose(mine(x, x, x)[0], ref(x, x, x)[0], atol=1e-6)
        True
        """
        ref = self.q_proj.weight
        bias = self.q_proj.bias is not None
        mha = nn.MultiheadAttention(
            self.embed_dim,
            self.num_heads,
            dropout=self.dropout,
            bias=bias,
            kdim=self.kdim,
            vdim=self.vdim,
            batch_first=True,
            device=ref.device,
            dtype=ref.dtype,
        )
        with torch.no_grad():
            if mha._qkv_same_embed_dim:
                mha.in_proj_weight.copy_(
                    torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
                )
            else:
                mha.q_proj_weight.copy_(self.q_proj.weight)
                mha.k_proj_weight.copy_(self.k_proj.weight)
                mha.v_proj_weight.copy_(self.v_proj.weight)
            mha.out_proj.weight.copy_(self.out_proj.weight)
            if bias:
                mha.in_proj_bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
                mha.out_proj.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)
