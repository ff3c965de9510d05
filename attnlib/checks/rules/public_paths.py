"""Every public path of attnlib's functions, classes and modules, and the object's home (issue 34).

The forbidden-call rule judges a path by the object it names: ``attnlib.attention.causal_mask``
(a module that imports it) and ``attnlib.causal_mask`` (the package's export) are the same
function as ``attnlib.masks.causal_mask``. The grader's notebook reader does not import
attnlib's core (torch), so the identities are read from this table, written from the real
attnlib by ``python -m attnlib.checks.rules.public_paths --write`` and tested to be current
(``tests/checks/rules/test_forbidden_soundness.py`` walks attnlib's modules again and compares).

``PUBLIC_PATHS``: ``{public dotted path: home}``, where the home of a function or class is
``module.qualname`` and that of a module its name. Paths under ``attnlib.checks``
are left out (the checker is forbidden by prefix).
"""

from __future__ import annotations

import sys

SKIPPED = ("attnlib.checks",)


def build() -> dict[str, str]:
    """The table, from attnlib as it is imported here (imports attnlib's every module)."""
    import importlib
    import pkgutil
    import types

    import attnlib

    table: dict[str, str] = {}
    modules = {"attnlib": attnlib}
    for info in pkgutil.walk_packages(attnlib.__path__, "attnlib."):
        if info.name.startswith(SKIPPED):
            continue
        modules[info.name] = importlib.import_module(info.name)
    for name, module in sorted(modules.items()):
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_"):
                continue
            if isinstance(obj, types.ModuleType):
                home = obj.__name__
            elif isinstance(obj, types.FunctionType | type) or callable(obj):
                owner = getattr(obj, "__module__", None) or ""
                qualname = getattr(obj, "__qualname__", None)
                if not qualname:
                    continue
                home = f"{owner}.{qualname}"
            else:
                continue
            if not home.startswith("attnlib") or home.startswith(SKIPPED):
                continue
            path = f"{name}.{attr}"
            if path != home:
                table[path] = home
    return table


def render(table: dict[str, str], text: str) -> str:
    """This module's source ``text`` with ``table`` as its ``PUBLIC_PATHS``."""
    start = text.index(_BEGIN) + len(_BEGIN)
    end = text.index(_END)
    rows = "".join(_row(path, home) for path, home in sorted(table.items()))
    return text[:start] + "PUBLIC_PATHS: dict[str, str] = {\n" + rows + "}\n" + text[end:]


def _row(path: str, home: str) -> str:
    row = f'    "{path}": "{home}",\n'
    return row if len(row) <= 100 else f'    "{path}":\n        "{home}",\n'


_BEGIN, _END = "# fmt: off\n", "# fmt: on\n"  # the generated table lies between these lines

