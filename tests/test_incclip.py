"""IncCLIP's pieces against hand-computed cases, and the method end to end (resume included)."""
import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_experiment
from test_train import strip
from vlcp.errors import ConfigError
from vlcp.losses import clip_loss, cross_modal_kd, score_band_loss
from vlcp.methods import get_method
from vlcp.methods.incclip import clip_weight_norms
from vlcp.models.clip import create_clip, encode_text_embeddings
from vlcp.run import run_experiment


def test_score_band_loss_hand_computed():
    s = torch.tensor([0.0, 0.2, 0.5])
    # band [0.1, 0.3]: 0.1 below, inside, 0.2 above -> mean 0.1
    assert score_band_loss(s, 0.1, 0.3).item() == pytest.approx(0.1)
    assert score_band_loss(torch.tensor([0.15, 0.25]), 0.1, 0.3).item() == 0


def test_cross_modal_kd_against_explicit_kl():
    g = torch.Generator().manual_seed(0)
    unit = lambda *s: F.normalize(torch.randn(*s, generator=g), dim=-1)  # noqa: E731
    img, txt, old_img, old_txt, extra, old_extra = unit(4, 8), unit(4, 8), unit(4, 8), unit(4, 8), unit(2, 8), unit(2, 8)
    assert cross_modal_kd(img, txt, img, txt, 10.0, 10.0, extra, extra).item() == pytest.approx(0, abs=1e-6)

    def kl(student, teacher):  # mean over rows of sum p_t (log p_t - log p_s)
        p, q = teacher.softmax(1), student.softmax(1)
        return (p * (p.log() - q.log())).sum(1).mean()
    cols, old_cols = torch.cat([txt, extra]), torch.cat([old_txt, old_extra])
    want = (kl(10 * img @ cols.T, 5 * old_img @ old_cols.T) + kl(10 * txt @ img.T, 5 * old_txt @ old_img.T)) / 2
    got = cross_modal_kd(img, txt, old_img, old_txt, 10.0, 5.0, extra, old_extra)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)


def test_extra_negatives_only_in_image_to_text():
    g = torch.Generator().manual_seed(1)
    img, txt = F.normalize(torch.randn(4, 8, generator=g), dim=1), F.normalize(torch.randn(4, 8, generator=g), dim=1)
    extra = F.normalize(torch.randn(3, 8, generator=g), dim=1)
    labels = torch.arange(4)
    i2t = F.cross_entropy(10 * img @ torch.cat([txt, extra]).T, labels)
    t2i = F.cross_entropy(10 * txt @ img.T, labels)
    assert clip_loss(img, txt, torch.tensor(10.0), extra_text=extra).item() == pytest.approx(((i2t + t2i) / 2).item(), rel=1e-6)


@pytest.mark.parametrize("name", ["vlcp-tiny", "vlcp-tiny-rn"])
def test_encode_text_embeddings_matches_encode_text(name):
    model, tok = create_clip(name)
    t = tok(["a red apple", "grinning face with big eyes"])
    want = model.encode_text(t, normalize=True)
    assert torch.allclose(encode_text_embeddings(model, model.token_embedding(t), t), want, atol=1e-6)


def test_pseudo_texts_move_into_the_score_band():
    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    cls = get_method("incclip")
    m = cls(cls.Config(pseudo_iters=40, pseudo_lr=2.0, s_min=0.3, s_max=0.5), seed=0)
    m.old = model.eval().requires_grad_(False)
    tokens = tok([f"emoji number {i}" for i in range(8)])
    images = F.normalize(torch.randn(8, 128), dim=1)
    before = cls(cls.Config(pseudo_iters=0), seed=0)
    before.old = m.old
    e0, _, f0 = before.pseudo_texts(tokens, images)
    e1, pool, f1 = m.pseudo_texts(tokens, images)
    band = lambda f: score_band_loss((f * images).sum(1), 0.3, 0.5).item()  # noqa: E731
    assert band(f1) < 0.25 * band(f0)                 # optimisation pulled the cosines into the band
    assert e1.shape == (8, 24, 64) and not e1.requires_grad and pool.shape == tokens.shape
    assert torch.allclose(f1, encode_text_embeddings(model, e1, pool), atol=1e-6)


