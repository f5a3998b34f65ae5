"""CLL-CLIP + TEIR: vocabulary growth, TEIR's scales and optimizer, the language stream, methods."""
import pickle

import numpy as np
import open_clip
import pandas as pd
import pytest
import torch

from conftest import cll_experiment
from vlcp.data.bpe import Vocab, train_bpe
from vlcp.data.languages import XM3600, captions, language_order
from vlcp.errors import ConfigError
from vlcp.models.clip import create_clip
from vlcp.models.token_embedding import CLLText, ExpandableEmbedding
from vlcp.report import cllclip as cl
from vlcp.run import run_experiment
from vlcp.train.optim import RowScaledAdamW, RowScaledSGD, teir_scales


@pytest.fixture(scope="module")
def clip_vocab():
    return Vocab.from_open_clip(open_clip.get_tokenizer("ViT-B-32"))


def test_vocab_matches_open_clip_and_grows_with_stable_ids(clip_vocab):
    tok = open_clip.get_tokenizer("ViT-B-32")
    texts = ["an emoji of grinning face: smile", "Hello, World! it's 3 cats", "猫の顔: ねこ"]
    ids, eot = clip_vocab.encode(texts, 24)
    assert torch.equal(ids, tok(texts, context_length=24))
    assert torch.equal(clip_vocab.encode(texts[::-1], 24)[0], ids.flip(0))     # again, from the vocab's memo
    long = ["a very long caption " * 4, "", "smile"]                           # truncated, empty, short
    assert torch.equal(clip_vocab.encode(long, 8)[0], tok(long, context_length=8))
    assert torch.equal(eot, (ids == clip_vocab.eot).int().argmax(1))
    vocab, merges = train_bpe(["ปุ่มกดเลข: สาม"] * 20 + ["หน้ายิ้ม: ยิ้ม"] * 20, 400)
    grown = clip_vocab.merge(vocab, merges)
    assert grown.tokens[: len(clip_vocab)] == clip_vocab.tokens and len(grown) > len(clip_vocab)
    assert grown.merges[: len(clip_vocab.merges)] == clip_vocab.merges
    new_ids, new_eot = grown.encode(["ปุ่มกดเลข"], 24)
    assert new_ids[0, new_eot[0]] == grown.eot and (new_ids[0, 1:new_eot[0]] >= len(clip_vocab)).any()
    assert torch.equal(grown.encode(texts[:1], 24)[0], ids[:1])      # English unchanged by the new merges
    assert grown.merge(vocab, merges).tokens == grown.tokens          # idempotent
    copy = pickle.loads(pickle.dumps(grown))                          # checkpoints pickle the vocab
    assert (copy.tokens, copy.merges, copy.sot, copy.eot) == (grown.tokens, grown.merges, grown.sot, grown.eot)
    assert torch.equal(copy.encode(["ปุ่มกดเลข"], 24)[0], new_ids)


def test_merged_vocabs_are_shared_by_the_runs_of_a_process(clip_vocab):
    """The runs of a study in one process merge the same (memoised) language vocabs into one base
    vocab: the same merge returns the same Vocab, with its tokenizer and ids already made; an equal
    copy of the added vocab is merged anew, to an equal Vocab."""
    vocab, merges = train_bpe(["hyvää huomenta: aurinko"] * 20 + ["kissan kasvot: kissa"] * 20, 400)
    grown = clip_vocab.merge(vocab, merges)
    ids = grown.encode(["kissan kasvot"], 24)[0]
    again = clip_vocab.merge(vocab, merges)
    assert again is grown and "kissan kasvot" in again._memo and torch.equal(again.encode(["kissan kasvot"], 24)[0], ids)
    other = clip_vocab.merge(dict(vocab), list(merges))
    assert other is not grown and (other.tokens, other.merges) == (grown.tokens, grown.merges)
    assert torch.equal(other.encode(["kissan kasvot"], 24)[0], ids)
    assert "_merged" not in pickle.loads(pickle.dumps(grown)).__dict__    # checkpoints carry no chain


