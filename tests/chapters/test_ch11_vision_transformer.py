"""Chapter 11: the digits, the tiny ViT, the permutation test and rollout (attnlib.chapters.vit)."""

from pathlib import Path

import pytest
import torch

import attnlib
from attnlib.chapters import vit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data():
    return vit.digits()


def test_digits_are_split_once_into_disjoint_scaled_sets(data):
    (x, y), (xt, yt) = data["train"], data["test"]
    assert x.shape == (1437, 1, 8, 8) and xt.shape == (vit.N_TEST, 1, 8, 8)
    assert x.dtype == torch.float32 and y.dtype == torch.long
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert set(y.tolist()) == set(range(10)) == set(yt.tolist())
    # the same split on every call, and no test image among the training images
    again = vit.digits()
    assert torch.equal(again["test"][0], xt) and torch.equal(again["train"][1], y)
    flat_train = {tuple(row.tolist()) for row in x.flatten(1)}
    overlap = sum(tuple(row.tolist()) in flat_train for row in xt.flatten(1))
    assert overlap < 5, f"{overlap} test images also in the training set (duplicates in the data at most)"


def test_models_map_images_to_ten_logits_with_similar_sizes():
    sizes = {}
    for kind in vit.MODELS:
        model = vit.build(kind, 0)
        assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
        sizes[kind] = sum(p.numel() for p in model.parameters())
    assert max(sizes.values()) < 1.1 * min(sizes.values()), sizes


def test_build_draws_from_the_seed_alone_and_leaves_the_global_generator():
    state = torch.get_rng_state()
    a, b, c = vit.build("vit", 3), vit.build("vit", 3), vit.build("vit", 4)
    assert torch.equal(state, torch.get_rng_state())
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.cls_token, c.cls_token)
    with pytest.raises(ValueError, match="build: kind must be one of"):
        vit.build("resnet", 0)


def test_tokens_put_the_class_token_first_and_positions_on_every_token():
    model = vit.build("vit", 0).double()
    images = torch.rand(2, 1, 8, 8, dtype=torch.float64)
    tokens = model.tokens(images)  # (2, 17, 32)
    patches = model.patches(images)
    pos = model.positions.weight
    torch.testing.assert_close(tokens[:, 0], (model.cls_token[0, 0] + pos[0]).expand(2, -1))
    torch.testing.assert_close(tokens[:, 1:], patches + pos[1:])


def test_shuffle_patches_moves_whole_patches_and_undoes_exactly(data):
    images = data["test"][0][:5]
    order = vit.patch_order()
    assert sorted(order.tolist()) == list(range(16)) and order.tolist() != list(range(16))
    assert torch.equal(vit.shuffle_patches(images, torch.arange(16)), images)
    shuffled = vit.shuffle_patches(images, order)
    assert torch.equal(vit.shuffle_patches(shuffled, torch.argsort(order)), images)
    # new patch n is old patch order[n]: the top-left 2x2 square comes from patch order[0]
    r, c = divmod(int(order[0]), 4)
    assert torch.equal(shuffled[:, :, :2, :2], images[:, :, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2])


def test_without_positions_a_patch_shuffle_leaves_every_logit_for_any_weights():
    """Equivariance (chapters 06, 09): the class token's output does not see the patches' order."""
    images = torch.rand(4, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    shuffled = vit.shuffle_patches(images, vit.patch_order())
    nopos = vit.build("vit", 1, positions=False).double().eval()
    with torch.no_grad():
        torch.testing.assert_close(nopos(shuffled), nopos(images), rtol=0, atol=1e-12)
        for kind in ("vit", "cnn", "mlp"):  # with positions, or any pixel layout, it changes
            model = vit.build(kind, 1).double().eval()
            assert (model(shuffled) - model(images)).abs().max() > 1e-6, kind


def test_attention_maps_are_distributions_and_rollout_lands_on_the_grid(data):
    model = vit.build("vit", 0)
    images = data["test"][0][:3]
    maps = vit.attention_maps(model, images)
    assert maps.shape == (2, 3, 4, 17, 17)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 3, 4, 17))
    grid = vit.rollout_to_image(model, images)
    assert grid.shape == (3, 4, 4) and (grid >= 0).all() and (grid.sum((1, 2)) <= 1 + 1e-6).all()
    on_ink, ink_share = vit.rollout_on_ink(model, images)
    assert 0 <= on_ink <= 1 and 0 < ink_share < 1


