"""CLIP models through open_clip: vlcp's tiny configs (random init) or any open_clip name
with a pretrained tag or a local weights file. Nothing is downloaded unless the user asks for a
tag and has not set HF_HUB_OFFLINE.

open_clip is imported on first use, not with this module: it pulls in torchvision's detection ops
(and through them torch._dynamo) and transformers, about 3 s that `import vlcp.run`, the CLI's
other commands and a report need not pay."""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from pathlib import Path

import torch

from vlcp.errors import VlcpError
from vlcp.models.attention import use_packed_self_attention

CONFIG_DIR = Path(__file__).parent / "configs"
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)   # open_clip.OPENAI_DATASET_MEAN (a test holds them equal)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)    # open_clip.OPENAI_DATASET_STD


def register_configs() -> None:
    """Make vlcp's model configs (`vlcp-tiny`, `vlcp-small`) known to open_clip (idempotent)."""
    import open_clip

    if "vlcp-tiny" not in open_clip.list_models():
        open_clip.add_model_config(CONFIG_DIR)


def _looks_like_path(s: str) -> bool:
    return os.sep in s or s.endswith((".pt", ".pth", ".bin", ".safetensors"))


def create_clip(name: str, pretrained: str | None = None, device: str | torch.device = "cpu",
                image_size: int | None = None):
    """Return (model, tokenizer). `pretrained`: None (random init), a tag, or a local file.
    `image_size`: build the image tower for this input size (open_clip's `force_image_size`;
    pretrained ViT position embeddings are interpolated by open_clip on load)."""
    import open_clip

    register_configs()
    if name not in open_clip.list_models():
        raise VlcpError(f"model.name: unknown open_clip model {name!r}")
    if pretrained and _looks_like_path(pretrained) and not os.path.exists(pretrained):
        raise VlcpError(f"model.pretrained: {pretrained} not found; put the weights file there "
                        "(docs/paper-scale.md, 'Weights')")
    if pretrained and not _looks_like_path(pretrained):
        tags = open_clip.list_pretrained_tags_by_model(name)
        if pretrained not in tags:
            raise VlcpError(f"model.pretrained: {pretrained!r} is not a tag of {name} (tags: {', '.join(tags) or 'none'})")

    try:
        with without_random_init_warning():
            model = open_clip.create_model(name, pretrained=pretrained, device=device, force_image_size=image_size)
    except Exception as e:  # hub offline, corrupt file, ...
        if pretrained is None:
            raise
        if not _looks_like_path(pretrained) and os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
            raise VlcpError(f"model.pretrained: {pretrained!r} is an open_clip tag whose weights are not in the local "
                            f"cache, and vlcp runs offline (HF_HUB_OFFLINE=1): download them once "
                            f"(open_clip.create_model({name!r}, pretrained={pretrained!r}) with HF_HUB_OFFLINE=0) or "
                            "pass a weights file's path (docs/paper-scale.md, 'Weights')") from None
        raise VlcpError(f"model.pretrained: could not load {pretrained!r} for {name}: {e}") from None
    if pretrained is None:
        note_random_init(name)
    use_packed_self_attention(model)   # the same floats, without select_backward's fills in every backward
    return model, open_clip.get_tokenizer(name)


@functools.lru_cache(maxsize=None)
def note_random_init(name: str) -> None:
    """Say once per process and model that it starts from random weights (open_clip warns
    'No pretrained weights loaded ... initialized randomly' at every build, which alarms more than
    it tells): by design for vlcp's own configs (the tiny profile's models), and for any other
    open_clip architecture with how to give it weights."""
    if (CONFIG_DIR / f"{name}.json").is_file():
        why = "model.pretrained is not set; expected for the tiny profile's models"
    else:
        why = ("no weights given: pass a weights file with --pretrained FILE, or set model.pretrained, to start "
               "from trained weights")
    print(f"vlcp: {name} starts from random weights ({why})", file=sys.stderr)


class _DropRandomInit(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "initialized randomly" not in record.getMessage()


@contextlib.contextmanager
def without_random_init_warning():
    """open_clip logs its random-init warning on the root logger: drop that record only."""
    root, drop = logging.getLogger(), _DropRandomInit()
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)


def encode_text_embeddings(model, embeddings: torch.Tensor, pool_tokens: torch.Tensor,
                           normalize: bool = True) -> torch.Tensor:
    """open_clip's `CLIP.encode_text` from token *embeddings* [B, ctx, width] instead of token ids,
    so texts can be optimised in embedding space (IncCLIP's pseudo texts). `pool_tokens` are
    token ids whose end-of-text position selects the pooled feature, as `encode_text` does."""
    cast_dtype = model.transformer.get_cast_dtype()
    x = embeddings.to(cast_dtype) + model.positional_embedding.to(cast_dtype)
    x = model.transformer(x, attn_mask=model.attn_mask)
    x = text_head(model, model.ln_final(x), pool_tokens)
    return torch.nn.functional.normalize(x, dim=-1) if normalize else x


def text_head(model, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The end of open_clip's `CLIP.encode_text` after its final LayerNorm: `hidden` [B, ctx,
    width] pooled at the end-of-text position of `tokens` and projected; unnormalised."""
    from open_clip.transformer import text_global_pool

    x = text_global_pool(hidden, tokens, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
    if model.text_projection is not None:
        x = model.text_projection(x) if isinstance(model.text_projection, torch.nn.Linear) else x @ model.text_projection
    return x