def test_train_bpe_is_deterministic():
    """Equal pair counts are common in a small corpus; tokenizers broke their ties by ids given in
    hash-map order, so four trainings here gave four vocabs before train_bpe fixed the ids."""
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefgh"), rng.integers(2, 8))) for _ in range(400)]
    lines = [" ".join(rng.choice(words, 6)) for _ in range(1200)]
    first = train_bpe(lines, 600)
    assert all(train_bpe(lines, 600) == first for _ in range(3))
    assert {t for t in first[0] if t.endswith("</w>") and len(t) == 5} == {c + "</w>" for c in "abcdefgh"}


def test_teir_scales_hand_computed():
    used = torch.tensor([True, True, False, True, True])
    counts = torch.tensor([1.0, 3.0, 2.0, 0.0, 1.0])
    lam = teir_scales(used, counts, special=[4])
    assert lam.tolist() == pytest.approx([0.5, 0.25, 0.0, 1.0, 0.0])


def test_row_scaled_sgd_is_equation_5():
    w0 = torch.randn(3, 2)
    p = torch.nn.Parameter(w0.clone())
    g = torch.randn(3, 2)
    lam = torch.tensor([0.0, 0.5, 1.0])
    opt = RowScaledSGD([{"params": [p], "weight_decay": 0.0}], lr=0.1, row_param=p, row_decay=0.2, grad_scale=lam, decay_scale=lam)
    p.grad = g.clone()
    opt.step()
    expected = (1 - 0.1 * 0.2 * lam[:, None]) * w0 - 0.1 * lam[:, None] * g
    assert torch.allclose(p.detach(), expected)
    assert torch.equal(p.detach()[0], w0[0])                       # λ = 0: the row is untouched


