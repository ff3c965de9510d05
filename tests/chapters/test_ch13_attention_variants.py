"""Chapter 13: the page's claims against its record, and the machinery the page relies on.

The page (book/13-attention-variants.ipynb) trains nothing: it loads the recorded runs of
``variant_lm.experiment`` (attnlib/chapters/spreads/ch13.json) and measures only cheap things.
So its prose about the trained variants is guarded here on every recorded run, with the
constants the page itself uses (read from its source, so that the page and this test cannot
drift apart), and the exact checks it shows (receptive field, banded kernel, recurrence,
absorbed MLA, cache sizes) are repeated on other sizes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from page_checks import page_problems

from attnlib import variants
from attnlib.chapters import spread, variant_lm

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "13-attention-variants.ipynb"
TEST_SIZE = 512  # the held-out sequences of variant_lm.train_variant


def _code() -> str:
    cells = json.loads(PAGE.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _markdown() -> str:
    cells = json.loads(PAGE.read_text(encoding="utf-8"))["cells"]
    return " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")


def _page_constant(name: str) -> float:
    found = re.findall(rf"^{name} = ([0-9.]+)", _code(), flags=re.M)
    assert len(found) == 1, f"the page should define {name} once as a number"
    return float(found[0])


@pytest.fixture(scope="module")
def record():
    return spread.load("ch13")


# --- the record the page reads ---------------------------------------------------------------


def test_the_record_is_the_experiment_over_five_seeds(record):
    assert record.experiment == "attnlib.chapters.variant_lm:experiment"
    assert record.n_seeds >= spread.MIN_SEEDS and not record.suggestive
    for kind in variant_lm.VARIANTS:
        for metric in ("initial_filler_loss", "filler_loss", "recall", "parameters"):
            assert len(record.values(f"{kind}_{metric}")) == len(record.runs)


def test_every_recorded_model_starts_within_half_a_nat_of_chance(record):
    chance = math.log(variant_lm.VOCAB_SIZE)
    for kind in variant_lm.VARIANTS:
        starts = record.values(f"{kind}_initial_filler_loss")
        assert max(abs(s - chance) for s in starts) < 0.5, (kind, starts)


def test_local_modelling_claim_holds_in_every_seed(record):
    """'every variant ends within FLOOR_MARGIN nats of the floor', the page's margin."""
    margin = _page_constant("FLOOR_MARGIN")
    assert margin <= 0.1, "a margin this wide would no longer say 'learns the local rule'"
    floor = variant_lm.FILLER_ENTROPY
    for kind in variant_lm.VARIANTS:
        losses = record.values(f"{kind}_filler_loss")
        assert all(floor - 1e-3 < x < floor + margin for x in losses), (kind, losses)


def test_the_window_and_linear_attention_recall_at_chance_in_every_seed(record):
    """The page explains both results ('no training can find it', 'does not pick the key out')."""
    band = _page_constant("BAND_SE") * math.sqrt(1 / 8 * 7 / 8 / TEST_SIZE)
    for kind in ("window", "linear"):
        recall = record.values(f"{kind}_recall")
        k, n = record.seeds_holding(lambda m, kind=kind: abs(m[f"{kind}_recall"] - 1 / 8) <= band)
        assert k == n, f"{kind}: recall {recall} is not within {band:.3f} of 1/8 in every seed"


def test_full_attention_recalls_above_chance_in_every_seed(record):
    band = _page_constant("BAND_SE") * math.sqrt(1 / 8 * 7 / 8 / TEST_SIZE)
    recall = record.values("full_recall")
    assert min(recall) > 1 / 8 + band, recall


def test_the_page_states_no_trained_number_by_hand():
    """The recall and loss ranges are glued from the record, never typed into the prose."""
    text = _markdown()
    for match in re.findall(r"\b0\.\d{2,3}\b", text):
        assert match in {"0.125"}, f"a typed number {match} in the prose: glue it"


# --- the machinery the page shows -------------------------------------------------------------


@pytest.mark.parametrize(("window", "layers"), [(2, 1), (4, 3), (5, 4), (8, 2)])
def test_the_receptive_field_of_a_window_is_l_times_w_minus_1_plus_1(window, layers):
    field = variants.receptive_field(variants.sliding_window_mask(40, window), layers)
    assert int(field[-1].sum()) == layers * (window - 1) + 1
    assert field[-1, 39 - layers * (window - 1)] and not field[-1, 38 - layers * (window - 1)]


def test_the_task_puts_the_key_out_of_the_windows_reach():
    """The page's claim that no training lets the window model find the key."""
    n = variant_lm.SEQ_LEN - 1  # the model reads all tokens but the last
    field = variants.receptive_field(variants.sliding_window_mask(n, variant_lm.WINDOW), variant_lm.LAYERS)
    query = variant_lm.SEQ_LEN - 2
    assert not field[query, : variant_lm.KEY_LAST + 1].any()
    tokens = variant_lm.recall_batch(64, torch.Generator().manual_seed(3))
    where = (tokens[:, :-1] < variant_lm.KEYS).nonzero()[:, 1]
    assert int(where.max()) <= variant_lm.KEY_LAST and (tokens[:, -2] == variant_lm.QUERY).all()


