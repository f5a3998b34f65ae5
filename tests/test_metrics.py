"""Metrics against hand-computed cases."""
import math

import pytest
import torch

from vlcp.eval import continual
from vlcp.eval.retrieval import (NO_MATCH, RANK_GALLERY, average_precision, cross_modal, match_ranks, mean_average_precision,
                                 ranked_hits, recall_at_k, recall_from_ranks)
from vlcp.eval.zeroshot import topk_accuracy


def onehot(rows):
    return torch.tensor(rows, dtype=torch.float)


def test_recall_one_to_one():
    # 3 images vs 3 texts; image 0 ranks its text first, image 1 second, image 2 third
    img = onehot([[1, 0, 0], [0.5, 0.4, 0], [0.3, 0.2, 0.1]])
    txt = torch.eye(3)
    hits = ranked_hits(img, txt, torch.arange(3), torch.arange(3), k=3)
    assert hits.tolist() == [[True, False, False], [False, True, False], [False, False, True]]
    assert recall_at_k(hits, (1, 2, 3)) == pytest.approx({1: 100 / 3, 2: 200 / 3, 3: 100.0})


def test_match_ranks_by_hand_and_against_top_k():
    # image 0's text ranks first, image 1's second, image 2's third; image 3 has no text
    img = onehot([[1, 0, 0], [0.5, 0.4, 0], [0.3, 0.2, 0.1], [0, 0, 1]])
    ranks = match_ranks(img, torch.eye(3), torch.tensor([0, 1, 2, 7]), torch.arange(3), chunk=3)
    assert ranks.tolist() == [0, 1, 2, NO_MATCH]
    assert recall_from_ranks(ranks, (1, 2, 3)) == pytest.approx({1: 25.0, 2: 50.0, 3: 75.0})
    assert match_ranks(img, torch.zeros(0, 3), torch.arange(4), torch.zeros(0, dtype=torch.long)).tolist() == [NO_MATCH] * 4
    # several matches per query, random scores (no ties): the same recall as walking the top K
    g = torch.Generator().manual_seed(0)
    q, gal = torch.randn(50, 8, generator=g), torch.randn(40, 8, generator=g)
    ql, gl = torch.randint(0, 12, (50,), generator=g), torch.randint(0, 10, (40,), generator=g)
    assert recall_from_ranks(match_ranks(q, gal, ql, gl, chunk=7)) == recall_at_k(ranked_hits(q, gal, ql, gl, 10))
    big = torch.randn(RANK_GALLERY + 60, 8, generator=g)              # cross_modal walks the top K on large galleries
    bl = torch.randint(0, 40, (len(big),), generator=g)
    out = cross_modal(q, big, ql, bl)
    assert [out[f"TR@{k}"] for k in (1, 5, 10)] == list(recall_from_ranks(match_ranks(q, big, ql, bl)).values())
    assert [out[f"IR@{k}"] for k in (1, 5, 10)] == list(recall_at_k(ranked_hits(big, q, bl, ql, 10)).values())


def test_cross_modal_several_images_per_text():
    # texts A, B; images a1, a2 (of A) and b1 (of B). Text A's nearest image is b1 -> IR@1 misses.
    txt = onehot([[1, 0], [0, 1]])
    img = onehot([[0.9, 0.1], [0.2, 0.1], [0.95, 0.9]])
    out = cross_modal(img, txt, image_labels=torch.tensor([0, 0, 1]), text_labels=torch.tensor([0, 1]), ks=(1, 2))
    # image->text top-1: a1->A ok, a2->A ok, b1->A wrong (0.95 > 0.9)
    assert out["TR@1"] == pytest.approx(200 / 3)
    assert out["TR@2"] == pytest.approx(100.0)
    # text A ranks b1 (0.95), a1 (0.9): R@1 miss, R@2 hit; text B ranks b1 first: hit
    assert out["IR@1"] == pytest.approx(50.0)
    assert out["IR@2"] == pytest.approx(100.0)
    assert out["Rm"] == pytest.approx((200 / 3 + 100 + 50 + 100) / 4)


def test_average_precision_both_normalisers():
    hits = torch.tensor([[True, False, True, False, False]])
    n_rel = torch.tensor([3])
    # standard: (P@1 + P@3) / min(5, 3) = (1 + 2/3) / 3
    assert average_precision(hits, n_rel, 5, "standard").item() == pytest.approx((1 + 2 / 3) / 3)
    # CTP code: walk min(5, 3) = 3 ranks, divide by the 2 hits found there
    assert average_precision(hits, n_rel, 5, "hits").item() == pytest.approx((1 + 2 / 3) / 2)
    # one relevant item at rank 2: standard 1/2; CTP walks only rank 1 -> 0
    hits2 = torch.tensor([[False, True, False]])
    assert average_precision(hits2, torch.tensor([1]), 3, "standard").item() == pytest.approx(0.5)
    assert average_precision(hits2, torch.tensor([1]), 3, "hits").item() == pytest.approx(0.0)
    # a single hit at rank 1 then misses: CTP gives 1.0 (inflated), standard 1/min(N, |rel|)
    hits3 = torch.tensor([[True, False, False]])
    assert average_precision(hits3, torch.tensor([3]), 3, "hits").item() == pytest.approx(1.0)
    assert average_precision(hits3, torch.tensor([3]), 3, "standard").item() == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        average_precision(hits, n_rel, 5, "other")


