"""Encode pair sets with a CLIP model: the image and text features evaluation scores
(`Encoded`, `encode`), CLIP's image normalisation (`normalise_images`), a tokenizer that
tokenizes each distinct text once (`MemoTokenizer`) and a model's state, to tell when features
computed from it may be reused (`Snapshot`)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vlcp.data.pairs import PairSet
from vlcp.errors import require_finite
from vlcp.models.clip import OPENAI_MEAN, OPENAI_STD


@dataclass
class Encoded:
    image: torch.Tensor       # [M, D] normalised
    text: torch.Tensor        # [N, D] normalised
    pairs: PairSet


def normalise_images(images: torch.Tensor) -> torch.Tensor:
    """uint8 [N, S, S, 3] -> float [N, 3, S, S] with CLIP's normalisation."""
    mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)
    return (images.permute(0, 3, 1, 2).float() / 255.0 - mean) / std


@torch.no_grad()
def encode_texts(model, tokenizer, texts: list[str], device, batch_size: int = 512,
                 cache: dict[str, torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The normalised text features of `texts`, in batches (a list of [n, D] tensors). `cache`
    ({text: feature}, kept by the caller for one model state, e.g. one evaluation round): each
    distinct text is encoded once; the emoji benchmark's evaluation sets share their captions (a
    text's feature does not depend on the batch it is encoded in: tests/test_metrics.py)."""
    if cache is None:
        return [model.encode_text(tokenizer(texts[s:s + batch_size]).to(device), normalize=True).float().cpu()
                for s in range(0, len(texts), batch_size)]
    new = [t for t in dict.fromkeys(texts) if t not in cache]
    for s in range(0, len(new), batch_size):
        batch = new[s:s + batch_size]
        cache.update(zip(batch, model.encode_text(tokenizer(batch).to(device), normalize=True).float().cpu()))
    return [torch.stack([cache[t] for t in texts])] if texts else []


@torch.no_grad()
def encode(model, tokenizer, pairs: PairSet, device, batch_size: int = 512,
           text_cache: dict[str, torch.Tensor] | None = None) -> Encoded:
    """Features of every image and text of `pairs`. `text_cache`: see `encode_texts`."""
    img = []
    for s in range(0, len(pairs.images), batch_size):
        x = normalise_images(pairs.images[s:s + batch_size])
        img.append(model.encode_image(x.to(device), normalize=True).float().cpu())
    txt = encode_texts(model, tokenizer, list(pairs.texts), device, batch_size, text_cache)
    d = model.text_projection.shape[1] if hasattr(model, "text_projection") else 0
    cat = lambda xs, what: require_finite(torch.cat(xs) if xs else torch.zeros(0, d), what)  # noqa: E731
    return Encoded(cat(img, "image features"), cat(txt, "text features"), pairs)


@torch.no_grad()
def encode_multimodal(model, tokenizer, pairs: PairSet, device, batch_size: int = 512,
                      text_cache: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """The normalised multi-modal feature of every image of `pairs` with its caption [M, D]: a
    fusion encoder's (ALBEF's fused [CLS], `encode_multimodal`; its unimodal features are not
    computed), else the normalised sum of the normalised image and caption features (CLIP's
    stand-in, as `vlcp.models.multimodal_features`). `text_cache`: see `encode_texts`."""
    if not hasattr(model, "encode_multimodal"):
        enc = encode(model, tokenizer, pairs, device, batch_size, text_cache)
        return F.normalize(enc.image + enc.text[pairs.image_text], dim=-1)
    mm = []
    for s in range(0, len(pairs.images), batch_size):
        x = normalise_images(pairs.images[s:s + batch_size]).to(device)
        t = tokenizer([pairs.texts[i] for i in pairs.image_text[s:s + batch_size].tolist()]).to(device)
        mm.append(model.encode_multimodal(x, t, normalize=True).float().cpu())
    return require_finite(torch.cat(mm), "multi-modal features") if mm else torch.zeros(0, 0)


class MemoTokenizer:
    """Tokenizes each distinct text once: evaluation re-encodes the same texts (and zero-shot
    prompts) after every task, and open_clip's BPE tokenizer is pure Python."""

    def __init__(self, tokenizer):
        self.tokenizer, self.context_length = tokenizer, tokenizer.context_length
        self._rows: dict[str, torch.Tensor] = {}

    def __call__(self, texts: str | list[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if new:
            self._rows.update(zip(new, self.tokenizer(new)))
        return torch.stack([self._rows[t] for t in texts]) if texts else torch.zeros(0, self.context_length, dtype=torch.long)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes (on the CPU), for a bit-for-bit comparison (-0.0 is not 0.0, a NaN is itself)."""
    return t.detach().to("cpu").reshape(-1).view(torch.uint8)


MODULE_STATE = ("_parameters", "_buffers", "_modules", "training")   # not attributes: compared as tensors (the
#                                                                      training flag: evaluation sets it)


def _state(model: torch.nn.Module, skip: tuple[str, ...]) -> tuple[list, tuple]:
    """(the tensors, [(name, tensor)]: parameters, buffers and tensor attributes whose names do not
    start with `skip`; the rest, as a comparable tuple: every module's name, type and other
    attributes by repr, hooks and configs included, and the autocast state)."""
    tensors = [(n, t) for n, t in [*model.named_parameters(), *model.named_buffers()] if not n.startswith(skip)]
    rest = []
    for name, module in model.named_modules():
        attrs = [(k, v) for k, v in vars(module).items() if k not in MODULE_STATE]
        tensors += [(f"{name}.{k}" if name else k, v) for k, v in attrs if isinstance(v, torch.Tensor)
                    and not f"{name}.{k}".startswith(skip)]
        rest.append((name, type(module), tuple((k, repr(v)) for k, v in attrs if not isinstance(v, torch.Tensor))))
    kind = next((t.device.type for t in model.parameters()), "cpu")
    return tensors, (kind, torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind), tuple(rest))


class Snapshot:
    """A model's state at one moment: a copy (on the CPU) of its parameters, buffers and tensor
    attributes (those whose names do not start with `skip`), and its modules' types, other
    attributes and autocast state, to tell whether features computed from the model still hold:
    `matches(model)` is true when `model` (this one or another) is in that state, bit for bit.
    (Version counters cannot tell: torch's fused AdamW steps do not advance them.)"""

    def __init__(self, model: torch.nn.Module, skip: tuple[str, ...] = ()):
        self.skip = skip
        tensors, self._rest = _state(model, skip)
        self._bits = {n: (t.shape, t.dtype, _bits(t).clone()) for n, t in tensors}

    def matches(self, model: torch.nn.Module) -> bool:
        tensors, rest = _state(model, self.skip)
        if rest != self._rest or [n for n, _ in tensors] != list(self._bits):
            return False
        return all((t.shape, t.dtype) == self._bits[n][:2] and torch.equal(self._bits[n][2], _bits(t))
                   for n, t in tensors)
