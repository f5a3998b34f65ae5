from vlcp.losses.contrastive import clip_loss, gather_features

__all__ = ["clip_loss", "gather_features"]
