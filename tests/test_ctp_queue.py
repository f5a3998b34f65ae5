"""CTP's momentum queue at the emoji study's scale: a queue entry of the anchor's own item (the
same pair drawn again, or the same emoji in the other style) is no negative of the anchor, as
at the paper's scale, where the queue never holds it. And the profiles' `albef` alias carries the
study's scale-dependent method settings (buffer, queue) for the methods that have them."""
import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from vlcp.losses.topology import momentum_contrast, queue_own_item, update_queue
from vlcp.methods import get_method
from vlcp.methods.base import Batch, TaskContext, model_outputs
from vlcp.models.albef import create_albef

CAPTIONS = ["grinning face with big eyes", "red apple fruit food", "smiling cat face animal", "rocket space travel",
            "national flag of france", "snowman without snow", "hot beverage cup", "musical note sign"]


@pytest.fixture(scope="module")
def albef():
    torch.manual_seed(0)
    return create_albef("albef-tiny", corpus=CAPTIONS)


def unit(*shape, seed=0):
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


def contrast_by_hand(img, txt, mom_i, mom_t, scale, qi, qt, items, qids):
    """Row by row: the row's own momentum pair against the batch's other momentum features and
    the queue entries of *other* items only (CTP's one-hot contrast with the negatives listed)."""
    loss = 0.0
    for x, cols_b, q in ((img, mom_t, qt), (txt, mom_i, qi)):
        for r in range(len(x)):
            negs = torch.cat([cols_b[:r], cols_b[r + 1:], q[qids != items[r]]])
            logits = scale * torch.cat([(x[r] @ cols_b[r])[None], negs @ x[r]])
            loss = loss - F.log_softmax(logits, 0)[0] / len(x)
    return loss / 2


def test_queue_entries_of_the_rows_item_are_no_negatives():
    img, txt, mom_i, mom_t = unit(4, 6, seed=0), unit(4, 6, seed=1), unit(4, 6, seed=2), unit(4, 6, seed=3)
    qi, qt = unit(7, 6, seed=4), unit(7, 6, seed=5)
    items = torch.tensor([3, 8, 5, 3])
    qids = torch.tensor([8, -1, 3, 2, 3, 5, 9])   # -1: an initial random entry (no item)
    got = momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt, items, qids)
    assert got.item() == pytest.approx(contrast_by_hand(img, txt, mom_i, mom_t, 7.0, qi, qt, items, qids).item(), rel=1e-5)
    # no entry of the rows' items: exactly CTP's contrast against the whole queue (the paper's scale)
    other = torch.tensor([0, 1, 2, 4, 6, 7, -1])
    assert momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt, items, other).item() == pytest.approx(
        momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt).item(), rel=1e-6)
    own = queue_own_item(items, qids, 4)
    assert own.shape == (4, 11) and not own[:, :4].any() and own[0, 4 + 2] and own[0, 4 + 4] and not own[0, 4 + 1]
    with pytest.raises(ValueError, match="go together"):
        momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt, items)
    with pytest.raises(ValueError, match="queue ids"):
        momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt, items, qids[:5])


def test_update_queue_writes_item_ids_alongside_the_features():
    ids = torch.full((5,), -1, dtype=torch.long)
    assert update_queue(ids, 3, torch.tensor([7, 8, 9])) == 1 and ids.tolist() == [9, -1, -1, 7, 8]