def test_weight_norm_clipping():
    lin = torch.nn.Linear(3, 3)
    ref = {"weight": lin.weight.detach().norm().clone()}
    with torch.no_grad():
        lin.weight.mul_(2.0)
        bias = lin.bias.clone()
    direction = F.normalize(lin.weight.detach().flatten(), dim=0)
    assert clip_weight_norms(lin, ref, 1.5) == 1
    assert lin.weight.norm().item() == pytest.approx(1.5 * ref["weight"].item(), rel=1e-6)
    assert torch.allclose(F.normalize(lin.weight.detach().flatten(), dim=0), direction, atol=1e-6)
    assert torch.equal(lin.bias, bias)                # not in ref_norms: untouched
    assert clip_weight_norms(lin, ref, 1.5) == 0      # already on the bound
    big = {"weight": 10 * ref["weight"]}              # under the bound: bit-identical
    before = lin.weight.detach().clone()
    assert clip_weight_norms(lin, big, 1.0) == 0 and torch.equal(lin.weight, before)


def test_pseudo_texts_regenerate_every_k_steps(monkeypatch):
    from types import SimpleNamespace

    from vlcp.methods.base import Batch, frozen_copy

    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    cls = get_method("incclip")
    m = cls(cls.Config(pseudo_every=3, pseudo_iters=1, pseudo_batch=2), seed=0)
    m.old = frozen_copy(model)
    calls = []
    real = m.pseudo_texts
    monkeypatch.setattr(m, "pseudo_texts", lambda *a: calls.append(1) or real(*a))
    batch = Batch(torch.randn(4, 3, 32, 32), tok(["a", "b c", "d", "e f g"]), torch.arange(4))
    extras = []
    for step in range(7):
        ctx = SimpleNamespace(step=step, extras={"current_ids": torch.arange(2)})
        m.loss(model, batch, ctx)
        extras.append(m.pseudo[0])
    assert len(calls) == 3                            # steps 0, 3, 6
    assert extras[0] is extras[2] and extras[2] is not extras[3]


@pytest.mark.parametrize("field,value", [("s_min", 0.6), ("mix_high", 1.5), ("pseudo_iters", -1),
                                         ("kd_weight", -0.1), ("wnc_ratio", 0.0), ("pseudo_batch", 0),
                                         ("pseudo_every", 0)])
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        get_method("incclip").Config(**{field: value})


@pytest.fixture(scope="module")
def incclip_run(emoji_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("incclip")
    cfg = tiny_experiment(emoji_root, "incclip", model="vlcp-tiny-rn", buffer_size=20, pseudo_iters=2)
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, heldout=True))   # the study's held-out suite
    return run_experiment(cfg, out), cfg


def test_incclip_runs_with_all_terms(incclip_run):
    r, _ = incclip_run
    assert r["config"]["model"]["name"] == "vlcp-tiny-rn"
    assert set(r["train"][0]["terms"]) == {"clip"}                 # task 1: no previous model yet
    assert all(set(t["terms"]) == {"clip", "kd"} and t["terms"]["kd"] >= 0 for t in r["train"][1:])
    assert len(r["cumulative"]) == 3
    acc = r["heldout"][-1]["classification"]          # the eight held-out classification sets
    assert set(acc) == {"test/subgroup", "test/group", "unseen_style/subgroup", "unseen_style/group",
                        "shapes/shape", "shapes/colour", "scenes/count", "scenes/background"}
    assert all(0 <= v <= 100 for v in acc.values())


def test_incclip_resume_equals_uninterrupted(incclip_run, tmp_path):
    full, cfg = incclip_run
    run_experiment(cfg, tmp_path, stop_after_task=1)
    resumed = run_experiment(cfg, tmp_path)
    assert strip(resumed) == strip(json.loads(json.dumps(full)))
