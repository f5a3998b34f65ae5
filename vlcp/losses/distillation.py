"""Distillation and generation losses (pure functions).

`cross_modal_kd` is IncCLIP's multi-modal knowledge distillation (its Eqs. 7-9): the previous
model's image→text and text→image distributions over the batch are targets for the current
model's, by KL divergence (on one batch the same quantity as CTP's cross-modal topology loss L_c,
`vlcp.losses.topology`). `lwf_feature_kd` is the
CTP code's LwF: per-sample KL over the feature dimensions of the raw projected features.
`score_band_loss` is IncCLIP's margin loss for pseudo negative texts
(Eq. 1): it is zero while each image–text cosine lies in [s_min, s_max]."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def kl_rows(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(softmax(teacher) || softmax(student))."""
    return F.kl_div(F.log_softmax(student_logits, 1), F.log_softmax(teacher_logits, 1),
                    reduction="batchmean", log_target=True)


def cross_modal_kd(img: torch.Tensor, txt: torch.Tensor, old_img: torch.Tensor, old_txt: torch.Tensor,
                   scale: torch.Tensor, old_scale: torch.Tensor | float,
                   extra_txt: torch.Tensor | None = None, old_extra_txt: torch.Tensor | None = None) -> torch.Tensor:
    """(KL_i2t + KL_t2i) / 2 between the previous (teacher) and current (student) models on
    one batch of unit features. `extra_txt` (pseudo texts) join the image→text columns of both."""
    cols = txt if extra_txt is None else torch.cat([txt, extra_txt])
    old_cols = old_txt if old_extra_txt is None else torch.cat([old_txt, old_extra_txt])
    i2t = kl_rows(scale * img @ cols.T, old_scale * old_img @ old_cols.T)
    t2i = kl_rows(scale * txt @ img.T, old_scale * old_txt @ old_img.T)
    return (i2t + t2i) / 2


def lwf_feature_kd(img: torch.Tensor, txt: torch.Tensor, old_img: torch.Tensor, old_txt: torch.Tensor,
                   temperature: float = 0.07) -> torch.Tensor:
    """LwF as the CTP code implements it (KevinLight831/CTP, models/clip_pretrain.py,
    `LWF_forward`; CTP supplement B.1: "align the image and text representation of the reference
    and current model"): per sample, the previous (teacher) model's *unnormalised* projected
    feature is the target for the current model's, each turned into a distribution over the
    feature dimensions by softmax(feature / τ) (dim 1, not over the batch); KL(teacher ‖ student)
    averaged over the batch, (KL_image + KL_text) / 2. τ = 0.07, the ITA temperature."""
    def kl(new, old):
        return kl_rows(new.float() / temperature, old.float() / temperature)
    return (kl(img, old_img) + kl(txt, old_txt)) / 2


def score_band_loss(scores: torch.Tensor, s_min: float, s_max: float) -> torch.Tensor:
    """Mean of relu(s - s_max) + relu(s_min - s): pushes each score into [s_min, s_max]."""
    return (F.relu(scores - s_max) + F.relu(s_min - scores)).mean()


# --------------------------------------------------------------- baselines adapted to CLIP

def cosine_distill(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """UCIR's less-forget constraint: mean over rows of 1 - cos(new_i, old_i)."""
    return (1 - F.cosine_similarity(new, old, dim=-1)).mean()


def margin_ranking(img: torch.Tensor, txt: torch.Tensor, rows: torch.Tensor, margin: float = 0.5,
                   k: int = 2) -> torch.Tensor:
    """UCIR's inter-class separation, for image→text matching: for each image row in `rows`
    (bool [B]; UCIR: the replayed old samples), its paired text's cosine must beat each of the
    k hardest other texts of the batch by `margin`: mean of relu(margin - s_pos + s_neg)."""
    if not rows.any():
        return img.sum() * 0
    sims = img[rows] @ txt.T                                        # [R, B]
    idx = rows.nonzero().squeeze(1)
    pos = sims.gather(1, idx[:, None])
    neg = sims.scatter(1, idx[:, None], float("-inf")).topk(min(k, sims.shape[1] - 1), dim=1).values
    return F.relu(margin - pos + neg).mean()


def _orth_complement(p: torch.Tensor) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.cat([p, torch.eye(p.shape[0], dtype=p.dtype, device=p.device)], 1))
    return q[:, p.shape[1]:]


