"""The ALBEF model, CTP's losses against references, and the CTP method's behaviour."""
import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_experiment
from vlcp.errors import VlcpError
from vlcp.losses import clip_loss, mask_tokens, mlm_loss
from vlcp.losses.topology import momentum_contrast, topology_kl, update_queue
from vlcp.methods import get_method
from vlcp.methods.base import Batch, TaskContext, base_terms
from vlcp.methods.ctp import momentum_update
from vlcp.models.albef import ALBEFConfig, WordPieceTokenizer, create_albef
from vlcp.run import run_experiment

CORPUS = ["grinning face with big eyes", "red apple fruit food", "smiling cat face animal",
          "rocket space travel", "national flag of france"] * 20


@pytest.fixture(scope="module")
def albef():
    torch.manual_seed(0)
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    return model.eval(), tok


def unit(*shape, seed=0):
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


# -- model ---------------------------------------------------------------------------------

def test_tokenizer_is_bert_style_and_deterministic(albef):
    _, tok = albef
    ids = tok(["Grinning FACE", "apple"])
    assert ids.shape == (2, ALBEFConfig().context_length)
    assert ids[0, 0] == tok.cls_id and tok.sep_id in ids[0].tolist() and ids[0, -1] == tok.pad_id
    assert torch.equal(ids, WordPieceTokenizer.train(CORPUS, 1500, 24)(["Grinning FACE", "apple"]))


def test_fusion_self_attention_is_bidirectional_and_cross_attends(albef):
    model, tok = albef
    tokens = tok(["grinning cat face", "red apple"])
    images = torch.randn(2, 3, 32, 32)
    h, ext = model.text_hidden(tokens)
    emb = model.image_embeds(images)
    base = model.fuse(h, ext, emb)
    later = h.clone()
    later[:, 3] += 1.0                      # change only a later position's input
    assert (model.fuse(later, ext, emb)[:, 0] - base[:, 0]).abs().max() > 1e-4   # position 0 sees it
    assert (model.fuse(h, ext, emb + 1.0)[:, 0] - base[:, 0]).abs().max() > 1e-4  # and the image
    for layer in model.layers[model.cfg.fusion_layer:]:
        assert hasattr(layer, "crossattention") and not layer.attention.self.is_causal
    for layer in model.layers[: model.cfg.fusion_layer]:
        assert not hasattr(layer, "crossattention")


def test_mlm_head_scores_masked_positions_only_and_is_tied(albef):
    model, tok = albef
    tokens = tok(["grinning cat face", "red apple fruit"])
    masked, labels = mask_tokens(tokens, torch.Generator().manual_seed(1), tok.vocab_size, tok.mask_id,
                                 (tok.pad_id, tok.cls_id), prob=0.5)
    out = model(torch.randn(2, 3, 32, 32), tokens, masked, labels != -100)
    assert out.mlm_logits.shape == ((labels != -100).sum().item(), tok.vocab_size)
    assert model.mlm.cls.predictions.decoder.weight is model.mlm.bert.embeddings.word_embeddings.weight
    assert out.image_features.norm(dim=-1).allclose(torch.ones(2)) and out.logit_scale.item() == pytest.approx(1 / 0.07)


def test_base_terms_give_every_trainable_tower_a_gradient(albef):
    model, tok = albef
    model = model.train()
    tokens = tok(CORPUS[:8])
    masked, labels = mask_tokens(tokens, torch.Generator().manual_seed(0), tok.vocab_size, tok.mask_id,
                                 (tok.pad_id, tok.cls_id), prob=0.3)
    terms = base_terms(model, Batch(torch.randn(8, 3, 32, 32), tokens, torch.arange(8), masked, labels))
    assert set(terms) == {"clip", "mlm"}
    sum(terms.values()).backward()
    for part in (model.visual, model.vision_proj, model.text_proj, model.layers[0], model.layers[-1].crossattention):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())
    assert not model.logit_scale.requires_grad       # τ = 0.07 fixed, as in CTP
    model.zero_grad(set_to_none=True)
    model.eval()


