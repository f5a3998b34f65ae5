from vlcp.losses.contrastive import clip_loss, gather_features
from vlcp.losses.mlm import mask_tokens, mlm_loss, soft_distill
from vlcp.losses.distillation import (cosine_distill, cross_modal_kd, geodesic_distill, geodesic_flow_kernel, kl_rows,
                                      lwf_feature_kd, margin_ranking, relation_distill, score_band_loss)

__all__ = ["clip_loss", "cosine_distill", "cross_modal_kd", "gather_features", "geodesic_distill",
           "geodesic_flow_kernel", "kl_rows", "lwf_feature_kd", "margin_ranking", "mask_tokens", "mlm_loss", "relation_distill", "score_band_loss", "soft_distill"]