def geodesic_flow_kernel(p1: torch.Tensor, p2: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The geodesic flow kernel Q (D×D) between the subspaces with orthonormal bases p1, p2
    (D×d), closed form of Gong et al. (CVPR 2012), as GeoDL (Simon et al., CVPR 2021) uses it:
    x^T Q y integrates <Φ(t)^T x, Φ(t)^T y> over t in [0, 1] along the geodesic Φ from span(p1)
    to span(p2). This is the integral itself (half the Λs as Gong et al. print them), so equal
    subspaces give the projection Q = p1 p1^T."""
    r1 = _orth_complement(p1)
    u1, gamma, vh = torch.linalg.svd(p1.T @ p2)
    gamma = gamma.clamp(-1, 1)
    theta = torch.arccos(gamma).clamp_min(eps)
    # R1^T P2 = -U2 Σ V^T with Σ = sin θ
    b = r1.T @ p2 @ vh.T                                            # (D-d)×d = -U2 diag(sin θ)
    sin = torch.sin(theta)
    u2 = -b / sin.clamp_min(eps)
    u2 = torch.where(sin > eps, u2, torch.zeros_like(u2))
    l1 = 0.5 * (1 + torch.sin(2 * theta) / (2 * theta))
    l2 = 0.5 * (torch.cos(2 * theta) - 1) / (2 * theta)
    l3 = 0.5 * (1 - torch.sin(2 * theta) / (2 * theta))
    a, c = p1 @ u1, r1 @ u2                                        # D×d each
    return (a * l1) @ a.T + (a * l2) @ c.T + (c * l2) @ a.T + (c * l3) @ c.T


def _subspace(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Orthonormal basis (D×dim) of the top right-singular directions of a batch x (B×D)."""
    return torch.linalg.svd(x, full_matrices=False)[2][:dim].T


def geodesic_distill(new: torch.Tensor, old: torch.Tensor, dim: int = 8) -> torch.Tensor:
    """GeoDL's distillation: 1 - the similarity of each sample's old and new features along the
    geodesic between the old and new batch subspaces, x_old^T Q x_new / (‖x_old‖_Q ‖x_new‖_Q),
    averaged over the batch. Q is built from detached features (a fixed metric per step)."""
    dim = min(dim, new.shape[0], new.shape[1])
    q = geodesic_flow_kernel(_subspace(old.detach().float(), dim), _subspace(new.detach().float(), dim)).to(new)
    num = ((old @ q) * new).sum(1)
    den = ((old @ q) * old).sum(1).clamp_min(1e-8).sqrt() * ((new @ q) * new).sum(1).clamp_min(1e-8).sqrt()
    return (1 - num / den).mean()


def relation_distill(new: torch.Tensor, old: torch.Tensor, t_new: float = 0.2, t_old: float = 0.01) -> torch.Tensor:
    """Co2L's instance-wise relation distillation: each sample's softmax over its similarities
    to the other samples of the batch (self excluded), old model (temperature t_old) as the
    target for the new (t_new), by KL (Co2L's cross-entropy minus the constant entropy)."""
    n = new.shape[0]
    off = ~torch.eye(n, dtype=torch.bool, device=new.device)
    s_new = (new @ new.T / t_new)[off].view(n, n - 1)
    s_old = (old @ old.T / t_old)[off].view(n, n - 1)
    return kl_rows(s_new, s_old)