def _two_style_context(tok, n_items=8):
    """Pairs 0..n-1 in one style, n..2n-1 the same emoji in the other: pair j is item j % n (the
    train set's image_text), both share the item's caption; the images differ."""
    tokens = tok(CAPTIONS[:n_items])
    pairs = 2 * n_items
    image_text = torch.arange(pairs) % n_items
    images = torch.randn(pairs, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(0)
    mask = tok.masker()

    def materialize(ids, g=gen):
        t = tokens[image_text[ids]]
        m, lab = mask(t, g)
        return Batch(images[ids], t, ids, m, lab)
    pool = torch.arange(pairs)
    return TaskContext(task=0, num_tasks=1, train_set=SimpleNamespace(image_text=image_text), task_ids=[pool],
                       pool=pool, materialize=materialize, generator=gen)


def test_ctp_leaves_the_anchors_item_out_of_its_queue_negatives(albef):
    """One step enqueues a batch's momentum features; the next batch holds the same emoji in the
    other style (and one pair again): its queue contrast must not count them as negatives."""
    model, tok = copy.deepcopy(albef[0]), albef[1]
    model.eval()                                   # deterministic features (no dropout)
    cls = get_method("ctp")
    m = cls(cls.Config(queue_size=6, momentum_task0=1.0))   # θc stays the model: features comparable
    ctx = _two_style_context(tok)
    m.before_task(model, ctx)
    first = ctx.materialize(torch.tensor([0, 1, 2, 3, 12, 13]))      # items 0 1 2 3 4 5: the whole queue after the step
    m.loss(model, first, ctx)
    m.after_step(model, first, ctx)
    second = ctx.materialize(torch.tensor([8, 9, 10, 3, 6]))         # items 0 1 2 3 6: four in the queue
    terms = m.loss(model, second, ctx)
    queue_items, items = torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([0, 1, 2, 3, 6])
    with torch.no_grad():
        out, mom = model_outputs(model, second), model_outputs(m.momentum_model, second)
        qi, qt = m.queues
        want = contrast_by_hand(out[0], out[1], mom[0], mom[1], out[2], qi, qt, items, queue_items)
        plain = contrast_by_hand(out[0], out[1], mom[0], mom[1], out[2], qi, qt, items, torch.full((6,), -1))
    assert plain.item() - want.item() > 0.05            # the own item's entries would be strong negatives
    assert terms["cmc"].item() == pytest.approx(want.item(), rel=1e-5)
    assert m.queue_ids.tolist() == queue_items.tolist()


def test_ctp_queue_ids_are_state(albef):
    model, tok = copy.deepcopy(albef[0]), albef[1]
    cls = get_method("ctp")
    m = cls(cls.Config(queue_size=4))
    ctx = _two_style_context(tok)
    m.before_task(model, ctx)
    batch = ctx.materialize(torch.tensor([9, 2, 5]))
    m.loss(model, batch, ctx)
    m.after_step(model, batch, ctx)
    state = m.state_dict()
    assert state["queue_ids"].tolist() == [1, 2, 5, -1] and state["ptr"] == 3
    b = cls(cls.Config(queue_size=4))
    b.load_state_dict(state)
    assert b.queue_ids.tolist() == [1, 2, 5, -1]
    old = {k: v for k, v in state.items() if k != "queue_ids"}   # a checkpoint written before item ids
    c = cls(cls.Config(queue_size=4))
    c.load_state_dict(old)
    c._queues(state["queues"][0])
    assert c.queue_ids.tolist() == [-1] * 4


# -- the profiles' albef alias: the study's scale-dependent method settings -------------------------

def _alias_params(method_defaults):
    return {"profile": "tiny", "defaults": {"train": {"steps": 10}},
            "profiles": {"tiny": {"model_aliases": {"albef": {"name": "albef-tiny", "method": method_defaults}}}},
            "experiments": {"er": {"model": {"name": "albef"}, "method": {"name": "er"}},
                            "ctp": {"model": {"name": "albef"}, "method": {"name": "ctp"}},
                            "ctp-er": {"model": {"name": "albef"}, "method": {"name": "ctp-er", "queue_size": 8}},
                            "seqf": {"model": {"name": "albef"}, "method": {"name": "seqf"}},
                            "plain": {"method": {"name": "er"}}}}


def test_alias_method_defaults_apply_to_the_methods_that_have_the_field():
    from vlcp.config import resolve_experiment

    params = _alias_params({"buffer_size": 25, "queue_size": 64})
    assert resolve_experiment(params, "er").method.args["buffer_size"] == 25
    assert "queue_size" not in resolve_experiment(params, "er").method.args          # ER has no queue: left out
    assert resolve_experiment(params, "ctp").method.args["queue_size"] == 64
    ctp_er = resolve_experiment(params, "ctp-er").method.args
    assert (ctp_er["buffer_size"], ctp_er["queue_size"]) == (25, 8)                 # the experiment's own wins
    assert resolve_experiment(params, "seqf").method.args == {}                       # memory-free: nothing
    assert resolve_experiment(params, "plain").method.args["buffer_size"] == 200      # no alias: the method's default
    assert resolve_experiment(params, "er", overrides=["method.buffer_size=3"]).method.args["buffer_size"] == 3


def test_alias_method_defaults_errors_name_the_field():
    from vlcp.config import resolve_experiment
    from vlcp.errors import ConfigError

    with pytest.raises(ConfigError, match=r"profiles.tiny.model_aliases.albef.method.name: "):
        resolve_experiment(_alias_params({"name": "er"}), "ctp")
    with pytest.raises(ConfigError, match=r"profiles.tiny.model_aliases.albef.method.bufer_size: no method has"):
        resolve_experiment(_alias_params({"bufer_size": 25}), "ctp")
    with pytest.raises(ConfigError, match=r"method.buffer_size: must be >= 0"):
        resolve_experiment(_alias_params({"buffer_size": -1}), "er")
    with pytest.raises(ConfigError, match=r"profiles.tiny.model_aliases.albef.method: expected a mapping"):
        resolve_experiment(_alias_params([1]), "er")
