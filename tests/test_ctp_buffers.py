"""CTP's memory-buffer baselines: the exemplar buffer (quotas, priority-order reduce, state),
the selection functions (herding, k-means) on hand-made features, and MoF / Kmeans / LUCIR
end to end for two short tasks on a tiny CLIP (buffer quotas, resume), LUCIR's MLM term on a
fake ALBEF, and UCIR unchanged by the refactor it now shares with LUCIR."""
import copy
import io
import math
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from vlcp.config import TrainCfg
from vlcp.data.buffer import ReservoirBuffer, TaskQuotaBuffer, herding, kmeans_exemplars, task_quotas
from vlcp.errors import ConfigError
from vlcp.losses import clip_loss, cosine_distill, margin_ranking, soft_distill
from vlcp.methods import get_method
from vlcp.methods.base import Batch, TaskContext
from vlcp.models import create_clip, multimodal_features
from vlcp.train.loop import Materializer, train_task

CPU = torch.device("cpu")


# ------------------------------------------------------------------------- selection functions

# unit vectors; mean μ = (0.47, 0.69). Picks: k=1 argmax x·μ -> 2 (0.834 vs 0.794, 0.69, 0.47);
# k=2 argmax x·(2μ - x2) = x·(0.34, 0.58) -> 3 (0.652); k=3 x·(3μ - x2 - x3) = x·(0.53, 0.31) -> 0.
HAND = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.28, 0.96]])


def test_herding_picks_the_hand_computed_order():
    assert herding(HAND, 4).tolist() == [2, 3, 0, 1]
    assert herding(HAND, 2).tolist() == [2, 3]
    assert herding(HAND * 5, 4).tolist() == [2, 3, 0, 1]           # rows are normalised first
    assert herding(HAND, 10).tolist() == [2, 3, 0, 1]              # at most n
    assert herding(HAND, 0).tolist() == []


def test_herding_running_mean_approaches_the_mean():
    g = torch.Generator().manual_seed(0)
    x = F.normalize(torch.randn(300, 8, generator=g, dtype=torch.float64) + 2 * torch.eye(8)[0], dim=1)
    order = herding(x, 300)
    assert sorted(order.tolist()) == list(range(300))
    mu = x.mean(0)
    dist = [(x[order[:k]].mean(0) - mu).norm().item() for k in range(1, 301)]
    assert all(k * d < 1.5 for k, d in enumerate(dist, 1))           # herding's O(1/k) rate (random: O(1/√k))
    assert dist[-1] == pytest.approx(0, abs=1e-12)
    randoms = [(x[torch.randperm(300, generator=g)[:20]].mean(0) - mu).norm().item() for _ in range(20)]
    assert dist[19] < min(randoms)                                   # better than any random 20


