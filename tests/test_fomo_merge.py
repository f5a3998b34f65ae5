"""FoMo-in-Flux's merge methods (EMA-, FT-, ZS-Merge): the interpolation, each method's
weight sequence over three simulated tasks, config validation, and resume through the runner."""
import io

import pytest
import torch

import vlcp.methods.ema_merge  # noqa: F401  (register the merge methods)
import vlcp.methods.ft_merge  # noqa: F401
import vlcp.methods.zs_merge  # noqa: F401
import vlcp.methods.isolated  # noqa: F401
from conftest import tiny_experiment, strip_timings as strip
from vlcp.config import experiment_from_dict
from vlcp.errors import ConfigError
from vlcp.methods import get_method
from vlcp.methods.base import TaskContext
from vlcp.methods.merging import interpolate

# -- interpolate ---------------------------------------------------------------------------


def test_interpolate_hand_computed():
    old = {"a": torch.tensor([1.0, -2.0]), "b": torch.tensor([[10.0]], dtype=torch.float64),
           "n": torch.tensor(3)}
    new = {"a": torch.tensor([3.0, 2.0]), "b": torch.tensor([[20.0]], dtype=torch.float64),
           "n": torch.tensor(7)}
    out = interpolate(old, new, 0.9)
    assert torch.allclose(out["a"], torch.tensor([0.9 * 1 + 0.1 * 3, 0.9 * -2 + 0.1 * 2]))   # [1.2, -1.6]
    assert out["b"].dtype == torch.float64 and out["b"].item() == pytest.approx(11.0)
    assert out["n"].item() == 7 and out["n"].dtype == torch.int64                            # non-float: from new
    out = interpolate(old, new, 0.5)
    assert torch.allclose(out["a"], torch.tensor([2.0, 0.0]))
    assert old["a"].tolist() == [1.0, -2.0] and new["a"].tolist() == [3.0, 2.0]              # inputs untouched


def test_interpolate_keeps_equal_entries_exact_and_new_dtype():
    x = torch.randn(1000)
    assert torch.equal(interpolate({"x": x}, {"x": x.clone()}, 0.9)["x"], x)
    h = interpolate({"h": torch.full((2,), 1.0)}, {"h": torch.full((2,), 3.0, dtype=torch.bfloat16)}, 0.75)["h"]
    assert h.dtype == torch.bfloat16 and h.tolist() == [1.5, 1.5]


def test_interpolate_mismatched_keys_and_shapes():
    a, b = torch.zeros(2), torch.ones(2)
    with pytest.raises(ValueError, match="'y'.*not in the new"):
        interpolate({"x": a, "y": a, "z": a}, {"x": b}, 0.9)
    with pytest.raises(ValueError, match="'q'.*not in the old"):
        interpolate({"x": a}, {"x": b, "q": b}, 0.9)
    with pytest.raises(ValueError, match=r"'x' has shape \(2,\).*\(3,\)"):
        interpolate({"x": a}, {"x": torch.ones(3)}, 0.9)

# -- the three methods on a toy model, hooks called directly --------------------------------


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))                       # trainable
        self.frozen = torch.nn.Parameter(torch.tensor([0.3]), requires_grad=False)  # never trained
        self.register_buffer("running", torch.tensor([4.0]))                        # float buffer
        self.register_buffer("count", torch.tensor(0))                              # non-float buffer


P0, R0 = torch.tensor([1.0, -2.0]), torch.tensor([4.0])
DELTAS = [10.0, 20.0, 40.0]   # "training" on task t adds DELTAS[t] to p and running, 1 to count


def ctx(t):
    return TaskContext(task=t, num_tasks=3, train_set=None, task_ids=[], pool=torch.arange(0),
                       materialize=None, generator=torch.Generator())


def offset(model):
    """How far p and running are from θ0 (the same scalar for every float entry that trains)."""
    d = model.p.detach() - P0
    assert torch.allclose(d, d[0].expand(2)) and torch.allclose(model.running - R0, d[:1])
    return d[0].item()


def make(name, w):
    cls = get_method(name)
    return cls(cls.Config() if w is None else cls.Config(w=w))


def drive(name, w, model=None, method=None, tasks=range(3)):
    """Run the hooks over the tasks; per task: (offset at the training start, evaluated offset,
    evaluated count)."""
    if method is None:
        model, method = Toy(), make(name, w)
        method.prepare_model(model)
    rows = []
    for t in tasks:
        method.before_task(model, ctx(t))
        start = offset(model)
        with torch.no_grad():
            model.p += DELTAS[t]
            model.running += DELTAS[t]
            model.count += 1
        method.after_task(model, ctx(t))
        rows.append((start, offset(model), model.count.item()))
        assert torch.equal(model.frozen, torch.tensor([0.3]))   # frozen entries stay bit-exact
    return rows, model, method


