"""Export a CLIP that a vlcp method trained as a plain open_clip model: a state dict that
`open_clip.create_model(name, pretrained=FILE)` loads strictly and that computes what the
trained model computes, so the result of `vlcp update` is usable without vlcp.

A vlcp method may have changed the open_clip CLIP in place (`prepare_model`):
- peft adapters (LoRA, DoRA, VeRA; `vlcp.models.adapters.inject_peft`) wrap Linear layers in
  peft tuner layers: each is merged into its base weights and replaced by its base layer;
- the adapter methods rebuild each block's `nn.MultiheadAttention` as `ProjectedAttention`
  (`vlcp.models.adapters.project_attention`; keys `attn.qkv.*`, `attn.proj.*`): each is rebuilt as the
  `nn.MultiheadAttention` open_clip builds (keys `attn.in_proj_*`, `attn.out_proj.*`);
- BitFit, LNFit and locked towers only change `requires_grad`; weight merges leave plain weights.

Everything happens on a deep copy: the live model (still training, or evaluated next) is never
changed.
"""
from __future__ import annotations

import copy
import os
import re
import warnings
from pathlib import Path

import open_clip
import torch
from torch import nn

from vlcp.errors import VlcpError
from vlcp.models.adapters import ProjectedAttention, adapted_module_names
from vlcp.models.attention import use_torch_attention
from vlcp.utils import atomic_path

# what no open_clip model has: peft's wrappers and adapter tensors (timm towers do have `attn.qkv`, `attn.proj`)
_FOREIGN_KEY = re.compile(r"(^|\.)(base_layer|lora_\w+|vera_\w+)(\.|$)")


def _open_clip_types() -> tuple[type, ...]:
    return tuple(t for t in (getattr(open_clip, n, None) for n in ("CLIP", "CustomTextCLIP", "CoCa"))
                 if isinstance(t, type))


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, module)


def merge_adapters(model: nn.Module) -> list[str]:
    """Merge every peft tuner layer of `model` (outermost ones) into its base layer's weights
    and put the base layer in its place, in place (peft's merge-and-unload, without a
    PeftModel: vlcp injects adapters into the bare CLIP); returns the unwrapped module names.
    A layer whose adapters are disabled is unwrapped unmerged, as its forward ignores them."""
    names = adapted_module_names(model)
    for name in names:
        layer = model.get_submodule(name)
        if layer.disable_adapters:
            if layer.merged:
                layer.unmerge()
            pending = []
        else:
            pending = [a for a in layer.active_adapters if a not in layer.merged_adapters]
        try:
            if hasattr(layer, "unload_and_optionally_merge_module"):   # peft's LoRA on an nn.MultiheadAttention
                base = layer.unload_and_optionally_merge_module(merge=bool(pending), safe_merge=True,
                                                                adapter_names=pending)
            else:
                if pending:
                    layer.merge(safe_merge=True, adapter_names=pending)
                base = layer.get_base_layer()
        except ValueError as e:   # peft's safe_merge: non-finite merged weights
            raise VlcpError(f"export: merging the adapter of {name} failed: {e}") from None
        _set_submodule(model, name, base)
    return names


def to_multihead(attn: nn.Module) -> nn.MultiheadAttention:
    """The `nn.MultiheadAttention` that a `ProjectedAttention` was built from (same heads,
    batch_first, dropout): its `qkv` Linear as the packed in-projection, `proj` as out_proj.
    Built without drawing from the global RNG (the weights are copied)."""
    qkv, proj = attn.qkv, attn.proj
    if type(qkv) is not nn.Linear or type(proj) is not nn.Linear or qkv.bias is None or proj.bias is None:
        raise VlcpError(f"export: ProjectedAttention's qkv/proj must be plain Linear layers with biases (merge the "
                        f"adapters first), got {type(qkv).__name__}/{type(proj).__name__}")
    w = qkv.weight
    mha = nn.utils.skip_init(nn.MultiheadAttention, qkv.in_features, attn.num_heads, dropout=attn.dropout,
                             bias=True, batch_first=attn.batch_first, device=w.device, dtype=w.dtype)
    pairs = [(mha.in_proj_weight, qkv.weight), (mha.in_proj_bias, qkv.bias),
             (mha.out_proj.weight, proj.weight), (mha.out_proj.bias, proj.bias)]
    with torch.no_grad():
        for dst, src in pairs:
            dst.copy_(src)
            dst.requires_grad_(src.requires_grad)
    return mha.train(attn.training)


def restore_attention(model: nn.Module) -> list[str]:
    """Replace, in place, every `ProjectedAttention` of `model` by the equivalent
    `nn.MultiheadAttention` (the inverse of `vlcp.models.adapters.project_attention`);
    returns the replaced module names."""
    names = [n for n, m in model.named_modules() if isinstance(m, ProjectedAttention)]
    for name in names:
        _set_submodule(model, name, to_multihead(model.get_submodule(name)))
    return names