def test_a_global_token_at_position_zero_and_sinks_relay_nothing_under_a_causal_mask():
    n = 64

    def layers_to_read_everything(mask):
        return next(L for L in range(1, n + 1) if variants.receptive_field(mask, L)[-1].all())

    window = layers_to_read_everything(variants.sliding_window_mask(n, 8))
    assert window == math.ceil((n - 1) / 7)
    assert layers_to_read_everything(variants.sink_mask(n, 8, sinks=4)) == window
    assert layers_to_read_everything(variants.global_token_mask(n, 8, [0])) == window
    assert layers_to_read_everything(variants.global_token_mask(n, 8, [32])) < window
    assert layers_to_read_everything(variants.strided_mask(n, 8)) == 2


def test_the_banded_kernel_equals_the_masked_softmax_in_float64():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 70, 8, dtype=torch.float64)
    for window, block in ((1, 8), (9, 4), (33, 16), (100, 16)):
        band = variants.sliding_window_attention(q, k, v, window, block_size=block)
        mask = variants.sliding_window_mask(70, window)
        assert (band - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max() < 1e-12


def test_the_pages_recurrence_equals_the_parallel_form():
    """The page's own loop (its cell defines linear_recurrence), run here on other sizes."""
    source = _code()
    start = source.index("def linear_recurrence")
    end = source.index("\n\n\n", start)
    scope = {"torch": torch, "variants": variants}
    exec(source[start:end], scope)
    torch.manual_seed(4)
    q, k = torch.randn(2, 30, 5, dtype=torch.float64)
    v = torch.randn(30, 3, dtype=torch.float64)
    assert (scope["linear_recurrence"](q, k, v) - variants.linear_attention(q, k, v)).abs().max() < 1e-12


def test_mla_decoding_absorbed_and_not_gives_the_forward_pass():
    torch.manual_seed(5)
    mla = variants.LatentAttention(24, num_heads=3, head_dim=8, latent_dim=10, rope_dim=6).double()
    x = torch.randn(1, 9, 24, dtype=torch.float64)
    whole = mla(x)
    for absorbed in (False, True):
        cache = variants.LatentCache()
        out = torch.cat([mla.decode_step(x[:, t : t + 1], cache, absorbed=absorbed) for t in range(9)], dim=1)
        assert (out - whole).abs().max() < 1e-12
        assert cache.elements_per_token() == 16


def test_the_cache_table_at_deepseek_v2s_size():
    """MLA's 512 + 64 numbers are the cache of GQA with 2.25 groups (DeepSeek-V2, Sec. 2.1)."""
    big = dict(num_heads=128, head_dim=128, layers=60, bytes_per_element=2)
    mha = variants.cache_bytes_per_token("mha", **big)
    mla = variants.cache_bytes_per_token("mla", latent_dim=512, rope_dim=64, **big)
    assert mha == 2 * 128 * 128 * 60 * 2 and mla == 576 * 60 * 2
    assert mla / mha == pytest.approx(2.25 / 128)
    gqa = variants.cache_bytes_per_token("gqa", kv_heads=8, **big)
    assert gqa == 8 * variants.cache_bytes_per_token("mqa", **big)


def test_the_variants_of_the_page_have_the_recorded_parameter_counts(record):
    for kind in variant_lm.VARIANTS:
        model = variant_lm.build_variant_model(kind, 0)
        assert sum(p.numel() for p in model.parameters()) == record.values(f"{kind}_parameters")[0]


# --- the page itself ---------------------------------------------------------------------------


def test_the_page_is_in_the_table_of_contents_after_chapter_12():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert toc.index("book/12-real-text") < toc.index("book/13-attention-variants")


def test_the_page_glues_what_it_cites_and_fits_80_columns():
    assert page_problems(PAGE) == []


def test_the_page_loads_its_record_and_its_quiz_names_its_sections():
    from attnlib.checks.quiz import load_quiz

    assert 'spread.load("ch13")' in _code()
    headings = {
        re.sub(r"[^a-z0-9]+", "-", h.lower()).strip("-")
        for h in re.findall(r"^## (.+)$", "\n".join(_markdown_cells()), flags=re.M)
    }
    quiz = load_quiz("13")
    assert 4 <= len(quiz["questions"]) <= 6
    for question in quiz["questions"]:
        assert question["section"] in headings, question["section"]
    assert "check-your-understanding" in headings


def _markdown_cells() -> list[str]:
    cells = json.loads(PAGE.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def test_no_variant_that_reaches_the_key_is_above_another_in_every_seed(record):
    """The page says recall 'changes from seed to seed' among full, MQA and MLA: no pair is ordered."""
    pair = 2 * math.sqrt(2) * math.sqrt(1 / 8 * 7 / 8 / TEST_SIZE)
    for a in ("full", "mqa", "mla"):
        for b in ("full", "mqa", "mla"):
            if a != b:
                k, n = record.seeds_holding(lambda m, a=a, b=b: m[f"{a}_recall"] > m[f"{b}_recall"] + pair)
                assert k < n, f"{a} is above {b} in every seed: the page should say so"