# fmt: off
PUBLIC_PATHS: dict[str, str] = {
    "attnlib.AdditiveAttention": "attnlib.modules.AdditiveAttention",
    "attnlib.KVCache": "attnlib.efficient.kv_cache.KVCache",
    "attnlib.LearnedPositions": "attnlib.positions.LearnedPositions",
    "attnlib.MultiHeadAttention": "attnlib.modules.MultiHeadAttention",
    "attnlib.OnlineSoftmaxState": "attnlib.efficient.online.OnlineSoftmaxState",
    "attnlib.PatchEmbedding": "attnlib.vision.PatchEmbedding",
    "attnlib.TransformerBlock": "attnlib.transformer.TransformerBlock",
    "attnlib._doc.NUMPY": "attnlib._doc._filler.<locals>.fill",
    "attnlib._doc.TORCH": "attnlib._doc._filler.<locals>.fill",
    "attnlib._tensors.check_floating": "attnlib._validate.check_floating",
    "attnlib.additive_scores": "attnlib.scores.additive_scores",
    "attnlib.alibi_bias": "attnlib.positions.alibi_bias",
    "attnlib.alibi_slopes": "attnlib.positions.alibi_slopes",
    "attnlib.apply_rope": "attnlib.positions.apply_rope",
    "attnlib.as_additive_mask": "attnlib.masks.as_additive_mask",
    "attnlib.attention.TORCH": "attnlib._doc._filler.<locals>.fill",
    "attnlib.attention.as_shape": "attnlib._validate.as_shape",
    "attnlib.attention.causal_mask": "attnlib.masks.causal_mask",
    "attnlib.attention.check_attention": "attnlib._validate.check_attention",
    "attnlib.attention.check_flag": "attnlib._validate.check_flag",
    "attnlib.attention.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.attention.check_mask_tensor": "attnlib.masks.check_mask_tensor",
    "attnlib.attention.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.attention.softmax": "attnlib.functional.softmax",
    "attnlib.attention.upcast": "attnlib._tensors.upcast",
    "attnlib.attention_rollout": "attnlib.vision.attention_rollout",
    "attnlib.causal_mask": "attnlib.masks.causal_mask",
    "attnlib.chapters.char_lm.TinyDecoderLM": "attnlib.chapters.tiny_lm.TinyDecoderLM",
    "attnlib.chapters.char_lm.tiny_lm": "attnlib.chapters.tiny_lm",
    "attnlib.chapters.checkpoint.build_char_model": "attnlib.chapters.char_lm.build_char_model",
    "attnlib.chapters.checkpoint.char_lm": "attnlib.chapters.char_lm",
    "attnlib.chapters.checkpoint.corpus": "attnlib.chapters.char_lm.corpus",
    "attnlib.chapters.checkpoint.estimate_loss": "attnlib.chapters.char_lm.estimate_loss",
    "attnlib.chapters.checkpoint.eval_windows": "attnlib.chapters.char_lm.eval_windows",
    "attnlib.chapters.checkpoint.generate_text": "attnlib.chapters.char_lm.generate_text",
    "attnlib.chapters.checkpoint.get_batch": "attnlib.chapters.char_lm.get_batch",
    "attnlib.chapters.checkpoint.head_scores": "attnlib.chapters.char_lm.head_scores",
    "attnlib.chapters.checkpoint.induction_test": "attnlib.chapters.char_lm.induction_test",
    "attnlib.chapters.checkpoint.lm_loss": "attnlib.chapters.char_lm.lm_loss",
    "attnlib.chapters.checkpoint.lr_at": "attnlib.chapters.char_lm.lr_at",
    "attnlib.chapters.checkpoint.param_groups": "attnlib.chapters.char_lm.param_groups",
    "attnlib.chapters.checkpoint.recency_baseline": "attnlib.chapters.char_lm.recency_baseline",
    "attnlib.chapters.checkpoint.repeated_random": "attnlib.chapters.char_lm.repeated_random",
    "attnlib.chapters.checkpoint.tiny_lm": "attnlib.chapters.tiny_lm",
    "attnlib.chapters.checkpoint_seeds.checkpoint": "attnlib.chapters.checkpoint",
    "attnlib.chapters.checkpoint_seeds.corpus": "attnlib.chapters.char_lm.corpus",
    "attnlib.chapters.checkpoint_seeds.estimate_loss": "attnlib.chapters.char_lm.estimate_loss",
    "attnlib.chapters.checkpoint_seeds.induction_test": "attnlib.chapters.char_lm.induction_test",
    "attnlib.chapters.checkpoint_seeds.repeated_random":
        "attnlib.chapters.char_lm.repeated_random",
    "attnlib.chapters.cross_attention.MultiHeadAttention": "attnlib.modules.MultiHeadAttention",
    "attnlib.chapters.cross_attention.as_shape": "attnlib._validate.as_shape",
    "attnlib.chapters.cross_attention.causal_mask": "attnlib.masks.causal_mask",
    "attnlib.chapters.cross_attention.digits_vocab": "attnlib.chapters.vocab.digits_vocab",
    "attnlib.chapters.cross_attention.greedy_decode_steps":
        "attnlib.chapters.vocab.greedy_decode_steps",
    "attnlib.chapters.cross_attention.padding_mask": "attnlib.masks.padding_mask",
    "attnlib.chapters.cross_attention.scaled_dot_product_attention":
        "attnlib.attention.scaled_dot_product_attention",
    "attnlib.chapters.cross_attention.sinusoidal_encoding":
        "attnlib.positions.sinusoidal_encoding",
    "attnlib.chapters.cross_attention.token_strings": "attnlib.chapters.vocab.token_strings",
    "attnlib.chapters.first_and_previous.MultiHeadAttention": "attnlib.modules.MultiHeadAttention",
    "attnlib.chapters.handouts.TinyDecoderLM": "attnlib.chapters.tiny_lm.TinyDecoderLM",
    "attnlib.chapters.handouts.TransformerBlock": "attnlib.transformer.TransformerBlock",
    "attnlib.chapters.head_controls.tiny_lm": "attnlib.chapters.tiny_lm",
    "attnlib.chapters.positional_model.LearnedPositions": "attnlib.positions.LearnedPositions",
    "attnlib.chapters.positional_model.alibi_bias": "attnlib.positions.alibi_bias",
    "attnlib.chapters.positional_model.apply_rope": "attnlib.positions.apply_rope",
    "attnlib.chapters.positional_model.merge_heads": "attnlib.modules.merge_heads",
    "attnlib.chapters.positional_model.scaled_dot_product_attention":
        "attnlib.attention.scaled_dot_product_attention",
    "attnlib.chapters.positional_model.sinusoidal_encoding":
        "attnlib.positions.sinusoidal_encoding",
    "attnlib.chapters.positional_model.split_heads": "attnlib.modules.split_heads",
    "attnlib.chapters.retrieval.anp": "attnlib.numpy",
    "attnlib.chapters.retrieval.as_shape": "attnlib._validate.as_shape",
    "attnlib.chapters.retrieval.masked_softmax": "attnlib.functional.masked_softmax",
    "attnlib.chapters.seq2seq.AdditiveAttention": "attnlib.modules.AdditiveAttention",
    "attnlib.chapters.seq2seq.decode_tokens": "attnlib.chapters.vocab.decode_tokens",
    "attnlib.chapters.seq2seq.encode_digits": "attnlib.chapters.vocab.encode_digits",
    "attnlib.chapters.seq2seq.exact_match": "attnlib.chapters.vocab.exact_match",
    "attnlib.chapters.seq2seq.greedy_decode_steps": "attnlib.chapters.vocab.greedy_decode_steps",
    "attnlib.chapters.seq2seq.pad_rows": "attnlib.chapters.vocab.pad_rows",
    "attnlib.chapters.seq2seq.padding_mask": "attnlib.masks.padding_mask",
    "attnlib.chapters.seq2seq.shift_right": "attnlib.chapters.vocab.shift_right",
    "attnlib.chapters.tiny_lm.LearnedPositions": "attnlib.positions.LearnedPositions",
    "attnlib.chapters.tiny_lm.TransformerBlock": "attnlib.transformer.TransformerBlock",
    "attnlib.chapters.variant_lm.LatentAttention": "attnlib.variants.latent.LatentAttention",
    "attnlib.chapters.variant_lm.LearnedPositions": "attnlib.positions.LearnedPositions",
    "attnlib.chapters.variant_lm.linear_attention": "attnlib.variants.linear.linear_attention",
    "attnlib.chapters.variant_lm.sliding_window_attention":
        "attnlib.variants.sliding.sliding_window_attention",
    "attnlib.chapters.vision_nulls.vit": "attnlib.chapters.vit",
    "attnlib.chapters.vit.LearnedPositions": "attnlib.positions.LearnedPositions",
    "attnlib.chapters.vit.PatchEmbedding": "attnlib.vision.PatchEmbedding",
    "attnlib.chapters.vit.TransformerBlock": "attnlib.transformer.TransformerBlock",
    "attnlib.chapters.vit.attention_rollout": "attnlib.vision.attention_rollout",
    "attnlib.chapters.vit.patchify": "attnlib.vision.patchify",
    "attnlib.chapters.vit.unpatchify": "attnlib.vision.unpatchify",
    "attnlib.chapters.vit_controls.patchify": "attnlib.vision.patchify",
    "attnlib.chapters.vit_controls.vit": "attnlib.chapters.vit",
    "attnlib.chapters.vit_export.attention_rollout": "attnlib.vision.attention_rollout",
    "attnlib.chapters.vit_export.packing": "attnlib.chapters.packing",
    "attnlib.chapters.vit_export.patchify": "attnlib.vision.patchify",
    "attnlib.chapters.vit_export.vit": "attnlib.chapters.vit",
    "attnlib.chapters.web_export.packing": "attnlib.chapters.packing",
    "attnlib.chapters.web_export.tiny_lm": "attnlib.chapters.tiny_lm",
    "attnlib.combine_masks": "attnlib.masks.combine_masks",
    "attnlib.cosine_scores": "attnlib.scores.cosine_scores",
    "attnlib.decode_step": "attnlib.efficient.kv_cache.decode_step",
    "attnlib.dot_scores": "attnlib.scores.dot_scores",
    "attnlib.efficient.KVCache": "attnlib.efficient.kv_cache.KVCache",
    "attnlib.efficient.OnlineSoftmaxState": "attnlib.efficient.online.OnlineSoftmaxState",
    "attnlib.efficient.decode_step": "attnlib.efficient.kv_cache.decode_step",
    "attnlib.efficient.grouped_query_attention": "attnlib.efficient.tiled.grouped_query_attention",
    "attnlib.efficient.kv_cache.check_length": "attnlib._validate.check_length",
    "attnlib.efficient.kv_cache.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.efficient.kv_cache.check_scale": "attnlib._validate.check_scale",
    "attnlib.efficient.kv_cache.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.efficient.kv_cache.tiled_attention": "attnlib.efficient.tiled.tiled_attention",
    "attnlib.efficient.kv_cache_bytes": "attnlib.efficient.kv_cache.kv_cache_bytes",
    "attnlib.efficient.online.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.efficient.online.check_real": "attnlib._validate.check_real",
    "attnlib.efficient.online.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.efficient.online.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.efficient.online_attention_row_numpy":
        "attnlib.efficient.online.online_attention_row_numpy",
    "attnlib.efficient.online_rescale_": "attnlib.efficient.online.online_rescale_",
    "attnlib.efficient.online_softmax_numpy": "attnlib.efficient.online.online_softmax_numpy",
    "attnlib.efficient.online_softmax_update": "attnlib.efficient.online.online_softmax_update",
    "attnlib.efficient.online_update_": "attnlib.efficient.online.online_update_",
    "attnlib.efficient.repeat_kv": "attnlib.efficient.kv_cache.repeat_kv",
    "attnlib.efficient.tile_step": "attnlib.efficient.online.tile_step",
    "attnlib.efficient.tiled.check_attention": "attnlib._validate.check_attention",
    "attnlib.efficient.tiled.check_flag": "attnlib._validate.check_flag",
    "attnlib.efficient.tiled.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.efficient.tiled.check_integer": "attnlib._validate.check_integer",
    "attnlib.efficient.tiled.check_mask": "attnlib._validate.check_mask",
    "attnlib.efficient.tiled.check_mask_tensor": "attnlib.masks.check_mask_tensor",
    "attnlib.efficient.tiled.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.efficient.tiled.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.efficient.tiled.expand_key_mask": "attnlib.masks.expand_key_mask",
    "attnlib.efficient.tiled.online": "attnlib.efficient.online",
    "attnlib.efficient.tiled.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.efficient.tiled.work_dtype": "attnlib._tensors.work_dtype",
    "attnlib.efficient.tiled_attention": "attnlib.efficient.tiled.tiled_attention",
    "attnlib.figures._draw.check_integer": "attnlib._validate.check_integer",
    "attnlib.figures._draw.use_course_style": "attnlib.figures.plotting.use_course_style",
    "attnlib.functional.TORCH": "attnlib._doc._filler.<locals>.fill",
    "attnlib.functional.as_shape": "attnlib._validate.as_shape",
    "attnlib.functional.check_dim": "attnlib._validate.check_dim",
    "attnlib.functional.check_keepdim": "attnlib._validate.check_keepdim",
    "attnlib.functional.check_mask": "attnlib._validate.check_mask",
    "attnlib.functional.check_mask_tensor": "attnlib.masks.check_mask_tensor",
    "attnlib.functional.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.functional.kept_shape": "attnlib._validate.kept_shape",
    "attnlib.functional.upcast": "attnlib._tensors.upcast",
    "attnlib.general_scores": "attnlib.scores.general_scores",
    "attnlib.grouped_query_attention": "attnlib.efficient.tiled.grouped_query_attention",
    "attnlib.kv_cache_bytes": "attnlib.efficient.kv_cache.kv_cache_bytes",
    "attnlib.log_softmax": "attnlib.functional.log_softmax",
    "attnlib.logsumexp": "attnlib.functional.logsumexp",
    "attnlib.masked_softmax": "attnlib.functional.masked_softmax",
    "attnlib.masks.TORCH": "attnlib._doc._filler.<locals>.fill",
    "attnlib.masks.as_shape": "attnlib._validate.as_shape",
    "attnlib.masks.broadcast_shapes": "attnlib._validate.broadcast_shapes",
    "attnlib.masks.check_causal": "attnlib._validate.check_causal",
    "attnlib.masks.check_lengths": "attnlib._validate.check_lengths",
    "attnlib.masks.lengths_list": "attnlib._validate.lengths_list",
    "attnlib.merge_heads": "attnlib.modules.merge_heads",
    "attnlib.modules.as_shape": "attnlib._validate.as_shape",
    "attnlib.modules.check_flag": "attnlib._validate.check_flag",
    "attnlib.modules.check_length": "attnlib._validate.check_length",
    "attnlib.modules.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.modules.check_probability": "attnlib._validate.check_probability",
    "attnlib.modules.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.modules.expand_key_mask": "attnlib.masks.expand_key_mask",
    "attnlib.modules.merge_key_mask": "attnlib.masks.merge_key_mask",
    "attnlib.modules.scaled_dot_product_attention":
        "attnlib.attention.scaled_dot_product_attention",
    "attnlib.numpy.NUMPY": "attnlib._doc._filler.<locals>.fill",
    "attnlib.numpy.check_additive": "attnlib._validate.check_additive",
    "attnlib.numpy.check_attention": "attnlib._validate.check_attention",
    "attnlib.numpy.check_causal": "attnlib._validate.check_causal",
    "attnlib.numpy.check_dim": "attnlib._validate.check_dim",
    "attnlib.numpy.check_flag": "attnlib._validate.check_flag",
    "attnlib.numpy.check_floating": "attnlib._validate.check_floating",
    "attnlib.numpy.check_general": "attnlib._validate.check_general",
    "attnlib.numpy.check_keepdim": "attnlib._validate.check_keepdim",
    "attnlib.numpy.check_lengths": "attnlib._validate.check_lengths",
    "attnlib.numpy.check_query_key": "attnlib._validate.check_query_key",
    "attnlib.numpy.kept_shape": "attnlib._validate.kept_shape",
    "attnlib.numpy.lengths_list": "attnlib._validate.lengths_list",
    "attnlib.numpy.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.online_attention_row_numpy": "attnlib.efficient.online.online_attention_row_numpy",
    "attnlib.online_rescale_": "attnlib.efficient.online.online_rescale_",
    "attnlib.online_softmax_numpy": "attnlib.efficient.online.online_softmax_numpy",
    "attnlib.online_softmax_update": "attnlib.efficient.online.online_softmax_update",
    "attnlib.online_update_": "attnlib.efficient.online.online_update_",
    "attnlib.padding_mask": "attnlib.masks.padding_mask",
    "attnlib.parameter_count": "attnlib.modules.parameter_count",
    "attnlib.patchify": "attnlib.vision.patchify",
    "attnlib.positions.check_flag": "attnlib._validate.check_flag",
    "attnlib.positions.check_greater": "attnlib._validate.check_greater",
    "attnlib.positions.check_length": "attnlib._validate.check_length",
    "attnlib.positions.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.positions.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.repeat_kv": "attnlib.efficient.kv_cache.repeat_kv",
    "attnlib.rope_angles": "attnlib.positions.rope_angles",
    "attnlib.scaled_dot_product_attention": "attnlib.attention.scaled_dot_product_attention",
    "attnlib.scaled_dot_scores": "attnlib.scores.scaled_dot_scores",
    "attnlib.scores.TORCH": "attnlib._doc._filler.<locals>.fill",
    "attnlib.scores.check_additive": "attnlib._validate.check_additive",
    "attnlib.scores.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.scores.check_general": "attnlib._validate.check_general",
    "attnlib.scores.check_query_key": "attnlib._validate.check_query_key",
    "attnlib.scores.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.scores.upcast": "attnlib._tensors.upcast",
    "attnlib.sinusoidal_encoding": "attnlib.positions.sinusoidal_encoding",
    "attnlib.softmax": "attnlib.functional.softmax",
    "attnlib.split_heads": "attnlib.modules.split_heads",
    "attnlib.tile_step": "attnlib.efficient.online.tile_step",
    "attnlib.tiled_attention": "attnlib.efficient.tiled.tiled_attention",
    "attnlib.transformer.KVCache": "attnlib.efficient.kv_cache.KVCache",
    "attnlib.transformer.MultiHeadAttention": "attnlib.modules.MultiHeadAttention",
    "attnlib.transformer.check_choice": "attnlib._validate.check_choice",
    "attnlib.transformer.check_flag": "attnlib._validate.check_flag",
    "attnlib.transformer.check_greater": "attnlib._validate.check_greater",
    "attnlib.transformer.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.transformer.check_probability": "attnlib._validate.check_probability",
    "attnlib.transformer.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.transformer.decode_step": "attnlib.efficient.kv_cache.decode_step",
    "attnlib.transformer.merge_heads": "attnlib.modules.merge_heads",
    "attnlib.transformer.split_heads": "attnlib.modules.split_heads",
    "attnlib.unpatchify": "attnlib.vision.unpatchify",
    "attnlib.variants.LatentAttention": "attnlib.variants.latent.LatentAttention",
    "attnlib.variants.LatentCache": "attnlib.variants.latent.LatentCache",
    "attnlib.variants.LinearAttentionState": "attnlib.variants.linear.LinearAttentionState",
    "attnlib.variants.cache_bytes_per_token": "attnlib.variants.latent.cache_bytes_per_token",
    "attnlib.variants.elu_feature_map": "attnlib.variants.linear.elu_feature_map",
    "attnlib.variants.fixed_mask": "attnlib.variants.patterns.fixed_mask",
    "attnlib.variants.global_token_mask": "attnlib.variants.patterns.global_token_mask",
    "attnlib.variants.latent.apply_rope": "attnlib.positions.apply_rope",
    "attnlib.variants.latent.check_choice": "attnlib._validate.check_choice",
    "attnlib.variants.latent.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.variants.latent.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.variants.linear.broadcast_shapes": "attnlib._validate.broadcast_shapes",
    "attnlib.variants.linear.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.variants.linear.check_tensors": "attnlib._tensors.check_tensors",
    "attnlib.variants.linear_attention": "attnlib.variants.linear.linear_attention",
    "attnlib.variants.linear_attention_recurrent":
        "attnlib.variants.linear.linear_attention_recurrent",
    "attnlib.variants.patterns.check_integer": "attnlib._validate.check_integer",
    "attnlib.variants.patterns.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.variants.receptive_field": "attnlib.variants.patterns.receptive_field",
    "attnlib.variants.retention": "attnlib.variants.linear.retention",
    "attnlib.variants.retention_recurrent": "attnlib.variants.linear.retention_recurrent",
    "attnlib.variants.sink_mask": "attnlib.variants.patterns.sink_mask",
    "attnlib.variants.sliding.broadcast_shapes": "attnlib._validate.broadcast_shapes",
    "attnlib.variants.sliding.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.variants.sliding.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.variants.sliding.scale_or_default": "attnlib._validate.scale_or_default",
    "attnlib.variants.sliding.work_dtype": "attnlib._tensors.work_dtype",
    "attnlib.variants.sliding_window_attention":
        "attnlib.variants.sliding.sliding_window_attention",
    "attnlib.variants.sliding_window_mask": "attnlib.variants.patterns.sliding_window_mask",
    "attnlib.variants.strided_mask": "attnlib.variants.patterns.strided_mask",
    "attnlib.vision.check_flag": "attnlib._validate.check_flag",
    "attnlib.vision.check_floating_tensors": "attnlib._tensors.check_floating_tensors",
    "attnlib.vision.check_positive_int": "attnlib._validate.check_positive_int",
    "attnlib.vision.check_tensors": "attnlib._tensors.check_tensors",
}
# fmt: on


if __name__ == "__main__":
    from pathlib import Path

    if sys.argv[1:] == ["--write"]:
        here = Path(__file__)
        here.write_text(render(build(), here.read_text()))
    else:
        print(render(build(), Path(__file__).read_text()), end="")
