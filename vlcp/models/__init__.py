import torch
import torch.nn.functional as F

from vlcp.models.albef import create_albef, is_albef
from vlcp.models.clip import create_clip, register_configs


def create_model(name: str, pretrained: str | None = None, device: str | torch.device = "cpu",
                 image_size: int | None = None, corpus: list[str] | None = None):
    """(model, tokenizer) for a model name: one of vlcp's ALBEF configs (`albef-tiny`, ...;
    `corpus` trains its vocab when there are no pretrained weights), or any CLIP that open_clip
    knows (vlcp's tiny configs included)."""
    if is_albef(name):
        return create_albef(name, pretrained, device, image_size, corpus)
    return create_clip(name, pretrained, device, image_size)


def multimodal_features(model: torch.nn.Module, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Normalised multi-modal (image + text) features: ALBEF's fused [CLS] when the model has
    a fusion encoder (`encode_multimodal`), else the normalised sum of the normalised image and
    text features (CLIP's stand-in, as the evaluator's multi-modal retrieval uses)."""
    if hasattr(model, "encode_multimodal"):
        return model.encode_multimodal(images, tokens, normalize=True)
    return F.normalize(model.encode_image(images, normalize=True) + model.encode_text(tokens, normalize=True), dim=-1)


__all__ = ["create_albef", "create_clip", "create_model", "multimodal_features", "register_configs"]