def test_kmeans_picks_one_item_per_well_separated_cluster():
    g = torch.Generator().manual_seed(0)
    sizes, angles = [13, 11, 9, 7], [0.0, 90.0, 180.0, 270.0]
    centers = torch.tensor([[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in angles])
    x = torch.cat([c + 0.05 * torch.randn(n, 2, generator=g) for c, n in zip(centers, sizes)])
    label = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    picks = kmeans_exemplars(x, 4, seed=0)
    assert label[picks].tolist() == [0, 1, 2, 3]                     # one per cluster, biggest first
    xn = F.normalize(x.double(), dim=1)
    for c, i in enumerate(picks.tolist()):
        members = (label == c).nonzero().squeeze(1)
        centroid = xn[members].mean(0)
        assert i == members[(xn[members] - centroid).norm(dim=1).argmin()]   # nearest its centroid
    assert torch.equal(kmeans_exemplars(x, 4, seed=0), picks)        # seeded
    assert kmeans_exemplars(x, 100).tolist() == list(range(len(x)))
    assert kmeans_exemplars(x, 0).tolist() == []


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")   # duplicate points
def test_kmeans_picks_are_distinct():
    x = torch.tensor([[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 5)            # 2 distinct points, k = 4
    picks = kmeans_exemplars(x, 4, seed=0)
    assert len(set(picks.tolist())) == 4


# --------------------------------------------------------------------------------- the buffer

def test_task_quotas_for_known_sizes():
    assert task_quotas([600, 300, 100], 100) == [60, 30, 10]
    assert task_quotas([500, 300], 200) == [125, 75]
    assert task_quotas([500, 300, 200], 200) == [100, 60, 40]
    assert task_quotas([24, 12], 9) == [6, 3]
    assert task_quotas([1, 3], 2) == [0, 2]                 # Python's round: 0.5 -> 0, 1.5 -> 2
    assert task_quotas([1, 2], 10) == [1, 2]                # capped at the task's size
    assert task_quotas([1, 1, 1], 2) == [1, 1, 0]           # round overshoots: the latest tie gives
    assert task_quotas([0, 0], 5) == [0, 0]


def test_buffer_quotas_per_task():
    buf = TaskQuotaBuffer(200)
    buf.add_task(torch.arange(500), 500)
    assert [len(t) for t in buf.per_task] == [200]
    buf.add_task(torch.arange(1000, 1300), 300)
    assert [len(t) for t in buf.per_task] == [125, 75]
    buf.add_task(torch.arange(2000, 2200), 200)
    assert [len(t) for t in buf.per_task] == [100, 60, 40] and len(buf) == 200
    assert buf.per_task[0].tolist() == list(range(100)) and buf.per_task[2].tolist() == list(range(2000, 2040))


def test_reduce_keeps_the_best_ranked_exemplars_not_the_smallest_ids():
    ids = torch.tensor([10, 11, 12, 13])
    ranked = ids[herding(HAND, 4)]                          # [12, 13, 10, 11]
    buf = TaskQuotaBuffer(4)
    buf.add_task(ranked, 4)
    assert buf.per_task[0].tolist() == [12, 13, 10, 11]
    buf.add_task(torch.arange(20, 32), 12)                  # quotas [1, 3]
    assert buf.per_task[0].tolist() == [12]                 # CTP's dataset-order reduce kept 10
    assert buf.per_task[1].tolist() == [20, 21, 22]
    buf.reduce([0, 2])
    assert buf.ids.tolist() == [20, 21]


def test_buffer_state_round_trips():
    buf = TaskQuotaBuffer(10)
    buf.add_task(torch.tensor([5, 3, 9, 1]), 40)
    buf.add_task(torch.tensor([50, 70, 60, 80, 90]), 20)
    buf.add(torch.tensor([1000, 1001]))                     # per-step offers are ignored
    assert buf.ids.tolist() == [5, 3, 9, 1, 50, 70, 60] and len(buf) == 7
    saved = io.BytesIO()
    torch.save(buf.state_dict(), saved)
    saved.seek(0)
    other = TaskQuotaBuffer(10)
    other.load_state_dict(torch.load(saved, weights_only=True))
    assert torch.equal(other.ids, buf.ids) and other.sizes == buf.sizes == [40, 20]
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(buf.sample(16, g1), other.sample(16, g2))
    state = buf.state_dict()
    buf.add_task(torch.tensor([7]), 60)                     # the snapshot does not move with it
    assert [t.tolist() for t in state["per_task"]] == [[5, 3, 9, 1], [50, 70, 60]]
    assert TaskQuotaBuffer(3).sample(4, g1).tolist() == []


# ---------------------------------------------------------------- methods on a tiny CLIP stream

SIZES, STEPS, BUFFER = (24, 12), 2, 9      # quotas: [9] after task 0, [6, 3] after task 1


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    return create_clip("vlcp-tiny")


@pytest.fixture(scope="module")
def stream(clip):
    _, tok = clip
    g = torch.Generator().manual_seed(1)
    n = sum(SIZES)
    images = torch.randint(0, 256, (n, 32, 32, 3), generator=g, dtype=torch.uint8)
    tokens = tok([f"item {i} caption {k}" for i in range(n) for k in range(2)]).view(n, 2, -1)
    train = Materializer(images, torch.arange(n), tokens, CPU, augment=True)
    plain = Materializer(images, torch.arange(n), tokens, CPU, augment=False)
    return train, plain, list(torch.arange(n).split(SIZES))


def task_ctx(t, stream, record=None):
    train, plain, task_ids = stream
    gen = torch.Generator().manual_seed(100 + t)

    def materialize(ids):
        if record is not None:
            record.append(ids.clone())
        return train(ids, gen)
    return TaskContext(task=t, num_tasks=2, train_set=None, task_ids=task_ids, pool=task_ids[t],
                       materialize=materialize, generator=gen,
                       materialize_plain=lambda ids: plain(ids, torch.Generator().manual_seed(0)))


def run_task(model, method, t, stream, record=None):
    cfg = TrainCfg(steps=STEPS, batch_size=8, lr=1e-3, warmup_steps=1, progress=False)
    ctx = task_ctx(t, stream, record)
    stats = train_task(model, method, ctx, STEPS, cfg, CPU)
    method.after_task(model, ctx)
    return stats, ctx


def plain_features(model, ids, stream):
    _, plain, _ = stream
    model.eval()
    with torch.no_grad():
        b = plain(ids, torch.Generator().manual_seed(0))
        f = multimodal_features(model, b.images, b.tokens)
    model.train()
    return f


@pytest.mark.parametrize("name,terms", [("mof", {"clip"}), ("kmeans", {"clip"}), ("lucir", {"clip", "lf"})])
def test_method_two_tasks_quotas_and_resume(clip, stream, name, terms):
    torch.manual_seed(0)
    model = copy.deepcopy(clip[0])
    cls = get_method(name)
    method = cls(cls.Config(buffer_size=BUFFER), seed=7)
    stats, ctx = run_task(model, method, 0, stream)
    task_ids = stream[2]
    assert set(stats["terms"]) == {"clip"}
    assert [len(t) for t in method.buffer.per_task] == [9]
    # the task's exemplars are the selection on the un-augmented features, in priority order
    want = task_ids[0][method.select(plain_features(model, task_ids[0], stream), 9, ctx)]
    assert torch.equal(method.buffer.per_task[0], want)

    saved = io.BytesIO()
    torch.save(method.state_dict(), saved)
    saved.seek(0)
    resumed = cls(cls.Config(buffer_size=BUFFER), seed=7)
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    resumed_model = copy.deepcopy(model)

    seen, seen_resumed = [], []
    stats, _ = run_task(model, method, 1, stream, seen)
    run_task(resumed_model, resumed, 1, stream, seen_resumed)
    assert set(stats["terms"]) == terms and all(math.isfinite(v) for v in stats["terms"].values())
    assert all(torch.equal(a, b) for a, b in zip(seen, seen_resumed)) and len(seen) == STEPS
    assert all(set(ids[4:].tolist()) <= set(want.tolist()) for ids in seen)   # half replayed from task 0
    assert all(set(ids[:4].tolist()) <= set(task_ids[1].tolist()) for ids in seen)
    assert [len(t) for t in method.buffer.per_task] == [6, 3]
    assert torch.equal(method.buffer.per_task[0], want[:6])                   # best-ranked kept
    assert set(method.buffer.per_task[1].tolist()) <= set(task_ids[1].tolist())
    assert len(set(method.buffer.ids.tolist())) == 9
    assert torch.equal(method.buffer.ids, resumed.buffer.ids)


@pytest.mark.parametrize("name,field,value", [("mof", "buffer_size", -1), ("mof", "feature_batch_size", 0),
                                              ("kmeans", "kmeans_iters", 0), ("kmeans", "replay_fraction", 1.0),
                                              ("lucir", "mlm_distill_weight", -1.0), ("lucir", "margin", -1.0),
                                              ("lucir", "feature_batch_size", 0)])
def test_config_errors_name_the_field(name, field, value):
    with pytest.raises(ConfigError, match=field):
        get_method(name).Config(**{field: value})


def test_default_buffer_size_is_200():
    assert all(get_method(n).Config().buffer_size == 200 for n in ("mof", "kmeans", "lucir"))


# ------------------------------------------------------------------------ LUCIR and UCIR losses

class FakeOutput(NamedTuple):
    image_features: torch.Tensor
    text_features: torch.Tensor
    logit_scale: torch.Tensor
    mlm_logits: torch.Tensor


class FakeALBEF(torch.nn.Module):
    """ALBEF's output contract on a few linear layers: features, logit scale and MLM logits [M, V]
    at the M masked positions (row-major)."""
    V = 11

    def __init__(self):
        super().__init__()
        self.img = torch.nn.Linear(48, 8)
        self.emb = torch.nn.Embedding(self.V, 8)
        self.txt = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, self.V)
        self.logit_scale = torch.nn.Parameter(torch.tensor(math.log(10.0)))

    def encode_image(self, images, normalize=False):
        f = self.img(images.flatten(1))
        return F.normalize(f, dim=-1) if normalize else f

    def encode_text(self, tokens, normalize=False):
        f = self.txt(self.emb(tokens).mean(1))
        return F.normalize(f, dim=-1) if normalize else f

    def encode_multimodal(self, images, tokens, normalize=False):
        f = self.encode_image(images) + self.encode_text(tokens)
        return F.normalize(f, dim=-1) if normalize else f

    def forward(self, images, tokens, mlm_input=None, mlm_mask=None):
        img, txt = self.encode_image(images, True), self.encode_text(tokens, True)
        logits = torch.zeros(0, self.V)
        if mlm_input is not None:
            h = self.emb(mlm_input) + self.img(images.flatten(1))[:, None]
            logits = self.head(h)[mlm_mask]
        return FakeOutput(img, txt, self.logit_scale.exp(), logits)


def albef_batch(mlm: bool):
    g = torch.Generator().manual_seed(5)
    images = torch.randn(6, 3, 4, 4, generator=g)
    tokens = torch.randint(1, FakeALBEF.V, (6, 7), generator=g)
    batch = Batch(images, tokens, torch.arange(100, 106))
    if mlm:
        picked = torch.rand(6, 7, generator=g) < 0.3
        picked[0, 0] = True
        batch.mlm_input = torch.where(picked, torch.zeros_like(tokens), tokens)
        batch.mlm_labels = torch.where(picked, tokens, torch.full_like(tokens, -100))
    return batch


def loss_ctx(task):
    ctx = TaskContext(task=task, num_tasks=2, train_set=None, task_ids=[torch.arange(16), torch.arange(16, 24)],
                      pool=torch.arange(16, 24), materialize=None, generator=torch.Generator().manual_seed(0))
    ctx.extras["current_ids"] = torch.arange(100, 104)          # rows 4, 5 are replayed
    return ctx


def perturb(model, seed=9):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))