def test_mask_tokens_follows_berts_rule():
    tokens = torch.randint(5, 100, (400, 30))
    tokens[:, 0], tokens[:, -5:] = 2, 0                     # CLS first, PAD at the end
    masked, labels = mask_tokens(tokens, torch.Generator().manual_seed(0), 100, 4, (0, 2), prob=0.15)
    picked = labels != -100
    assert not picked[:, 0].any() and not picked[:, -5:].any()
    assert torch.equal(labels[picked], tokens[picked])
    assert abs(picked.float().mean().item() - 0.15 * 24 / 30) < 0.01
    frac_mask = (masked[picked] == 4).float().mean().item()
    frac_same = (masked[picked] == tokens[picked]).float().mean().item()
    assert abs(frac_mask - 0.8) < 0.03 and 0.08 < frac_same < 0.14      # 10% kept (+ random hits)
    assert torch.equal(masked[~picked], tokens[~picked])
    assert mlm_loss(torch.zeros(0, 100, requires_grad=True), torch.full((2, 3), -100)).item() == 0


def test_pretrained_directory_in_the_real_formats(tmp_path):
    """A transformers BERT directory (config, weights, vocab.txt) + a timm ViT checkpoint."""
    from timm.models.vision_transformer import VisionTransformer
    from transformers import BertConfig, BertForMaskedLM

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "apple", "cat", "face", "##s"]
    bert = BertForMaskedLM(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=64))
    (tmp_path / "bert").mkdir()
    bert.save_pretrained(tmp_path / "bert")
    (tmp_path / "bert" / "vocab.txt").write_text("\n".join(vocab) + "\n")
    vit = VisionTransformer(img_size=64, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=10)
    torch.save({"model": vit.state_dict()}, tmp_path / "vit.pth")
    model, tok = create_albef("albef-tiny", str(tmp_path), image_size=32)
    assert tok(["red cats"])[0, :5].tolist() == [2, 5, 7, 9, 3]
    assert torch.equal(model.layers[0].attention.self.query.weight, bert.bert.encoder.layer[0].attention.self.query.weight)
    assert torch.equal(model.layers[1].output.dense.weight, bert.bert.encoder.layer[1].output.dense.weight)  # fusion keeps BERT's
    assert torch.equal(model.visual.blocks[1].mlp.fc1.weight, vit.blocks[1].mlp.fc1.weight)
    assert model.visual.pos_embed.shape[1] == 1 + 16                                # resampled 64 px -> 32 px
    with pytest.raises(VlcpError, match="bert"):
        create_albef("albef-tiny", str(tmp_path / "nowhere"))


def test_vlcp_weights_file_round_trips_and_a_misfit_is_named(tmp_path):
    """`vlcp pretrain` writes an ALBEF's state dict (stage ctp_base); the study loads it with the
    vocab rebuilt from the same captions, and a file for another vocab or config is refused."""
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    torch.save(model.state_dict(), tmp_path / "base.pt")
    loaded, tok2 = create_albef("albef-tiny", str(tmp_path / "base.pt"), corpus=CORPUS)
    assert tok2(CORPUS[:2]).tolist() == tok(CORPUS[:2]).tolist()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    with pytest.raises(VlcpError, match="does not fit"):
        create_albef("albef-tiny", str(tmp_path / "base.pt"), corpus=CORPUS + ["zebra xylophone quokka"])
    with pytest.raises(VlcpError, match="not found"):
        create_albef("albef-tiny", str(tmp_path / "missing.pt"), corpus=CORPUS)


# -- CTP's losses ------------------------------------------------------------------------------

def test_momentum_contrast_without_queue_equals_clip_loss_when_features_agree():
    img, txt = unit(6, 8, seed=0), unit(6, 8, seed=1)
    assert momentum_contrast(img, txt, img, txt, 10.0).item() == pytest.approx(clip_loss(img, txt, 10.0).item(), rel=1e-6)


def test_momentum_contrast_queue_adds_negatives_by_hand():
    img, txt, mom_i, mom_t = unit(3, 4, seed=0), unit(3, 4, seed=1), unit(3, 4, seed=2), unit(3, 4, seed=3)
    qi, qt = unit(5, 4, seed=4), unit(5, 4, seed=5)
    i2t = F.cross_entropy(7 * img @ torch.cat([mom_t, qt]).T, torch.arange(3))
    t2i = F.cross_entropy(7 * txt @ torch.cat([mom_i, qi]).T, torch.arange(3))
    assert momentum_contrast(img, txt, mom_i, mom_t, 7.0, qi, qt).item() == pytest.approx(((i2t + t2i) / 2).item(), rel=1e-6)


