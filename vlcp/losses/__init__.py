from vlcp.losses.contrastive import clip_loss, gather_features
from vlcp.losses.distillation import cross_modal_kd, kl_rows, score_band_loss

__all__ = ["clip_loss", "cross_modal_kd", "gather_features", "kl_rows", "score_band_loss"]
