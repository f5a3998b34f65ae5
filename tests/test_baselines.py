"""IncCLIP's baselines adapted to CLIP (UCIR, GeoDL, Co2L): their losses against hand-computed or
independently computed references, and each method end to end on a small stream."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_experiment
from vlcp.errors import ConfigError
from vlcp.losses import (clip_loss, cosine_distill, geodesic_distill, geodesic_flow_kernel, margin_ranking,
                         relation_distill)
from vlcp.methods import get_method
from vlcp.run import run_experiment


def unit(*shape, seed=0):
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), dim=-1)


def orthonormal(d, k, seed):
    return torch.linalg.qr(torch.randn(d, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))[0]


def test_gfk_equals_the_integral_along_the_geodesic():
    p1, p2 = orthonormal(10, 3, 0), orthonormal(10, 3, 1)
    # the geodesic Φ(t) = P1 U cos(tΘ) + W sin(tΘ) from span(P1) (t = 0) to span(P2) (t = 1)
    u, cos, vh = torch.linalg.svd(p1.T @ p2)
    theta = torch.arccos(cos.clamp(-1, 1))
    w = (p2 @ vh.T - p1 @ u * cos) / torch.sin(theta)
    phi = lambda t: p1 @ u * torch.cos(t * theta) + w * torch.sin(t * theta)  # noqa: E731
    assert torch.allclose(phi(1.0) @ phi(1.0).T, p2 @ p2.T, atol=1e-8)      # it ends in span(P2)
    ts = torch.linspace(0, 1, 2001, dtype=torch.float64)
    vals = torch.stack([phi(t) @ phi(t).T for t in ts])
    want = torch.trapezoid(vals, ts, dim=0)
    assert torch.allclose(geodesic_flow_kernel(p1, p2), want, atol=1e-5)


def test_gfk_of_one_subspace_is_its_projection():
    p = orthonormal(8, 2, 3)
    assert torch.allclose(geodesic_flow_kernel(p, p), p @ p.T, atol=1e-6)


def test_geodesic_distill_is_zero_for_equal_features_and_has_gradients():
    x = unit(16, 8).float()
    assert geodesic_distill(x, x, dim=4).item() == pytest.approx(0, abs=1e-5)
    new = unit(16, 8, seed=1).float().requires_grad_(True)
    loss = geodesic_distill(new, x, dim=4)
    loss.backward()
    assert 0 < loss.item() < 2 and new.grad.abs().sum() > 0


def test_cosine_distill_hand_computed():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[0.0, 1.0], [0.0, 2.0]])
    assert cosine_distill(a, b).item() == pytest.approx((1 + 0) / 2)


def test_margin_ranking_hand_computed():
    img = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    txt = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
    rows = torch.tensor([False, True, True])
    # row 1: pos 1.0, negatives 0.0 and 0.6 -> k=2: relu(0.5 - 1 + 0.6) + relu(0.5 - 1 + 0) = 0.1
    # row 2: pos 0.96, negatives 0.6 and 0.8 -> relu(0.5 - 0.96 + 0.8) + relu(0.5 - 0.96 + 0.6) = 0.34 + 0.14
    want = (0.1 + 0.0 + 0.34 + 0.14) / 4
    assert margin_ranking(img, txt, rows, margin=0.5, k=2).item() == pytest.approx(want, abs=1e-6)
    assert margin_ranking(img, txt, torch.zeros(3, dtype=torch.bool)).item() == 0


def test_relation_distill_against_explicit_cross_entropy():
    new, old = unit(5, 4, seed=2), unit(5, 4, seed=3)
    assert relation_distill(new, new, 0.2, 0.2).item() == pytest.approx(0, abs=1e-9)
    want = 0.0
    for i in range(5):
        others = [j for j in range(5) if j != i]
        p = torch.softmax(old[i] @ old[others].T / 0.01, 0)
        q = torch.softmax(new[i] @ new[others].T / 0.2, 0)
        want += (p * (p.clamp_min(1e-300).log() - q.log())).sum() / 5
    assert relation_distill(new, old, 0.2, 0.01).item() == pytest.approx(want.item(), rel=1e-6)


def test_asymmetric_clip_loss_only_averages_anchor_rows():
    img, txt = unit(4, 8, seed=4), unit(4, 8, seed=5)
    scale = torch.tensor(10.0, dtype=torch.float64)
    assert clip_loss(img, txt, scale, anchors=torch.ones(4, dtype=torch.bool)).item() == pytest.approx(
        clip_loss(img, txt, scale).item())
    labels = torch.arange(4)
    rows = (F.cross_entropy(10 * img @ txt.T, labels, reduction="none")
            + F.cross_entropy(10 * txt @ img.T, labels, reduction="none")) / 2
    mask = torch.tensor([True, True, False, False])
    assert clip_loss(img, txt, scale, anchors=mask).item() == pytest.approx(rows[:2].mean().item())


@pytest.mark.parametrize("name,field,value", [("ucir", "k", 0), ("ucir", "margin", -1.0), ("geodl", "dim", 0),
                                              ("co2l", "t_old", 0.0), ("co2l", "ird_weight", -1.0)])
def test_config_errors_name_the_field(name, field, value):
    with pytest.raises(ConfigError, match=field):
        get_method(name).Config(**{field: value})


@pytest.mark.parametrize("name,terms", [("ucir", {"clip", "lf", "mr"}), ("geodl", {"clip", "geo"}),
                                        ("co2l", {"clip", "ird"})])
def test_baseline_runs_with_its_terms(emoji_root, tmp_path, name, terms):
    cfg = tiny_experiment(emoji_root, name, steps=9, model="vlcp-tiny-rn", buffer_size=20)
    r = run_experiment(cfg, tmp_path)
    assert set(r["train"][0]["terms"]) == {"clip"}                      # task 1: no previous model
    assert all(set(t["terms"]) == terms for t in r["train"][1:])
    assert all(math.isfinite(v) for t in r["train"] for v in t["terms"].values())


def test_adaptive_weight_grows_with_the_old_data():
    cls = get_method("ucir")

    class Ctx:
        task_ids = [torch.arange(30), torch.arange(10), torch.arange(10)]
        task = 2
    assert cls.adaptive_weight(5.0, Ctx) == pytest.approx(5.0 * math.sqrt(40 / 10))