def test_lucir_mlm_distillation_only_with_mlm_inputs():
    torch.manual_seed(0)
    cls = get_method("lucir")
    method = cls(cls.Config(mr_weight=0.5, mlm_distill_weight=2.0))
    model = FakeALBEF()
    method.before_task(model, loss_ctx(0))
    assert set(method.loss(model, albef_batch(True), loss_ctx(0))) == {"clip", "mlm"}   # no previous model
    method.before_task(model, loss_ctx(1))
    perturb(model)
    batch = albef_batch(True)
    terms = method.loss(model, batch, loss_ctx(1))
    assert set(terms) == {"clip", "mlm", "lf", "mr", "mlm_kd"}
    mask = batch.mlm_labels != -100
    new = model(batch.images, batch.tokens, batch.mlm_input, mask)
    old = method.old(batch.images, batch.tokens, batch.mlm_input, mask)
    assert terms["mlm_kd"].item() == pytest.approx(2.0 * soft_distill(new.mlm_logits, old.mlm_logits).item(), rel=1e-6)
    assert terms["mlm_kd"].requires_grad
    lf = (cosine_distill(new[0], old[0]) + cosine_distill(new[1], old[1])) / 2        # constant weight 1
    assert terms["lf"].item() == pytest.approx(lf.item(), rel=1e-6)
    assert set(method.loss(model, albef_batch(False), loss_ctx(1))) == {"clip", "lf", "mr"}
    adaptive = cls(cls.Config(adaptive_lf=True, lambda_base=5.0))
    assert adaptive.lf_weight(loss_ctx(1)) == pytest.approx(5.0 * math.sqrt(16 / 8))
    assert method.lf_weight(loss_ctx(1)) == 1.0


