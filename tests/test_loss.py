"""The contrastive loss against open_clip's ClipLoss."""
import pytest
import torch
from open_clip.loss import ClipLoss

from vlcp.losses import clip_loss


def feats(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=-1)


def test_matches_open_clip_cliploss_value_and_grad():
    img, txt = feats(32, 16, 0).requires_grad_(), feats(32, 16, 1).requires_grad_()
    scale = torch.tensor(14.3)
    ours = clip_loss(img, txt, scale)
    ref = ClipLoss()(img, txt, scale)
    torch.testing.assert_close(ours, ref)
    g_ours = torch.autograd.grad(ours, [img, txt])
    g_ref = torch.autograd.grad(ClipLoss()(img, txt, scale), [img, txt])
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b)


def test_extra_text_negatives_only_affect_image_to_text():
    img, txt = feats(8, 16, 2), feats(8, 16, 3)
    extra = feats(4, 16, 4)
    scale = torch.tensor(10.0)
    base = clip_loss(img, txt, scale)
    with_extra = clip_loss(img, txt, scale, extra_text=extra)
    assert with_extra > base  # more negatives -> larger i2t cross-entropy
    # the t2i half is unchanged: recompute it by hand
    labels = torch.arange(8)
    t2i = torch.nn.functional.cross_entropy(scale * txt @ img.T, labels)
    i2t = torch.nn.functional.cross_entropy(scale * img @ torch.cat([txt, extra]).T, labels)
    torch.testing.assert_close(with_extra, (i2t + t2i) / 2)


def test_reduction_none_gives_each_pairs_row_whose_mean_is_the_loss():
    """CLL-CLIP Fig. 3's per-sample Fisher trace needs pair i's loss: (image i's image→text
    cross-entropy + text i's text→image one) / 2, with and without multi-positive pair ids."""
    torch.manual_seed(0)
    img = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    txt = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    scale = torch.tensor(10.0)
    logits = scale * img @ txt.T
    labels = torch.arange(6)
    by_hand = (torch.nn.functional.cross_entropy(logits, labels, reduction="none")
               + torch.nn.functional.cross_entropy(logits.T, labels, reduction="none")) / 2
    rows = clip_loss(img, txt, scale, reduction="none")
    assert rows.shape == (6,) and torch.allclose(rows, by_hand)
    assert torch.allclose(rows.mean(), clip_loss(img, txt, scale))
    ids = torch.tensor([0, 0, 1, 2, 2, 3])
    assert torch.allclose(clip_loss(img, txt, scale, pair_ids=ids, reduction="none").mean(),
                          clip_loss(img, txt, scale, pair_ids=ids))
    with pytest.raises(ValueError, match="anchors"):
        clip_loss(img, txt, scale, anchors=torch.ones(6, dtype=torch.bool), reduction="none")
    with pytest.raises(ValueError, match="reduction must be"):
        clip_loss(img, txt, scale, reduction="sum")
