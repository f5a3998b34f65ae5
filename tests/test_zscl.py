"""ZSCL (vlcp/methods/zscl.py): its distillation loss and weight-ensemble update against a port of the
original code (Thunderbeee/ZSCL, mtil/src/models/helpers.py and finetune.py), and a short run through
the loop on the concept stream."""
import copy

import pytest
import torch
import torch.nn.functional as F

from vlcp.config import experiment_from_dict
from vlcp.methods.zscl import ZSCL, we_update, zscl_terms
from vlcp.train.context import TaskContext


# --- a port of the original (helpers.py `distillation`, `merge_we`; finetune.py's ZSCL block) ---
def distillation(t, s, T=2):
    p = F.softmax(t / T, dim=1)
    loss = F.cross_entropy(s / T, p, reduction="mean") * (T ** 2)
    return loss


def merge_we(model_0, model_1, sma_count):
    for param_q, param_k in zip(model_0.parameters(), model_1.parameters()):
        param_k.data = (param_k.data * sma_count + param_q.data) / (1.0 + sma_count)
    return model_1


def original_zscl_loss(ref_out_current, ref_embeddings_current, ref_out, ref_embeddings, logit_scale, T):
    """finetune.py's `--image_loss --text_loss` terms (with the current text features in the student's logits, as
    the paper; the code puts θ0's `ref_embeddings` there)."""
    logits_current = logit_scale * ref_out_current @ ref_embeddings_current.t()
    logits_ref = logit_scale * ref_out @ ref_embeddings.t()
    return distillation(logits_ref, logits_current, T=T), distillation(logits_ref.t(), logits_current.t(), T=T)


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("T", [1.0, 2.0, 0.5])
def test_distillation_terms_match_the_original(T):
    g = torch.Generator().manual_seed(0)
    img, txt, ref_img, ref_txt = (unit(torch.randn(n, 16, generator=g)) for n in (12, 30, 12, 30))
    scale = torch.tensor(100.0)
    ours = zscl_terms(img, txt, scale, ref_img, ref_txt, scale, T)
    image, text = original_zscl_loss(img, txt, ref_img, ref_txt, scale, T)
    assert ours["zscl_image"].item() == pytest.approx(image.item(), rel=1e-5)
    assert ours["zscl_text"].item() == pytest.approx(text.item(), rel=1e-5)
    same = zscl_terms(ref_img, ref_txt, scale, ref_img, ref_txt, scale, T)   # the student is θ0: only the entropy
    logits = scale * ref_img @ ref_txt.T / T
    entropy = -(F.softmax(logits, 1) * F.log_softmax(logits, 1)).sum(1).mean()
    assert same["zscl_image"].item() == pytest.approx((entropy * T ** 2).item(), rel=1e-5)


def test_weight_ensemble_update_matches_merge_we():
    g = torch.Generator().manual_seed(1)
    net, avg_ref = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    avg = {k: p.detach().clone() for k, p in avg_ref.named_parameters()}
    for n in range(1, 5):
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
        merge_we(net, avg_ref, n)
        we_update(avg, dict(net.named_parameters()), n)
        assert all(torch.allclose(avg[k], p) for k, p in avg_ref.named_parameters())


class Tiny(torch.nn.Module):
    """A stand-in CLIP: linear towers on flat inputs (encode_image / encode_text / logit_scale)."""

    def __init__(self):
        super().__init__()
        self.visual, self.text = torch.nn.Linear(6, 8), torch.nn.Embedding(20, 8)
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))

    def encode_image(self, x, normalize=False):
        f = self.visual(x)
        return unit(f) if normalize else f

    def encode_text(self, t, normalize=False):
        f = self.text(t).mean(1)
        return unit(f) if normalize else f


def test_the_hooks_average_the_weights_every_interval_as_the_original_loop(monkeypatch):
    """Through the hooks: the model after the task is the original loop's WE model (its starting weights
    and the weights after steps 0, I, 2I, ..., each once), and the distillation terms are in the loss."""
    from vlcp.methods import zscl
    from vlcp.train.context import Batch

    monkeypatch.setattr(zscl, "base_terms", lambda model, batch: {})   # the stand-in has no CLIP forward
    g = torch.Generator().manual_seed(2)
    images, tokens = torch.randn(40, 6, generator=g), torch.randint(0, 20, (40, 5), generator=g)
    plain = lambda ids: Batch(images[ids], tokens[ids], ids)  # noqa: E731
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[torch.arange(40)], pool=torch.arange(40),
                      materialize=plain, generator=g, materialize_plain=plain, reference=torch.arange(20))
    model = Tiny()
    method = ZSCL(ZSCL.Config(we_interval=3, ref_batch_size=8, ref_texts=10), seed=0)
    method.before_task(model, ctx)
    we_model, we_n = copy.deepcopy(model), 0        # the original: we_model = deepcopy(model) at the start
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(8):
        ctx.step = step
        terms = method.loss(model, None, ctx)
        assert {"zscl_image", "zscl_text"} <= set(terms)
        loss = terms["zscl_image"] + terms["zscl_text"] + (model.visual.weight ** 2).sum()   # something to move
        opt.zero_grad()
        loss.backward()
        opt.step()
        method.after_step(model, None, ctx)
        if step % 3 == 0:
            we_n += 1
            merge_we(model, we_model, we_n)
    method.after_task(model, ctx)
    assert all(torch.allclose(p, q) for p, q in zip(model.parameters(), we_model.parameters()))


