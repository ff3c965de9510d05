"""attnlib.chapters.web_export: chapter 10's model as the file the website runs.

The browser half (the page's forward pass against torch) is tests/site/test_explorers.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from attnlib.chapters import tiny_lm, web_export

ROOT = Path(__file__).resolve().parents[2]


def _small(seed=0, **kwargs):
    return tiny_lm.build_model(seed, d_model=16, num_heads=2, d_ff=32, num_layers=2, **kwargs).eval()


@pytest.mark.parametrize("switches", [{}, {"norm_first": False}, {"residual": False}, {"layer_norm": False}])
def test_a_model_comes_back_from_its_file(tmp_path, switches):
    model = _small(**switches)
    path = web_export.export_model(model, tmp_path / "m.json")
    data = json.loads(path.read_text())
    assert data["format"] == web_export.FORMAT and data["parameters"] == sum(
        p.numel() for p in model.parameters()
    )
    back = web_export.load_model(path)
    for key, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    tokens = tiny_lm.copy_batch(3, torch.Generator().manual_seed(0))[:, :12]
    with torch.no_grad():
        assert torch.equal(back(tokens), model(tokens))


def test_forward_with_attention_is_the_models_forward_and_its_maps():
    model = _small()
    tokens = tiny_lm.copy_batch(2, torch.Generator().manual_seed(1))
    logits, maps = web_export.forward_with_attention(model, tokens)
    with torch.no_grad():
        assert torch.equal(logits, model(tokens))
    assert torch.equal(maps, tiny_lm.attention_maps(model, tokens))  # pre-norm: the chapter's maps
    assert torch.allclose(maps.sum(-1), torch.ones(()))


def test_what_the_page_cannot_run_is_refused_by_name():
    with pytest.raises(TypeError, match="TinyDecoderLM"):
        web_export.model_to_dict(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="relu only"):
        web_export.model_to_dict(_small(activation="gelu"))
    wide = tiny_lm.TinyDecoderLM(d_model=8, num_heads=2, d_ff=8, num_layers=1, vocab_size=20)
    with pytest.raises(ValueError, match="copy language has 12"):
        web_export.model_to_dict(wide)
    with pytest.raises(ValueError, match="not an attnlib-tiny-lm file"):
        web_export.load_model({"format": "onnx"})


def test_the_page_model_is_trained_as_the_chapter_trains_its_model():
    """The build's model (export_chapter_model) has the chapter's seed, configuration and steps."""
    source = "".join(
        "".join(c["source"])
        for c in json.loads((ROOT / "book" / "10-transformer.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    )
    config = ", ".join(f"{k}={v}" for k, v in web_export.CHAPTER_CONFIG.items())
    build = re.search(r"lm = tiny_lm\.build_model\((\d+), ([^)]*)\)", source)
    # here, or in a second process: second_process.start(tiny_lm.train, lm, steps=..., seed=...)
    train = re.search(r"tiny_lm\.train(?:\(|, )lm, steps=(\d+), seed=(\d+)\)", source)
    assert build and train, "chapter 10 no longer trains its model as web_export expects"
    assert int(build[1]) == web_export.CHAPTER_SEED and " ".join(build[2].split()) == config
    assert (int(train[1]), int(train[2])) == (web_export.CHAPTER_STEPS, web_export.CHAPTER_SEED)
    assert "torch.set_num_threads(1)" in source  # export_chapter_model trains on one thread too
