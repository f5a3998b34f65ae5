import contextlib

import torch
import torch.nn.functional as F

from vlcp.errors import ConfigError
from vlcp.models.albef import create_albef, is_albef
from vlcp.models.clip import create_clip, register_configs, text_head


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model a DistributedDataParallel wrapper holds (`vlcp.train.distributed.wrap_ddp`), else `model`."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


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


def set_grad_checkpointing(model: torch.nn.Module, enable: bool = True) -> None:
    """`train.grad_checkpointing`: the model recomputes each transformer block's activations in the
    backward pass instead of keeping them (open_clip's `set_grad_checkpointing`, both towers): less
    memory, one more forward of the blocks, the same gradients."""
    if not hasattr(model, "set_grad_checkpointing"):
        raise ConfigError(f"train.grad_checkpointing: {type(model).__name__} models have no activation checkpointing; "
                          "it serves open_clip models")
    model.set_grad_checkpointing(enable)


@contextlib.contextmanager
def raw_features(model: torch.nn.Module, tokens: torch.Tensor):
    """Within the block, record the *unnormalised* projected image and text features [B, D]
    that `model`'s forward computes (what the forward returns is their L2-normalised form; CTP's
    `get_raw_feature`): yields a dict that holds "image" and "text" once the forward has run. By
    forward hooks, so the forward may run through a DDP wrapper and is not repeated: ALBEF's (or
    any model's) `vision_proj` and `text_proj` outputs; for an open_clip CLIP, its image tower's
    output (the projection is inside `visual`) and its text features before normalisation
    (`ln_final`'s states pooled at the end of `tokens` and projected, `text_head`)."""
    m, out, hooks = unwrap(model), {}, []

    def keep(key, fn=lambda y: y):
        return lambda _mod, _inp, y: out.__setitem__(key, fn(y))

    if hasattr(m, "vision_proj") and hasattr(m, "text_proj"):
        hooks += [m.vision_proj.register_forward_hook(keep("image")), m.text_proj.register_forward_hook(keep("text"))]
    elif hasattr(m, "visual") and hasattr(m, "ln_final"):
        hooks += [m.visual.register_forward_hook(keep("image")),
                  m.ln_final.register_forward_hook(keep("text", lambda y: text_head(m, y, tokens)))]
    else:
        raise TypeError(f"raw_features: {type(m).__name__} has neither vision_proj/text_proj nor an open_clip CLIP's towers")
    try:
        yield out
    finally:
        for h in hooks:
            h.remove()


__all__ = ["create_albef", "create_clip", "create_model", "multimodal_features", "raw_features", "register_configs",
           "set_grad_checkpointing", "unwrap"]