def plain_model(model: nn.Module) -> nn.Module:
    """A deep copy of `model` (a DDP wrapper unwrapped) as open_clip itself builds it: peft
    adapters merged and unwrapped, ProjectedAttention and PackedSelfAttention back to
    nn.MultiheadAttention. `model` is left as it was. VlcpError when it is not an open_clip CLIP."""
    from vlcp.models import unwrap

    model = unwrap(model)
    if not isinstance(model, _open_clip_types()):
        raise VlcpError(f"export: {type(model).__name__} is not an open_clip CLIP; only open_clip models export "
                        "to open_clip's format")
    out = copy.deepcopy(model)
    with torch.no_grad():
        merge_adapters(out)
        restore_attention(out)
    use_torch_attention(out)
    return out


def _plain_tensor(t: torch.Tensor) -> torch.Tensor:
    """Detached, on the CPU, contiguous, owning its storage (torch.save writes a view's whole
    storage), dtype kept."""
    t = t.detach().to("cpu")
    if not t.is_contiguous() or t.untyped_storage().nbytes() != t.numel() * t.element_size():
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def reference_keys(name: str) -> set[str] | None:
    """The state-dict keys of the open_clip model `name` (vlcp's configs included), built on
    the meta device (no weights are allocated or initialised); None, with a warning, when
    open_clip cannot build it here (e.g. a hub config while offline). VlcpError for a name that
    open_clip does not know."""
    from vlcp.models.clip import without_random_init_warning, register_configs

    register_configs()
    if ":" not in name and name not in open_clip.list_models():
        raise VlcpError(f"export: unknown open_clip model {name!r}")
    try:
        with torch.device("meta"), without_random_init_warning():
            ref = open_clip.create_model(name, device="meta")
    except Exception as e:   # noqa: BLE001  (hub offline, a tower open_clip builds only with extra packages, ...)
        warnings.warn(f"export: cannot build open_clip's {name} to check the exported keys ({e}); not checked",
                      stacklevel=3)
        return None
    return set(ref.state_dict())


def _few(keys: list[str], n: int = 5) -> str:
    return ", ".join(keys[:n]) + (f" (+{len(keys) - n} more)" if len(keys) > n else "") if keys else "none"


def check_keys(state: dict, name: str) -> None:
    """VlcpError naming the unexpected and missing keys when `state`'s keys are not those of
    open_clip's `name` (skipped, with a warning, where open_clip cannot build `name` here)."""
    ref = reference_keys(name)
    if ref is None:
        return
    unexpected, missing = sorted(set(state) - ref), sorted(ref - set(state))
    if unexpected or missing:
        raise VlcpError(f"export: the state dict does not match open_clip's {name}: "
                        f"unexpected keys: {_few(unexpected)}; missing keys: {_few(missing)}")


def export_state_dict(model: nn.Module, name: str | None = None) -> dict[str, torch.Tensor]:
    """`model`'s weights as a plain open_clip state dict (open_clip's own keys; tensors
    detached, on the CPU, contiguous, in the model's dtype), adapters merged (`plain_model`).
    With `name` (the open_clip architecture, e.g. "ViT-B-32" or "vlcp-tiny"), the keys are
    checked against what `open_clip.create_model(name)` builds: VlcpError listing the
    unexpected and missing ones. `model` is not changed."""
    state = {k: _plain_tensor(v) for k, v in plain_model(model).state_dict().items()}
    foreign = [k for k in state if _FOREIGN_KEY.search(k)]
    if foreign:
        raise VlcpError(f"export: adapter keys remain after merging: {', '.join(foreign[:5])}")
    if name:
        check_keys(state, name)
    return state


def save_open_clip(model: nn.Module, path: str | os.PathLike, name: str | None = None) -> None:
    """Write `export_state_dict(model, name)` to `path` with torch.save, atomically (a reader
    sees the old file or the whole new one): `open_clip.create_model(name, pretrained=path)`
    loads it."""
    state = export_state_dict(model, name)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_open_clip(name: str, path: str | os.PathLike, device: str | torch.device = "cpu",
                   image_size: int | None = None):
    """(model, tokenizer): open_clip's `name` with the weights file at `path` (what
    `save_open_clip` wrote), through `vlcp.models.create_model`. VlcpError when the file is
    missing or does not fit `name`."""
    from vlcp.models import create_model

    path = Path(path)
    if not path.is_file():
        raise VlcpError(f"{path}: no model file there (expected the open_clip state dict that `vlcp update` writes)")
    return create_model(name, str(path.resolve()), device, image_size)


__all__ = ["export_state_dict", "load_open_clip", "merge_adapters", "plain_model", "restore_attention",
           "save_open_clip"]