def test_row_scaled_adamw_without_scales_is_adamw():
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(4, 3)), None
    b = torch.nn.Parameter(a.detach().clone())
    ref = torch.optim.AdamW([b], lr=0.1, weight_decay=0.3, eps=1e-6)
    ours = RowScaledAdamW([{"params": [a], "weight_decay": 0.0}], lr=0.1, eps=1e-6, row_param=a, row_decay=0.3)
    for _ in range(3):
        g = torch.randn(4, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("opt_cls,torch_cls,kw", [(RowScaledAdamW, torch.optim.AdamW, {"eps": 1e-6, "fused": True}),
                                                  (RowScaledSGD, torch.optim.SGD, {"fused": True})])
def test_row_scaled_steps_only_the_rows_that_move(opt_cls, torch_cls, kw):
    """With TEIR's λ (0 for most rows) the optimizer steps the live rows only; the table ends
    exactly where stepping every row (the scaled gradient and decay of eq. 5, then the torch
    optimizer on the whole table) puts it, and the frozen rows do not move."""
    torch.manual_seed(0)
    lam = torch.tensor([0.0, 0.5, 0.0, 1.0, 0.0, 0.25] * 20)
    a = torch.nn.Parameter(torch.randn(len(lam), 64))
    b, a0 = torch.nn.Parameter(a.detach().clone()), a.detach().clone()
    ours = opt_cls([{"params": [a], "weight_decay": 0.0}], lr=0.1, row_param=a, row_decay=0.3, grad_scale=lam,
                   decay_scale=lam, **kw)
    ref = torch_cls([b], lr=0.1, weight_decay=0.0, **kw)
    assert ours.live.tolist() == lam.nonzero().squeeze(1).tolist()
    for _ in range(4):
        g = torch.randn_like(a)
        a.grad, b.grad = g.clone(), g * lam[:, None]
        with torch.no_grad():
            b.mul_(1 - 0.1 * 0.3 * lam[:, None])
        ours.step()
        ref.step()
        ours.zero_grad()
        assert a.grad is None                         # the table is cleared though no group holds it
    assert torch.equal(a.detach(), b.detach())
    assert torch.equal(a.detach()[lam == 0], a0[lam == 0]) and not torch.equal(a.detach(), a0)


def test_expandable_embedding_keeps_rows():
    e = ExpandableEmbedding(torch.randn(5, 4))
    old = e.weight.detach().clone()
    e.expand(1000, mean=0.3, std=0.1, generator=torch.Generator().manual_seed(0))
    assert e.weight.shape == (1005, 4) and torch.equal(e.weight[:5].detach(), old)
    assert e.weight[5:].mean().item() == pytest.approx(0.3, abs=0.01) and e.weight[5:].std().item() == pytest.approx(0.1, abs=0.01)


def test_text_tower_on_longest_padding_equals_context_padding(clip_vocab):
    """CLLText pads a batch to its longest caption; the causal tower pools at EOT, so the features
    equal those of open_clip's full-context padding, for the plain tower and with prefixes."""
    torch.manual_seed(0)
    clip, _ = create_clip("vlcp-tiny")
    model = CLLText(clip, clip_vocab).eval()
    texts = ["an emoji of grinning face: smile", "a cat", "猫の顔: ねこ and a very long caption of many words"]
    tokens, eot = model.encode(texts)
    full, _ = clip_vocab.encode(texts, model.context_length)
    assert tokens.shape[1] == int(eot.max()) + 1 < model.context_length
    assert torch.equal(full[:, : tokens.shape[1]], tokens) and not full[:, tokens.shape[1]:].any()
    prefixes = [torch.randn(1, 3, model.width)] * model.layers
    with torch.no_grad():
        for kw in ({}, {"prefixes": prefixes}):
            torch.testing.assert_close(model(tokens, eot, **kw), model(full, eot, **kw), atol=1e-5, rtol=1e-5)


def test_eval_length_buckets_equal_one_padded_batch(clip_vocab):
    """In eval mode CLLText runs a large batch in length buckets; the features (row order kept)
    equal the whole batch's, with shared and with per-row prefixes and adapters."""
    torch.manual_seed(0)
    clip, _ = create_clip("vlcp-tiny")
    model = CLLText(clip, clip_vocab).eval()
    words = "a cat dog grinning face smile very long caption of many words".split()
    texts = [" ".join(words[: 1 + i % len(words)] * (1 + i % 3)) for i in range(300)]
    tokens, eot = model.encode(texts)
    assert len(set(eot.tolist())) > 4
    adapters = [torch.nn.Linear(model.width, model.width)] * model.layers
    with torch.no_grad():
        for kw in ({}, {"prefixes": [torch.randn(1, 3, model.width)] * model.layers},
                   {"prefixes": [torch.randn(len(texts), 3, model.width)] * model.layers}, {"adapters": adapters}):
            whole = model.train()(tokens, eot, **kw)   # training mode: one padded batch
            torch.testing.assert_close(model.eval()(tokens, eot, **kw), whole, atol=1e-5, rtol=1e-5)


def test_language_order_and_captions():
    order = language_order(seed=0)
    assert order[0] == "en" and sorted(order) == sorted(XM3600) and len(order) == 36
    assert order == language_order(seed=0) and order != language_order(seed=1)
    with pytest.raises(ConfigError, match="data.languages: unknown language 'xx'"):
        language_order(["en", "xx"])
    caps = captions("Hund", ("Tier", "Hund", "Haustier"), np.random.default_rng(0))
    assert caps[0] == "Hund: Tier, Haustier" and caps[1] == "Hund" and len(caps) == 4


def test_ar_and_forgetting_hand_computed():
    nan = None
    r = {"matrix": {"in_domain": {"IR@1": [[10, nan, nan], [6, 20, nan], [4, 12, 30]]}}}
    a = cl.accuracy_matrix(r, "in_domain", "IR@1")
    assert cl.ar(a) == pytest.approx((4 + 12 + 30) / 3)
    assert cl.forgetting(a) == pytest.approx(((10 - 4) + (20 - 12)) / 2)
    assert cl.ar_curve(a).tolist() == pytest.approx([10, 13, 46 / 3])


def test_table2_layout_hand_computed():
    nan = None

    def run(last, dagger=False):   # in-domain only (I2T = T2I); out-of-domain left out
        m = [[10, nan, nan], [6, 20, nan], last]
        return {"needs_task_id": dagger, "matrix": {"in_domain": {"IR@1": m, "TR@1": m}}}
    runs = {"x-clip": run([4, 12, 30]), "x-clip-teir": run([8, 16, 30]), "x-joint": run([1, 2, 3]),
            "x-mla": run([4, 12, 30], True), "x-mla-teir": run([4, 12, 33], True)}
    t = cl.table2(runs, ["clip", "mla"], prefix="x")
    assert t.index.tolist() == [("clip", "plain"), ("clip", "with TEIR"), ("clip", "Δ (TEIR − plain)"), ("mla †", "plain"),
                                ("mla †", "with TEIR"), ("mla †", "Δ (TEIR − plain)"), ("joint", "")]
    assert t.loc[("clip", "Δ (TEIR − plain)"), ("in", "T2I", "AR")] == pytest.approx((8 + 16 - 4 - 12) / 3)
    assert t.loc[("clip", "Δ (TEIR − plain)"), ("in", "T2I", "F")] == pytest.approx((2 + 4) / 2 - (6 + 8) / 2)
    assert t.loc[("mla †", "Δ (TEIR − plain)"), ("in", "T2I", "AR")] == pytest.approx(1.0)
    assert t.loc[("joint", ""), ("in", "I2T", "AR")] == pytest.approx(2.0)


def test_table2_over_seeds_shows_mean_and_std_with_the_delta_paired_by_seed():
    nan = None

    def run(last, dagger=False, loss=0.5):   # in-domain only (I2T = T2I)
        m = [[10, nan, nan], [6, 20, nan], last]
        return {"needs_task_id": dagger, "matrix": {"in_domain": {"IR@1": m, "TR@1": m}},
                "convergence": {"loss": loss, "fisher_trace": 100 * loss}}
    def joint(row):   # one task: no F
        return {"needs_task_id": False, "matrix": {"in_domain": {"IR@1": [row], "TR@1": [row]}}}
    # AR of plain: 10, 20 (seeds 0, 1); with TEIR: 13, 21, so Δ per seed 3, 1: mean 2, std √2
    runs = {"x-clip": [run([4, 12, 14]), run([4, 12, 44])], "x-clip-teir": [run([4, 12, 23]), run([4, 12, 47])],
            "x-joint": [joint([1, 2, 3]), joint([3, 4, 5])]}
    t = cl.table2(runs, ["clip"], prefix="x")
    assert t.loc[("clip", "plain"), ("in", "T2I", "AR")] == "15.0 ± 7.1"
    assert t.loc[("clip", "Δ (TEIR − plain)"), ("in", "T2I", "AR")] == "2.0 ± 1.4"   # paired: not 15.0 − 17.0's spread
    assert pd.isna(t.loc[("joint", ""), ("in", "T2I", "F")])                         # joint has no F at any seed
    assert t.loc[("joint", ""), ("in", "I2T", "AR")] == "3.0 ± 1.4"
    assert cl.rounded(t) is t                                                       # strings stay as they are
    one = cl.table2({e: rs[0] for e, rs in runs.items()}, ["clip"], prefix="x")    # one run each: floats, as before
    assert cl.rounded(one).loc[("clip", "plain"), ("in", "T2I", "AR")] == pytest.approx(10.0)
    assert cl.cell_mean_sd(runs["x-clip"], ("in", "T2I", "AR")) == pytest.approx((15.0, np.sqrt(2) * 5 / 1))
    with pytest.raises(ValueError, match="x-clip has 2 runs and its -teir 1"):
        cl.table2({**runs, "x-clip-teir": runs["x-clip-teir"][:1]}, ["clip"], prefix="x")
    conv = cl.convergence_over({"(1)": [run([1, 2, 3], loss=0.52), run([1, 2, 3], loss=0.54)], "(6)": [run([1, 2, 3], loss=0.5)]})
    assert conv.loc["(1)", "loss"] == "0.53 ± 0.014" and conv.loc["(6)", "fisher_trace"] == "50"


def test_language_stream_end_to_end_with_teir(emoji_root, tmp_path):
    r = run_experiment(cll_experiment(emoji_root, "cllclip", teir=True), tmp_path)
    assert r["languages"] == ["en", "de", "ja"] and len(r["train"]) == 3
    m = r["matrix"]["in_domain"]["IR@1"]
    assert m[0][1] is None and m[0][0] is not None and all(v is not None for v in m[-1])
    assert r["vocab_sizes"][0] < r["vocab_sizes"][1] < r["vocab_sizes"][2]
    assert set(r["train"][0]["terms"]) == {"cm", "cl"} and r["convergence"]["fisher_trace"] > 0
    assert "out_domain" in r["matrix"] and len(r["zero_shot"]["in_domain"]["IR@1"]) == 3


def test_a_frozen_module_keeps_no_gradient_into_the_next_task(emoji_root, tmp_path):
    """MLA's adapter of the last language is frozen at the next task's start; a gradient left on it
    counted in the clip norm (and was scaled by it every step). With FLOPs counted only at the last
    task (`train.flops_every`: the step count's zero_grad had hidden it) the run is the same run."""
    from dataclasses import replace

    strip = lambda r: {k: v for k, v in r.items() if k not in ("train", "wall_seconds", "attempt_seconds", "run_seconds", "config", "config_hash")}  # noqa: E731
    cfg = cll_experiment(emoji_root, "cll-mla", steps=9)
    cfg = replace(cfg, train=replace(cfg.train, grad_clip=0.01))   # every step clipped
    every = run_experiment(cfg, tmp_path / "a")
    last = run_experiment(replace(cfg, train=replace(cfg.train, flops_every=3)), tmp_path / "b")
    assert [t["flops_per_step"] is None for t in last["train"]] == [True, True, False]
    assert strip(last) == strip(every)


def test_teir_keeps_unused_rows_intact(emoji_root, tmp_path):
    """With TEIR (λ = 0 for tokens no task uses) CLIP's unused vocabulary rows end exactly at
    their initial values; plain AdamW's weight decay shrinks every row (CLFM's forgetting channel)."""
    from vlcp.models.clip import create_clip
    from vlcp.utils import derive_seed, seed_everything

    seed_everything(derive_seed(0, "init"))            # the runner's init of the base model
    init = create_clip("vlcp-tiny")[0].token_embedding.weight.detach()
    final = {}
    for tag, args in (("teir", {"teir": True}), ("plain", {})):
        run_experiment(cll_experiment(emoji_root, "cllclip", **args), tmp_path / tag, tmp_path / tag)
        model = torch.load(tmp_path / tag / "checkpoint.pt", weights_only=True)["model"]   # a state dict
        final[tag] = model["embedding.weight"][: len(init)]
    same = lambda w: (w == init).all(1).float().mean().item()  # noqa: E731
    assert same(final["teir"]) > 0.9 and same(final["plain"]) < 0.01


@pytest.mark.parametrize("method,args", [("cll-er", {"buffer_size": 30}), ("cll-der", {"buffer_size": 30}),
                                         ("cll-oewc", {"fisher_batches": 2}), ("cll-mla", {}), ("cll-ptuning", {}),
                                         ("cll-lora", {}), ("cll-dualprompt", {}), ("cll-codaprompt", {}), ("cll-joint", {})])
def test_every_language_method_runs(emoji_root, tmp_path, method, args):
    r = run_experiment(cll_experiment(emoji_root, method, steps=6, teir=True, **args), tmp_path)
    assert all(np.isfinite(t["loss"]) for t in r["train"])
    if r["needs_task_id"]:
        assert "in_domain_no_id" in r["matrix"]
    if method == "cll-oewc":
        assert "ewc" in r["train"][-1]["terms"]
    if method == "cll-joint":
        assert len(r["train"]) == 1


def test_per_language_modules_get_gradients(emoji_root, tmp_path):
    for method in ("cll-lora", "cll-mla", "cll-ptuning"):
        run_experiment(cll_experiment(emoji_root, method, steps=6), tmp_path / method, tmp_path / method)
        model = torch.load(tmp_path / method / "checkpoint.pt", weights_only=True)["model"]   # a state dict
        named = {n: p for n, p in model.items() if "lang_ja" in n}
        assert named, method
        moved = [n for n, p in named.items() if p.detach().abs().sum() > 0 and ("lora_B" in n or "up" in n or "ptuning" in n)]
        assert moved, f"{method}: the latest language's modules did not train"


def test_language_resume_equals_uninterrupted(emoji_root, tmp_path, monkeypatch):
    """...and resumes with the run's own vocabs (checkpointed: not trained again), and a second
    run with the same seed repeats the first exactly (its vocabs are trained again: train_bpe
    must be deterministic)."""
    import vlcp.run.streams.language as rl

    cfg = cll_experiment(emoji_root, "cll-er", buffer_size=30, teir=True)
    full = run_experiment(cfg, tmp_path / "a")
    run_experiment(cfg, tmp_path / "b", stop_after_task=0)

    def retrain(*a, **k):
        raise AssertionError("the vocabs were trained again on resume")
    rl.stream_vocabs.cache_clear()                 # as a new process would: nothing memoised
    monkeypatch.setattr(rl, "train_vocabs", retrain)
    resumed = run_experiment(cfg, tmp_path / "b")
    strip = lambda r: {k: v for k, v in r.items() if k not in ("train", "wall_seconds", "attempt_seconds", "run_seconds")}  # noqa: E731
    assert strip(resumed) == strip(full)
    monkeypatch.undo()
    rl.stream_vocabs.cache_clear()
    assert strip(run_experiment(cfg, tmp_path / "c")) == strip(full)


def test_runs_in_one_process_share_their_inputs(emoji_root, tmp_path):
    """A study's runs in one process load the corpus, encode the teacher features and train the
    vocabs and evaluate the base CLIP's zero-shot row once (memoised by data config and base model):
    a run that finds them memoised, after another method's run, equals the same run in a fresh
    process; another data config loads anew."""
    import vlcp.run.streams.language as rl

    rl.stream_inputs.cache_clear()
    rl.stream_vocabs.cache_clear()
    rl.zero_shot.cache_clear()
    strip = lambda r: {k: v for k, v in r.items() if k not in ("train", "wall_seconds", "attempt_seconds", "run_seconds")}  # noqa: E731
    fresh = run_experiment(cll_experiment(emoji_root, "cll-mla", steps=6), tmp_path / "a")
    run_experiment(cll_experiment(emoji_root, "cllclip", steps=6, teir=True), tmp_path / "b")
    again = run_experiment(cll_experiment(emoji_root, "cll-mla", steps=6), tmp_path / "c")
    assert strip(again) == strip(fresh)
    assert (rl.stream_inputs.cache_info().misses, rl.stream_vocabs.cache_info().misses) == (1, 1)
    assert rl.zero_shot.cache_info().misses == 1
    other = cll_experiment(emoji_root, "cllclip", steps=6)
    other.data.languages = ["en", "de"]
    assert run_experiment(other, tmp_path / "d")["languages"] == ["en", "de"]
    assert rl.stream_inputs.cache_info().misses == 2


def test_convergence_fisher_trace_is_the_mean_per_pair_squared_gradient(monkeypatch):
    """CLL-CLIP Fig. 3: the trace of the empirical Fisher over training pairs, mean_i ‖∇ℓ_i‖², not
    the squared norm of the batch-mean gradient ‖mean_i ∇ℓ_i‖² (smaller unless every pair's gradient
    is the same). A one-parameter-vector model whose pair loss is (x_i · w)², gradient 2 (x_i · w) x_i."""
    from types import SimpleNamespace

    from vlcp.run.streams import language

    x = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, -1.0]])
    model = torch.nn.Module()
    model.w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    monkeypatch.setattr(language.CLLCLIP, "sample_losses", lambda self, m, batch, ctx: (batch @ m.w) ** 2)
    ctx = SimpleNamespace(pool=torch.arange(4), materialize=lambda ids, gen: x[ids])
    out = language.convergence(model, None, ctx, batches=1, batch_size=4, per_batch=4)
    ids = torch.randint(0, 4, (4,), generator=torch.Generator().manual_seed(0))    # the pass's seeded sample
    z = x[ids] @ model.w.detach()
    grads = 2 * z[:, None] * x[ids]
    assert out["fisher_trace"] == pytest.approx(float((grads ** 2).sum(1).mean()))
    assert out["loss"] == pytest.approx(float((z ** 2).mean()))
    assert out["fisher_trace"] > float((grads.mean(0) ** 2).sum())              # not the batch-mean gradient's
    assert out["fisher_pairs"] == 4
    assert language.convergence(model, None, ctx, batches=1, batch_size=4, per_batch=2)["fisher_pairs"] == 2
