"""Evaluation reuses features only where they provably hold, and then scores the same: a
`Snapshot` tells an unchanged model (bit for bit) from a trained one; the group stream's starting
round encodes only the sets its matrix reads; `final_pools` reuses the last task's round for an
unchanged model and encodes again for a changed one; FoMo's sets with the same classes share a
classifier, and a frozen text tower's prompts and captions are encoded once across rounds."""
import copy

import pytest
import torch

from vlcp.config import EvalCfg
from vlcp.data.fomo import EvalSet
from vlcp.data.pairs import PairSet
from vlcp.eval import fomo
from vlcp.eval.encode import MemoTokenizer, Snapshot
from vlcp.eval.evaluate import Evaluator
from vlcp.models.adapters import freeze_all_but, image_tower_names
from vlcp.models.clip import create_clip

WORDS = "grinning face cat heart red blue star moon flag house tree dog".split()
CLASSES = ["cat", "dog", "star", "moon"]


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny", image_size=32)
    return model, tok


def counted(model) -> dict:
    """Rows through each tower, counted on the model instance."""
    rows = {"image": 0, "text": 0}
    enc_image, enc_text = type(model).encode_image, type(model).encode_text

    def image(x, normalize=False):
        rows["image"] += len(x)
        return enc_image(model, x, normalize=normalize)

    def text(t, normalize=False):
        rows["text"] += len(t)
        return enc_text(model, t, normalize=normalize)

    model.encode_image, model.encode_text = image, text
    return rows


def pairs(n: int, tasks: int, seed: int) -> PairSet:
    """`n` items with one or two images each, item i in task i % tasks and class i % 4."""
    g = torch.Generator().manual_seed(seed)
    image_text = torch.cat([torch.arange(n), torch.arange(0, n, 2)])
    texts = [f"{CLASSES[i % 4]} {' '.join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3))} {seed}-{i}"
             for i in range(n)]
    return PairSet(torch.randint(0, 256, (len(image_text), 32, 32, 3), generator=g, dtype=torch.uint8), image_text,
                   texts, [[t] for t in texts], torch.arange(n) % 4, torch.arange(n) % tasks, torch.arange(n))


def evaluator(tasks: int = 3) -> Evaluator:
    sets = {"test": pairs(24, tasks, 1), "unseen_style": pairs(18, tasks, 2)}
    return Evaluator(sets, pairs(12, tasks, 3), pairs(30, tasks, 4), CLASSES, tasks, EvalCfg(batch_size=16))


def fused_step(model, names=None) -> None:
    """One fused AdamW step (its writes do not advance the parameters' version counters)."""
    params = [p for n, p in model.named_parameters() if names is None or n in names]
    opt = torch.optim.AdamW(params, lr=1e-2, fused=True)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    for p in params:
        p.grad = None


def test_snapshot_tells_a_fused_adamw_step_and_a_replaced_module(clip):
    m = copy.deepcopy(clip[0])
    snap, text_only = Snapshot(m), Snapshot(m, skip=("visual.",))
    assert snap.matches(m) and text_only.matches(m)
    assert Snapshot(copy.deepcopy(m)).matches(m)               # the same bits in another model
    fused_step(m, image_tower_names(m))
    assert not snap.matches(m) and text_only.matches(m)        # the image tower moved, the text tower did not
    fused_step(m)
    assert not text_only.matches(m)
    snap = Snapshot(m)
    m.ln_final = torch.nn.LayerNorm(m.ln_final.normalized_shape)   # same names and shapes, other values and object
    assert not snap.matches(m)
    snap = Snapshot(m)
    m.text_pool_type = "last"                                        # no tensor changed, the forward did
    assert not snap.matches(m)


def test_starting_point_is_evaluated_once_per_model_state_and_key(clip):
    """The runs of one process that start from the same model (another object, the same bits) share
    its first evaluation, a copy each; a model one step away, or other inputs (`key`), evaluate."""
    from vlcp.eval.memo import starting_point
    calls = []

    def evaluate(m):
        calls.append(m)
        return {"score": float(m.text_projection.detach().sum())}

    a, b = copy.deepcopy(clip[0]), copy.deepcopy(clip[0])
    first = starting_point("k", a, lambda: evaluate(a))
    again = starting_point("k", b, lambda: evaluate(b))
    assert again == first and again is not first and calls == [a]
    fused_step(b)                                                # a prepared variant: evaluated, and kept beside θ0
    moved = starting_point("k", b, lambda: evaluate(b))
    assert calls == [a, b] and moved != first
    assert starting_point("k", copy.deepcopy(a), lambda: evaluate(a)) == first and len(calls) == 2
    assert starting_point("other inputs", a, lambda: evaluate(a)) == first and len(calls) == 3