def test_a_resumed_method_rebuilds_its_teacher_from_the_saved_theta0():
    g = torch.Generator().manual_seed(3)
    from vlcp.train.context import Batch
    images, tokens = torch.randn(20, 6, generator=g), torch.randint(0, 20, (20, 5), generator=g)
    plain = lambda ids: Batch(images[ids], tokens[ids], ids)  # noqa: E731
    ctx = TaskContext(task=0, num_tasks=2, train_set=None, task_ids=[torch.arange(20)] * 2, pool=torch.arange(20),
                      materialize=plain, generator=g, materialize_plain=plain, reference=torch.arange(20))
    model = Tiny()
    first = ZSCL(ZSCL.Config(ref_texts=5), seed=0)
    first.before_task(model, ctx)
    theta0 = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.visual.weight.add_(1.0)
    again = ZSCL(ZSCL.Config(ref_texts=5), seed=0)
    again.load_state_dict(first.state_dict())
    ctx.task = 1
    again.before_task(model, ctx)
    assert all(torch.equal(again.teacher.state_dict()[k], v) for k, v in theta0.items())
    assert torch.equal(again.ref_tokens, first.ref_tokens)


def test_zscl_needs_a_reference_set(tmp_path, emoji_root):
    from vlcp.errors import ConfigError
    from vlcp.run.requirements import check_config

    cfg = experiment_from_dict({"name": "zscl-group", "seed": 0, "model": {"name": "vlcp-tiny"},
                                "method": {"name": "zscl"}, "train": {"steps": 2, "device": "cpu"},
                                "data": {"root": str(emoji_root), "tasks": ["Smileys & Emotion", "Flags"]}})
    with pytest.raises(ConfigError, match="needs a reference set of pairs the pretrained model saw.*it runs on: concepts"):
        check_config(cfg)


def concept_run(emoji_root, steps_per_task: int, **method):
    """A two-task ZSCL run on the concept stream at the tiny model, small enough for a test."""
    return experiment_from_dict({
        "name": "fomo-zscl", "seed": 0, "data": {"root": str(emoji_root), "stream": "concepts"},
        "model": {"name": "vlcp-tiny"}, "method": {"name": "zscl", **method},
        "fomo": {"num_tasks": 2, "steps_per_task": steps_per_task},
        "train": {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "pass_flops_seeds": []},
        "eval": {"batch_size": 256}})


def test_a_short_run_on_the_concept_stream(emoji_root, tmp_path):
    from vlcp.run import run_experiment

    cfg = concept_run(emoji_root, ref_batch_size=16, ref_texts=32, we_interval=1, steps_per_task=3)
    r = run_experiment(cfg, tmp_path)
    assert len(r["train"]) == 2 and all(t["steps"] >= 1 for t in r["train"])
    assert all({"clip", "zscl_image", "zscl_text"} <= set(t["terms"]) for t in r["train"])
    assert all(torch.isfinite(torch.tensor(v)) for t in r["train"] for v in t["terms"].values())
    # the step pays for the reference passes: fewer steps than full fine-tuning under the MAFs budget
    assert r["budget"]["method"]["flops"] > r["budget"]["full_ft"]["flops"]
    assert len(r["trajectory"]) == 2 and all(0 <= row["GM"] <= 100 for row in r["trajectory"])


def test_a_resumed_run_equals_an_uninterrupted_one(emoji_root, tmp_path):
    """θ0 travels in the checkpoint (the method's state): stopping after task 1 and resuming gives the
    uninterrupted run's trajectory."""
    from vlcp.run import run_experiment

    cfg = concept_run(emoji_root, ref_batch_size=8, ref_texts=16, we_interval=2, steps_per_task=4)
    whole = run_experiment(cfg, tmp_path / "whole")
    run_experiment(cfg, tmp_path / "parts", stop_after_task=0)
    resumed = run_experiment(cfg, tmp_path / "parts")
    assert [row["GM"] for row in resumed["trajectory"]] == [row["GM"] for row in whole["trajectory"]]