def test_position_similarity_and_neighbours():
    model = vit.build("vit", 0)
    sim = vit.position_similarity(model)
    assert sim.shape == (16, 16)
    torch.testing.assert_close(sim.diagonal(), torch.ones(16))
    # on a hand-made table: neighbours 1, everything else 0
    rc = torch.stack(torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij"), -1).reshape(16, 2)
    dist = (rc[:, None] - rc[None]).abs().sum(-1)
    hand = (dist == 1).float()
    assert vit.neighbour_similarity(hand) == (1.0, 0.0)


def test_subsets_are_nested_and_sized():
    small, middle, full = (vit._subset(1437, f) for f in vit.FRACTIONS)
    assert len(small) == 144 and len(middle) == 431 and len(full) == 1437
    assert set(small.tolist()) <= set(middle.tolist()) <= set(full.tolist())


def test_a_short_training_run_learns(data, one_thread):
    (x, y), (xt, yt) = data["train"], data["test"]
    model = vit.build("mlp", 0)
    before = vit.accuracy(model, xt, yt)
    losses = vit.train(model, x, y, steps=60, seed=0)
    assert losses[-1] < losses[0]
    assert vit.accuracy(model, xt, yt) > before + 0.4


def test_binder_and_the_course_pin_the_same_scikit_learn():
    def pin(path):
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        found = [line.split("#")[0].strip() for line in lines if line.startswith("scikit-learn==")]
        assert len(found) == 1, f"{path} pins scikit-learn {len(found)} times"
        return found[0]

    assert pin("requirements.txt") == pin("binder/requirements.txt") == "scikit-learn==1.9.1"


def test_at_most_three_quarters_of_the_class_tokens_rollout_reaches_the_patches(data):
    """The chapter's caption: of the four terms of (A2/2 + I/2)(A1/2 + I/2), I/4 stays on the class token."""
    images = data["test"][0][:16]
    for seed in range(3):
        grid = vit.rollout_to_image(vit.build("vit", seed), images)  # (16, 4, 4)
        assert (grid.sum((1, 2)) <= 0.75 + 1e-6).all()
    # and the bound is the identity's quarter: with attention only on the patches it is reached
    weights = torch.zeros(2, 1, 1, 17, 17)
    weights[..., 1:] = 1 / 16  # every token attends evenly to the 16 patches, never to the class token
    rollout = attnlib.attention_rollout(weights)
    torch.testing.assert_close(rollout[0, 0, 1:].sum(), torch.tensor(0.75))


def test_recorded_accuracies_are_whole_images_so_the_chapter_counts_them():
    """342/360 is stored as 0.949999988 (float32): the chapter compares round(acc * 360), never the float."""
    from attnlib.chapters import spread

    runs = spread.load("ch11")
    for run in runs.runs:
        m = run["metrics"]
        values = [m[k] for k in ("vit", "cnn", "mlp", "vit_nopos", "cnn_shuffled", "mlp_shuffled")]
        values += [*m["vit_sizes"], *m["cnn_sizes"], *m["mlp_sizes"]]
        for acc in values:
            assert abs(acc * vit.N_TEST - round(acc * vit.N_TEST)) < 1e-3, (run["seed"], acc)
    assert round(0.949999988079071 * vit.N_TEST) == 342 and 0.949999988079071 < 0.95


def test_rollout_baselines_are_the_controls_of_position(data, monkeypatch):
    """The mean map and other images' maps: what a rollout blind to the picture gives on the same ink."""
    from attnlib.chapters import vit_controls

    images = data["test"][0][:40]
    ink = vit_controls.ink_patches(images).float()  # (40, 4, 4)
    assert ink.shape == (40, 4, 4)
    # a map that looks at the middle columns only, whatever the image: no preference beyond position
    middle = torch.zeros(4, 4)
    middle[:, 1:3] = 1 / 8
    monkeypatch.setattr(vit, "rollout_to_image", lambda model, x: middle.expand(len(x), 4, 4) * 0.7)
    blind = vit_controls.rollout_baselines(None, images)
    assert blind["own"] == pytest.approx(blind["mean_map"]) == pytest.approx(blind["other_maps"])
    assert blind["own"] > blind["even"]  # it "beats" an even spread, by position alone
    assert blind["even"] == pytest.approx(ink.mean().item())
    # a map that follows each image's own ink: above both controls
    follows = ink / ink.sum((1, 2), keepdim=True)
    monkeypatch.setattr(vit, "rollout_to_image", lambda model, x: follows[: len(x)] * 0.5)
    seeing = vit_controls.rollout_baselines(None, images)
    assert seeing["own"] == pytest.approx(1.0)
    assert seeing["own"] > seeing["mean_map"] + 0.05 and seeing["own"] > seeing["other_maps"] + 0.05
    # other_maps is the mean over pairs i != j of map j on the ink of image i
    pairs = [
        (follows[j] * ink[i]).sum().item() for i in range(len(images)) for j in range(len(images)) if i != j
    ]
    assert seeing["other_maps"] == pytest.approx(sum(pairs) / len(pairs), rel=1e-5)
    # the real model: own share equals chapter 11's rollout_on_ink on the same images
    monkeypatch.undo()
    model = vit.build("vit", 0)
    assert vit_controls.rollout_baselines(model, images)["own"] == pytest.approx(
        vit.rollout_on_ink(model, images)[0], abs=1e-6
    )


def test_the_rollout_record_has_five_seeds_and_its_controls():
    """ch11-rollout: the chapter's ViT from at least 5 seeds, its rollout beside the position controls."""
    from attnlib.chapters import spread

    runs = spread.load("ch11-rollout")
    assert runs.n_seeds >= spread.MIN_SEEDS
    for run in runs.runs:
        m = run["metrics"]
        assert 0 < m["ink_share"] < m["rollout_ink_mean_map"] < 1 and 0 < m["rollout_ink_other_maps"] < 1
        assert abs(m["vit"] * vit.N_TEST - round(m["vit"] * vit.N_TEST)) < 1e-3