def test_topology_kl_zero_for_equal_models_and_self_mask_by_hand():
    a, b = unit(4, 8, seed=0), unit(4, 8, seed=1)
    assert topology_kl(a, b, a, b, 10.0).item() == pytest.approx(0, abs=1e-6)
    ref = unit(4, 8, seed=2)
    eye = torch.eye(4, dtype=torch.bool)
    sim, rsim = (10 * a @ a.T).masked_fill(eye, -1000), (10 * ref @ ref.T).masked_fill(eye, -1000)
    want = (F.softmax(rsim, 1) * (F.log_softmax(rsim, 1) - F.log_softmax(sim, 1))).sum(1).mean()
    assert topology_kl(a, a, ref, ref, 10.0, mask_self=True).item() == pytest.approx(want.item(), rel=1e-5)


def test_update_queue_wraps_around():
    q = torch.zeros(5, 2)
    ptr = update_queue(q, 3, torch.arange(6.0).view(3, 2))
    assert ptr == 1 and q[3].tolist() == [0, 1] and q[4].tolist() == [2, 3] and q[0].tolist() == [4, 5]


def test_compatible_momentum_update_by_hand():
    mom, prev, cur = [torch.tensor([1.0])], [torch.tensor([0.0])], [torch.tensor([2.0])]
    momentum_update(mom, [(0.9, mom), (0.05, prev), (0.05, cur)])
    assert mom[0].item() == pytest.approx(0.9 + 0.1)
    momentum_update(mom, [(0.5, mom), (0.0, prev), (0.5, cur)])
    assert mom[0].item() == pytest.approx(0.5 * 1.0 + 0.5 * 2.0)
    with pytest.raises(ValueError, match="first source"):
        momentum_update(mom, [(0.5, cur), (0.5, mom)])


# -- the CTP method ----------------------------------------------------------------------------