# Hand-computed, offsets from θ0 (θ'_t = start_t + Δ_t):
# EMA w=.9: θ'0=10 → .1·10=1; θ'1=1+20=21 → .9·1+.1·21=3; θ'2=3+40=43 → .9·3+.1·43=7
# FT  w=.9: θ'0=10 → 1; θ'1=1+20=21 → .1·21=2.1; θ'2=2.1+40=42.1 → 4.21
# ZS  w=.9: θ'0=10 → 1; θ'1=0+20 → .9·1+.1·20=2.9; θ'2=0+40 → .9·2.9+.1·40=6.61
# w=.5: EMA 5, .5·5+.5·25=15, .5·15+.5·55=35; FT 5, .5·25=12.5, .5·52.5=26.25; ZS 5, 12.5, 26.25
EXPECTED = {
    ("ema-merge", 0.9): ([0, 1, 3], [1, 3, 7], [1, 2, 3]),
    ("ft-merge", 0.9): ([0, 1, 2.1], [1, 2.1, 4.21], [1, 2, 3]),
    ("zs-merge", 0.9): ([0, 0, 0], [1, 2.9, 6.61], [1, 1, 1]),
    ("ema-merge", 0.5): ([0, 5, 15], [5, 15, 35], [1, 2, 3]),
    ("ft-merge", 0.5): ([0, 5, 12.5], [5, 12.5, 26.25], [1, 2, 3]),
    ("zs-merge", 0.5): ([0, 0, 0], [5, 12.5, 26.25], [1, 1, 1]),   # counts: ZS resets to θ0's count
    # isolated (Table 5): every task from θ0, evaluated as trained: θ'_t = Δ_t, the count θ0's + 1
    ("isolated", None): ([0, 0, 0], [10, 20, 40], [1, 1, 1]),
}
W = {"ema-merge": 0.9, "ft-merge": 0.9, "zs-merge": 0.9, "isolated": None}


@pytest.mark.parametrize("name,w", list(EXPECTED))
def test_merge_sequence_hand_computed(name, w):
    rows, _, _ = drive(name, w)
    starts, evaluated, counts = EXPECTED[name, w]
    assert [r[0] for r in rows] == pytest.approx(starts, abs=1e-5)
    assert [r[1] for r in rows] == pytest.approx(evaluated, abs=1e-5)
    assert [r[2] for r in rows] == counts


@pytest.mark.parametrize("name", list(W))
def test_state_round_trip_resumes_identically(name):
    full, _, _ = drive(name, W[name])
    first, model, method = drive(name, W[name], tasks=range(1))
    state = {"model": model.state_dict(), "method": method.state_dict()}
    blob = io.BytesIO()
    torch.save(state, blob)
    blob.seek(0)
    state = torch.load(blob, weights_only=True)
    model2, method2 = Toy(), make(name, W[name])
    method2.prepare_model(model2)
    model2.load_state_dict(state["model"])
    method2.load_state_dict(state["method"])
    rest, _, _ = drive(name, W[name], model2, method2, tasks=range(1, 3))
    assert first + rest == full
    kept = {k for k, v in method.state_dict().items() if v is not None}
    assert kept == {"ema-merge": {"merged"}, "ft-merge": {"init"}, "zs-merge": {"init", "merged"},
            "isolated": {"init"}}[name]

# -- config ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ema-merge", "ft-merge", "zs-merge"])
@pytest.mark.parametrize("w", [0.0, 1.0, -0.1, 1.5])
def test_w_outside_open_unit_interval_names_the_field(name, w):
    with pytest.raises(ConfigError, match=r"^w:"):
        get_method(name).Config(w=w)


def test_default_w_and_config_path(emoji_root):
    assert get_method("ema-merge").Config().w == 0.9
    with pytest.raises(ConfigError, match=r"method\.w"):
        experiment_from_dict({"name": "x", "data": {"root": str(emoji_root)},
                              "method": {"name": "zs-merge", "w": 1.0}})

# -- end to end through the runner ----------------------------------------------------------------


def test_zs_merge_resume_equals_uninterrupted(emoji_root, tmp_path):
    from vlcp.run import run_experiment

    cfg = tiny_experiment(emoji_root, "zs-merge", steps=8, w=0.5)
    full = run_experiment(cfg, tmp_path / "full")
    partial = run_experiment(cfg, tmp_path / "resumed", stop_after_task=0)
    assert len(partial["cumulative"]) == 1 and not (tmp_path / "resumed" / "results.json").exists()
    resumed = run_experiment(cfg, tmp_path / "resumed")
    assert strip(resumed) == strip(full)
    assert len(full["cumulative"]) == 3
    ckpt = torch.load(tmp_path / "full" / "checkpoint.pt", map_location="cpu", weights_only=True)
    model, merged = ckpt["model"], ckpt["method"]["merged"]
    assert model.keys() == merged.keys() and all(torch.equal(model[k], merged[k]) for k in model
                                                 if model[k].is_floating_point())   # evaluated = θ_t
    init = ckpt["method"]["init"]
    assert any(not torch.equal(model[k], init[k]) for k in model if model[k].is_floating_point())
