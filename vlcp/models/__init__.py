import torch
import torch.nn.functional as F

from vlcp.models.clip import create_clip, register_configs


def multimodal_features(model: torch.nn.Module, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Normalised multi-modal (image + text) features: ALBEF's fused [CLS] when the model has
    a fusion encoder (`encode_multimodal`), else the normalised sum of the normalised image and
    text features (CLIP's stand-in, as the evaluator's multi-modal retrieval uses)."""
    if hasattr(model, "encode_multimodal"):
        return model.encode_multimodal(images, tokens, normalize=True)
    return F.normalize(model.encode_image(images, normalize=True) + model.encode_text(tokens, normalize=True), dim=-1)


__all__ = ["create_clip", "multimodal_features", "register_configs"]