def test_starting_round_encodes_only_what_its_matrix_reads(clip):
    model, tok = copy.deepcopy(clip[0]), MemoTokenizer(clip[1])
    ev = evaluator()
    full = ev(model, tok, "cpu", 0)
    rows = counted(model)
    matrix = ev.zero_shot(model, tok, "cpu")
    assert matrix == full["matrix"]
    assert rows["image"] == len(ev.sets["test"]) + len(ev.sets["unseen_style"])   # no query, no gallery


def test_final_pools_reuse_the_last_round_only_while_the_model_is_unchanged(clip):
    model, tok = copy.deepcopy(clip[0]), MemoTokenizer(clip[1])
    rows, ev = counted(model), evaluator()   # (counting first: a model's instance attributes are part of its state)
    ev(model, tok, "cpu", ev.num_tasks - 1)
    fresh = Evaluator(ev.sets, ev.query, ev.gallery, CLASSES, ev.num_tasks, ev.cfg).final_pools(model, tok, "cpu")
    rows.update(image=0, text=0)
    assert ev.final_pools(model, tok, "cpu") == fresh
    assert rows == {"image": 0, "text": 0}                          # the last round's features
    fused_step(model)
    moved = Evaluator(ev.sets, ev.query, ev.gallery, CLASSES, ev.num_tasks, ev.cfg).final_pools(model, tok, "cpu")
    rows.update(image=0, text=0)
    assert ev.final_pools(model, tok, "cpu") == moved
    assert rows["image"] > 0                                         # trained since: encoded again


def classification(name: str, classes=CLASSES, n: int = 10, seed: int = 0) -> EvalSet:
    g = torch.Generator().manual_seed(seed)
    return EvalSet(name, "adaptation", torch.randint(0, 256, (n, 32, 32, 3), generator=g, dtype=torch.uint8),
                   torch.arange(n) % len(classes), list(classes))


def fomo_sets() -> list[EvalSet]:
    return [classification("a/one", seed=1), classification("a/two", seed=2),
            classification("b", classes=["heart", "tree", "flag"], seed=3),
            EvalSet("retrieval", "retention", pairs=pairs(16, 1, 5))]


def uncached(model, tok, sets) -> dict:
    """Every set scored on its own, nothing shared (the path before any cache)."""
    model.eval()
    return {s.name: fomo.score(model, tok, s, "cpu", 16) for s in sets}


def test_fomo_sets_with_the_same_classes_share_one_classifier(clip, monkeypatch):
    model, tok = copy.deepcopy(clip[0]), MemoTokenizer(clip[1])
    sets = fomo_sets()
    want = uncached(model, tok, sets)
    built = []
    weights = fomo.zeroshot_weights
    monkeypatch.setattr(fomo, "zeroshot_weights", lambda m, t, c, *a: built.append(c) or weights(m, t, c, *a))
    assert fomo.score_sets(model, tok, sets, "cpu", 16) == want
    assert built == [CLASSES, ["heart", "tree", "flag"]]


def test_frozen_text_tower_is_encoded_once_across_rounds(clip):
    """Locked-text tuning: after the first round only images are encoded, with the scores of the
    uncached path; once the text tower moves, its prompts and captions are encoded again."""
    model, tok = copy.deepcopy(clip[0]), MemoTokenizer(clip[1])
    freeze_all_but(model, image_tower_names(model))
    sets, cache = fomo_sets(), {}
    prompts = len(CLASSES) + 3 + len(sets[-1].pairs.texts)   # one classifier per class list, and the captions
    rows = counted(model)
    for round_ in range(3):
        rows.update(image=0, text=0)
        got = fomo.score_sets(model, tok, sets, "cpu", 16, text_cache=cache)
        assert rows["text"] == (prompts if round_ == 0 else 0)
        assert rows["image"] == sum(len(s.images) if s.pairs is None else len(s.pairs.images) for s in sets)
        assert got == uncached(model, tok, sets)
        fused_step(model, image_tower_names(model))                 # a task of training: the image tower only
    fused_step(model)                                                # the text tower moves too
    rows.update(image=0, text=0)
    assert fomo.score_sets(model, tok, sets, "cpu", 16, text_cache=cache) == uncached(model, tok, sets)
    assert rows["text"] >= prompts