def test_mean_average_precision_from_features():
    # query of class 0; gallery ranked by similarity: class 0, class 1, class 0
    q = onehot([[1.0, 0.0]])
    g = onehot([[0.9, 0], [0.8, 0], [0.7, 0]])
    out = mean_average_precision(q, g, torch.tensor([0]), torch.tensor([0, 1, 0]), ns=(1, 3))
    assert out[1] == pytest.approx(100.0)
    assert out[3] == pytest.approx(100 * (1 + 2 / 3) / 2)


def test_continual_metrics_hand_computed():
    a = [[50, 10, 5],
         [40, 60, 8],
         [30, 45, 70]]
    assert continual.final_average(a) == pytest.approx((30 + 45 + 70) / 3)
    assert continual.average_incremental(a) == pytest.approx((50 + 50 + (30 + 45 + 70) / 3) / 3)
    # forgetting: task 0 max(50, 40) - 30 = 20; task 1 max(10, 60) - 45 = 15
    assert continual.forgetting(a) == pytest.approx(17.5)
    # BWT: (30 - 50 + 45 - 60) / 2
    assert continual.bwt(a) == pytest.approx(-17.5)
    assert continual.forgetting([[1.0]]) == 0.0
    # CTP's BWT on cumulative pools: ((50-30) + (55-40) + 0) / 2
    assert continual.ctp_bwt([50, 55, 60], [30, 40, 60]) == pytest.approx(17.5)


def test_topk_accuracy():
    feats = onehot([[1, 0, 0], [0, 1, 0], [0, 0.4, 0.6]])
    weights = torch.eye(3)
    acc = topk_accuracy(feats, weights, torch.tensor([0, 2, 1]), ks=(1, 2))
    assert acc[1] == pytest.approx(100 / 3)
    assert acc[2] == pytest.approx(200 / 3)


def test_chunking_does_not_change_results():
    g = torch.Generator().manual_seed(0)
    img = torch.nn.functional.normalize(torch.randn(300, 16, generator=g), dim=-1)
    txt = torch.nn.functional.normalize(img + 0.8 * torch.randn(300, 16, generator=g), dim=-1)
    lab = torch.arange(300)
    assert cross_modal(img, txt, lab, lab, chunk=7) == cross_modal(img, txt, lab, lab, chunk=1000)
    cls = torch.randint(0, 5, (300,), generator=g)
    a = mean_average_precision(img[:50], txt, cls[:50], cls, chunk=3)
    b = mean_average_precision(img[:50], txt, cls[:50], cls, chunk=500)
    assert all(math.isclose(a[k], b[k]) for k in a)


def test_memo_tokenizer_matches_tokenizer():
    import open_clip
    from vlcp.eval.encode import MemoTokenizer
    tok = open_clip.SimpleTokenizer(context_length=24)
    memo = MemoTokenizer(tok)
    texts = ["an emoji of a cat", "a dog", "an emoji of a cat"]
    assert torch.equal(memo(texts), tok(texts))
    assert torch.equal(memo(["a dog"]), tok(["a dog"]))   # served from the cache
    assert len(memo._rows) == 2 and memo([]).shape == (0, tok.context_length)


def test_text_cache_encodes_each_text_once_with_the_same_features():
    """Evaluation's sets share their captions (the unseen style holds every item): one round encodes
    each distinct text once, and a text's feature does not depend on the batch it was encoded in,
    so the scores are bit for bit those of encoding every set on its own."""
    import random
    from vlcp.eval.encode import MemoTokenizer, encode_texts
    from vlcp.models.clip import create_clip
    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    model.eval()
    tok = MemoTokenizer(tok)
    words = "grinning face cat heart red blue star moon flag of house tree dog".split()
    rng = random.Random(0)
    texts = [" ".join(rng.choices(words, k=rng.randint(2, 9))) for _ in range(300)]
    sets = [texts[:40], texts, texts[100:117] + texts[:3]]   # overlapping, as test / unseen style / query
    rows = []
    encode_text = model.encode_text
    model.encode_text = lambda t, normalize=False: rows.append(len(t)) or encode_text(t, normalize=normalize)
    plain = [torch.cat(encode_texts(model, tok, s, "cpu", batch_size=64)) for s in sets]
    rows.clear()
    cache = {}
    cached = [torch.cat(encode_texts(model, tok, s, "cpu", batch_size=64, cache=cache)) for s in sets]
    assert sum(rows) == len(set(texts))
    for a, b in zip(plain, cached):
        assert torch.equal(a, b)
    assert encode_texts(model, tok, [], "cpu", cache=cache) == []
