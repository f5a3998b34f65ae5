"""The rules of a run under torchrun (issue #77): each rank's own dropout (`seed_rank`), the
contrastive gather without torch's deprecated all_gather, the process group's timeout, and
evaluation at the training precision (bf16 autocast for the encoders, fp32 scores, TF32 only on
CUDA). The 2-process cases run in one gloo spawn (module fixture) on the CPU."""
import dataclasses
import datetime
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vlcp.utils import derive_seed, seed_everything

SEED = 5
CAPTIONS = [f"caption {i} variant {k}" for i in range(8) for k in range(2)]


def albef_features(dropout: float) -> torch.Tensor:
    """A tiny ALBEF's text features of a fixed batch in training mode, built and seeded as
    `vlcp.run.loop.run_stream` does (init seed, then `seed_rank` before the task trains)."""
    from vlcp.models.albef import PRESETS, create_albef
    from vlcp.train.distributed import seed_rank, wrap_ddp

    PRESETS["albef-tiny-dropout"] = dataclasses.replace(PRESETS["albef-tiny"], dropout=dropout)
    seed_everything(derive_seed(SEED, "init"))
    model, tok = create_albef("albef-tiny-dropout", corpus=CAPTIONS)
    if dist.is_initialized():
        model = wrap_ddp(model)
    seed_rank(SEED, 0)
    images = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(images, tok(CAPTIONS[:4])).text_features


def gathered_gradients(rank: int) -> dict:
    """The gradient of a loss over the gathered features through vlcp's gather and through
    torch.distributed.nn's (the old path), and the warnings vlcp's gather emitted."""
    import torch.distributed.nn

    from vlcp.losses.contrastive import gather_features

    weight = torch.arange(12.0).view(4, 3)
    out = {}
    for name in ("new", "old"):
        x = (torch.arange(6.0).view(2, 3) + rank).requires_grad_()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = gather_features(x) if name == "new" else torch.cat(torch.distributed.nn.all_gather(x))
            (y * weight).sum().backward()
        out[name], out[f"{name}_values"] = x.grad, y.detach()
        if name == "new":
            out["warnings"] = [str(w.message) for w in caught]
    return out


def worker(rank, world, init_file, box):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        box[rank] = {"dropout": albef_features(0.1), "dropout_again": albef_features(0.1),
                     "no_dropout": albef_features(0.0), "gather": gathered_gradients(rank)}
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """What each rank of one 2-process gloo run computed ({rank: {...}})."""
    with mp.Manager() as manager:
        box = manager.dict()
        mp.spawn(worker, args=(2, str(tmp_path_factory.mktemp("ddp") / "init"), box), nprocs=2, join=True)
        return dict(box)


@pytest.mark.slow
def test_ranks_draw_their_own_dropout_and_a_run_reproduces_itself(two_ranks):
    """dropout > 0: the ranks' masks differ (they used to be the same on every rank), rank 0's are
    one process's, and the same seed gives the same features again; dropout 0: every rank equals one
    process (to float rounding)."""
    torch.set_num_threads(1)
    r0, r1 = two_ranks[0], two_ranks[1]
    assert not torch.allclose(r0["dropout"], r1["dropout"])
    torch.testing.assert_close(r0["dropout"], albef_features(0.1))
    for r in (r0, r1):
        assert torch.equal(r["dropout"], r["dropout_again"])
    single = albef_features(0.0)
    for r in (r0, r1):
        torch.testing.assert_close(r["no_dropout"], single)


@pytest.mark.slow
def test_contrastive_gather_keeps_the_gradient_without_a_deprecation_warning(two_ranks):
    for rank, r in two_ranks.items():
        g = r["gather"]
        assert torch.equal(g["new_values"], g["old_values"])
        assert torch.equal(g["new"], g["old"])   # the gathered rows' gradients summed over ranks
        assert torch.equal(g["new"], 2 * torch.arange(12.0).view(4, 3)[2 * rank:2 * rank + 2])
        assert not [w for w in g["warnings"] if "deprecated" in w], g["warnings"]


def test_the_process_group_waits_train_ddp_timeout_minutes(emoji_root, tmp_path, monkeypatch):
    """Under torchrun the run joins its process group with `train.ddp_timeout_minutes`, not
    NCCL's 10-minute default that rank 0's evaluation outlasts."""
    from conftest import tiny_experiment

    from vlcp.run import run_experiment

    seen = {}

    class Joined(Exception):
        pass

    def init_process_group(backend, **kwargs):
        seen.update(backend=backend, **kwargs)
        raise Joined

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    cfg = tiny_experiment(emoji_root, steps=1)
    cfg.train.ddp_timeout_minutes = 7
    with pytest.raises(Joined):
        run_experiment(cfg, tmp_path)
    assert seen == {"backend": "gloo", "timeout": datetime.timedelta(minutes=7)}


def encoder_calls(monkeypatch) -> list:
    """Records, for each call of a CLIP encoder outside autograd (evaluation's), the dtype
    CPU autocast runs it at (None: autocast off)."""
    from open_clip.model import CLIP

    calls = []
    for name in ("encode_image", "encode_text"):
        def wrapped(self, *a, _f=getattr(CLIP, name), **k):
            if not torch.is_grad_enabled():
                calls.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
            return _f(self, *a, **k)
        monkeypatch.setattr(CLIP, name, wrapped)
    return calls


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_evaluation_encodes_at_the_training_precision(precision, emoji_root, tmp_path, monkeypatch):
    """bf16 runs encode the evaluation sets under the training's bf16 autocast, fp32 runs
    without autocast; neither touches TF32 or cudnn.benchmark on the CPU."""
    from conftest import tiny_experiment

    from vlcp.run import run_experiment

    flags = lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,  # noqa: E731
                     torch.backends.cudnn.benchmark)
    before = flags()
    calls = encoder_calls(monkeypatch)
    cfg = tiny_experiment(emoji_root, steps=3)
    cfg.train.precision = precision
    r = run_experiment(cfg, tmp_path)
    assert calls and set(calls) == {torch.bfloat16 if precision == "bf16" else None}
    assert r["matrix"] and flags() == before


def test_scores_stay_fp32_under_evaluation_autocast():
    """Retrieval and zero-shot scores are computed in fp32 from fp32 features inside a bf16
    autocast: near matches keep their order (bf16 scores tie them, and ties count against the query)."""
    from vlcp.eval.retrieval import cross_modal
    from vlcp.eval.zeroshot import topk_accuracy

    g = torch.Generator().manual_seed(0)
    base = torch.nn.functional.normalize(torch.randn(1, 64, generator=g), dim=-1)
    feats = torch.nn.functional.normalize(base + 1e-3 * torch.randn(40, 64, generator=g), dim=-1)
    labels = torch.arange(40)
    plain = cross_modal(feats, feats, labels, labels), topk_accuracy(feats, feats.T, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (cross_modal(feats, feats, labels, labels), topk_accuracy(feats, feats.T, labels)) == plain
    assert plain[1][1] == 100.0