def _ctx(tok, task, n=24):
    gen = torch.Generator().manual_seed(task)
    tokens = tok(CORPUS[:n])
    images = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    mask = tok.masker()

    def materialize(ids, g=gen):
        m, lab = mask(tokens[ids], g)
        return Batch(images[ids], tokens[ids], ids, m, lab)
    ids = [torch.arange(0, n // 2), torch.arange(n // 2, n)]
    return TaskContext(task=task, num_tasks=2, train_set=None, task_ids=ids, pool=ids[task],
                       materialize=materialize, generator=gen)


def _train(model, method, ctx, steps=3):
    from vlcp.config import TrainCfg
    from vlcp.train.loop import train_task
    return train_task(model, method, ctx, steps, TrainCfg(batch_size=8, progress=False, warmup_steps=0, lr=1e-3), "cpu")


def test_ctp_terms_follow_the_ablation_switches():
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    cls = get_method("ctp")
    full = cls(cls.Config(queue_size=16))
    s0 = _train(model, full, _ctx(tok, 0))
    assert set(s0["terms"]) == {"clip", "mlm", "cmc", "mlm_distill"}                   # task 0: no θ(t-1)
    s1 = _train(model, full, _ctx(tok, 1))
    assert set(s1["terms"]) == {"clip", "mlm", "cmc", "mlm_distill", "topo_cross", "topo_same"}
    only_lc = cls(cls.Config(cmc=False, same_topology=False))
    only_lc.before_task(model, _ctx(tok, 1))
    assert only_lc.momentum_model is None
    b = _ctx(tok, 1).materialize(torch.arange(12, 20))
    assert set(only_lc.loss(model, b, _ctx(tok, 1))) == {"clip", "mlm", "topo_cross"}


def test_ctp_momentum_model_follows_its_update_rule():
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    cls = get_method("ctp")
    # task 0: θc is an EMA of θ with m = momentum_task0 -> with m = 1 it stays the initial model
    frozen = cls(cls.Config(momentum_task0=1.0, queue_size=8))
    start = [p.detach().clone() for p in model.parameters()]
    _train(model, frozen, _ctx(tok, 0))
    assert all(torch.equal(a, b) for a, b in zip(frozen.momentum_model.parameters(), start))
    # task >= 1, only θ(t-1): θc stays θ(t-1) exactly while θ moves
    prev_only = cls(cls.Config(prev_weight=1.0, queue_size=8))
    prev = [p.detach().clone() for p in model.parameters()]
    _train(model, prev_only, _ctx(tok, 1))
    assert all(torch.allclose(a, b) for a, b in zip(prev_only.momentum_model.parameters(), prev))
    assert not all(torch.equal(a, b) for a, b in zip(model.parameters(), prev))
    # the compatible update moves θc towards the midpoint of θ(t-1) and θt
    compat = cls(cls.Config(momentum=0.0, queue_size=8))
    ctx = _ctx(tok, 1)
    compat.before_task(model, ctx)
    compat.after_step(model, ctx.materialize(torch.arange(12, 16)), ctx)
    ref = [p for p in compat.ref.parameters()]
    for m, r, c in zip(compat.momentum_model.parameters(), ref, model.parameters()):
        assert torch.allclose(m, (r + c) / 2)


def test_ctp_queue_is_state_and_resume_gives_the_same_losses():
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    cls = get_method("ctp")
    a = cls(cls.Config(queue_size=16), seed=3)
    _train(model, a, _ctx(tok, 0))
    state = {k: (tuple(q.clone() for q in v) if k == "queues" else v) for k, v in a.state_dict().items()}
    assert a.ptr == (3 * 8) % 16
    import copy
    model_b = copy.deepcopy(model)
    b = cls(cls.Config(queue_size=16), seed=3)
    b.load_state_dict(state)
    la, lb = _train(model, a, _ctx(tok, 1)), _train(model_b, b, _ctx(tok, 1))
    assert la["terms"] == pytest.approx(lb["terms"], rel=1e-5)


def test_ctp_and_ctp_er_run_end_to_end_on_albef(emoji_root, tmp_path):
    for method, args in (("ctp", {"queue_size": 32}), ("ctp-er", {"queue_size": 32, "buffer_size": 40})):
        cfg = tiny_experiment(emoji_root, method, steps=9, model="albef-tiny", **args)
        res = run_experiment(cfg, tmp_path / method)
        last = res["cumulative"][-1]["test"]
        assert {"Rm", "mAP@1", "mAP_std@10"} <= set(last) and len(res["final_cumulative"]) == 3
        assert res["train"][-1]["terms"].keys() >= {"cmc", "topo_cross", "topo_same", "mlm_distill", "mlm"}


def test_icarl_is_herding_replay_plus_lwf():
    from vlcp.methods.icarl import ICaRL
    from vlcp.methods.lwf import LwF
    from vlcp.methods.mof import MoF
    assert issubclass(ICaRL, MoF) and issubclass(ICaRL, LwF)
    model, tok = create_albef("albef-tiny", corpus=CORPUS)
    cls = get_method("icarl")
    m = cls(cls.Config(buffer_size=6))
    ctx0 = _ctx(tok, 0)
    _train(model, m, ctx0)
    m.after_task(model, ctx0)
    assert len(m.buffer) == 6
    s1 = _train(model, m, _ctx(tok, 1))
    assert {"lwf", "lwf_mlm", "clip", "mlm"} <= set(s1["terms"])


# -- LwF and LUCIR on ALBEF: the CTP code's formulas ----------------------------------------

def test_lwf_on_albef_distils_the_raw_projections_as_the_ctp_code(albef):
    """CTP's LWF_forward on ALBEF: KL over the feature dimensions of the *unnormalised*
    vision_proj / text_proj outputs (get_raw_feature), current vs reference; plus the MLM
    logit distillation (distill_mlm, T = 1)."""
    import copy

    from test_ctp_baselines import ctp_lwf_feature_loss
    model, tok = copy.deepcopy(albef[0]), albef[1]
    m = get_method("lwf")()
    ctx = _ctx(tok, 1)
    m.before_task(model, ctx)
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in (model.vision_proj.weight, model.text_proj.weight):
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    batch = ctx.materialize(ctx.pool[:8])
    terms = m.loss(model, batch, ctx)
    with torch.no_grad():
        want = ctp_lwf_feature_loss(model.encode_image(batch.images), model.encode_text(batch.tokens),
                                    m.teacher.encode_image(batch.images), m.teacher.encode_text(batch.tokens))
        mask = batch.mlm_labels != -100
        new = model(batch.images, batch.tokens, batch.mlm_input, mask).mlm_logits
        ref = m.teacher(batch.images, batch.tokens, batch.mlm_input, mask).mlm_logits
        # CLIP_Pretrain.distill_mlm (T = 1), on the masked positions
        mlm_dis = (-torch.sum(F.log_softmax(new, dim=-1) * F.softmax(ref, dim=-1), dim=-1)).mean()
    assert want.item() > 1e-4
    assert terms["lwf"].item() == pytest.approx(want.item(), rel=1e-4)
    assert terms["lwf_mlm"].item() == pytest.approx(mlm_dis.item(), rel=1e-5)


def ctp_cosine_linear_forward(input, weight, sigma):
    """Ported from KevinLight831/CTP, models/clip_pretrain.py, `CosineLinear.forward`."""
    out = F.linear(F.normalize(input, p=2, dim=1), F.normalize(weight, p=2, dim=1))
    if sigma is not None:
        out = sigma * out
    return out


def test_cosine_linear_equals_the_ctp_code_and_sigma_learns():
    from vlcp.models.albef import CosineLinear
    torch.manual_seed(0)
    layer = CosineLinear(64, 16)
    assert layer.sigma.item() == 1.0 and layer.weight.abs().max() <= 1 / 8     # the CTP code's init
    with torch.no_grad():
        layer.sigma.fill_(1.7)
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(1)) * 3
    out = layer(x)
    assert torch.allclose(out, ctp_cosine_linear_forward(x, layer.weight, layer.sigma), atol=1e-6)
    assert out.abs().max() <= 1.7 + 1e-5
    (out ** 2).sum().backward()
    assert layer.sigma.grad is not None and layer.sigma.grad.abs().item() > 0
    assert layer.weight.grad is not None
    lin = torch.nn.Linear(64, 16)
    copied = CosineLinear.from_linear(lin)
    assert torch.equal(copied.weight, lin.weight) and copied.sigma.item() == 1.0
    assert torch.allclose(copied(x), ctp_cosine_linear_forward(x, lin.weight, torch.ones(1)), atol=1e-6)


def test_lucir_installs_cosine_projections_on_albef(albef):
    import copy

    from vlcp.models.albef import CosineLinear
    model, tok = copy.deepcopy(albef[0]), albef[1]
    before = {n: model.get_parameter(f"{n}.weight").detach().clone() for n in ("vision_proj", "text_proj")}
    cls = get_method("lucir")
    m = cls(cls.Config(buffer_size=6))
    m.prepare_model(model)
    for n in ("vision_proj", "text_proj"):
        layer = getattr(model, n)
        assert isinstance(layer, CosineLinear) and layer.sigma.item() == 1.0
        assert torch.equal(layer.weight, before[n]) and f"{n}.bias" not in model.state_dict()
    images, tokens = torch.randn(3, 3, 32, 32), tok(CORPUS[:3])
    raw = model.encode_image(images)
    emb = model.image_embeds(images)[:, 0]
    assert torch.allclose(raw, ctp_cosine_linear_forward(emb, model.vision_proj.weight, model.vision_proj.sigma), atol=1e-6)
    s = _train(model, m, _ctx(tok, 0), steps=2)                          # trains through the new layers
    assert {"clip", "mlm"} <= set(s["terms"])
    # a CLIP has no such layers: left as it is
    from vlcp.models import create_clip
    clip = create_clip("vlcp-tiny")[0]
    names = set(clip.state_dict())
    cls().prepare_model(clip)
    assert set(clip.state_dict()) == names


def test_mas_importance_on_albef_equals_the_ctp_code(albef):
    import copy

    from test_ctp_baselines import mas_importance_against_the_ctp_code
    model, tok = copy.deepcopy(albef[0]), albef[1]
    m = mas_importance_against_the_ctp_code(model, lambda ids, g: _ctx(tok, 0).materialize(ids, g), batches=2)
    assert m.importance["vision_proj.weight"].abs().sum() > 0 and m.importance["mlm.cls.predictions.bias"].abs().sum() == 0


def test_lucir_and_lwf_run_end_to_end_on_albef_and_resume(emoji_root, tmp_path):
    """LUCIR's CosineLinear projections are installed before the checkpoint loads, so a resumed
    run continues the uninterrupted one; LwF's terms on ALBEF through the runner."""
    cfg = tiny_experiment(emoji_root, "lucir", steps=9, model="albef-tiny", buffer_size=20)
    full = run_experiment(cfg, tmp_path / "full", resume=False)
    assert {"lf", "mlm_kd"} <= set(full["train"][-1]["terms"])
    run_experiment(cfg, tmp_path / "part", stop_after_task=0, resume=False)
    state = torch.load(tmp_path / "part" / "checkpoint.pt", weights_only=True)["model"]
    assert "vision_proj.sigma" in state and "vision_proj.bias" not in state
    resumed = run_experiment(cfg, tmp_path / "part")
    assert [t["terms"] for t in resumed["train"]] == [t["terms"] for t in full["train"]]
    lwf = run_experiment(tiny_experiment(emoji_root, "lwf", steps=9, model="albef-tiny"), tmp_path / "lwf")
    assert {"lwf", "lwf_mlm"} <= set(lwf["train"][-1]["terms"])