def test_ucir_still_behaves_as_before(clip):
    torch.manual_seed(0)
    model = copy.deepcopy(clip[0])
    method = get_method("ucir")()
    assert isinstance(method.buffer, ReservoirBuffer)
    method.before_task(model, loss_ctx(1))
    perturb(model)
    g = torch.Generator().manual_seed(2)
    batch = Batch(torch.randn(6, 3, 32, 32, generator=g), clip[1]([f"text {i}" for i in range(6)]),
                  torch.arange(100, 106))
    terms = method.loss(model, batch, loss_ctx(1))
    # the formula before the refactor
    img, txt, scale = model(batch.images, batch.tokens)[:3]
    with torch.no_grad():
        old_img, old_txt, _ = method.old(batch.images, batch.tokens)[:3]
    rows = torch.tensor([False] * 4 + [True] * 2)
    want = {"clip": clip_loss(img, txt, scale),
            "lf": 5.0 * math.sqrt(16 / 8) * (cosine_distill(img, old_img) + cosine_distill(txt, old_txt)) / 2,
            "mr": margin_ranking(img, txt, rows, 0.5, 2)}
    assert set(terms) == set(want)
    for k in want:
        assert terms[k].item() == pytest.approx(want[k].item(), rel=1e-6, abs=1e-7)
    method.after_step(model, batch, loss_ctx(1))               # ER's reservoir takes the current ids
    assert sorted(method.buffer.ids.tolist()) == [100, 101, 102, 103]
