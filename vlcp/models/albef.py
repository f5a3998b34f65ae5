"""ALBEF without ITM, the model CTP trains.

- Image encoder: a timm ViT; the [CLS] token goes through `vision_proj` to the ITA space.
- Text encoder: the first `fusion_layer` BERT layers (bidirectional); its [CLS] through `text_proj`.
- Fusion encoder: the remaining BERT layers with cross-attention to all image tokens, built as
  transformers decoder layers with their self-attention switched back to bidirectional
  (`is_causal = False`).
- MLM head: BERT's prediction head (tied to the word embeddings), scored on masked positions only.
  ITA temperature 0.07, fixed (a non-trainable `logit_scale`).

`forward(images, tokens, mlm_input, mlm_mask)` returns `ALBEFOutput` (image features, text
features, logit scale, MLM logits [M, V]), whose first three entries are what a CLIP returns.
The multi-modal retrieval feature is the fused [CLS] of (image, unmasked text)
(`encode_multimodal`). Tokenizer: a WordPiece vocab built from the training captions, or a BERT
directory's. Pretrained weights (`pretrained=` a directory): `bert/` (its first half of the
layers become the text encoder, the second the fusion encoder) and optionally `vit.pth` (a timm
ViT/DeiT checkpoint). Nothing is downloaded.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.errors import VlcpError

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass(frozen=True)
class ALBEFConfig:
    image_size: int = 32
    patch_size: int = 8
    vision_width: int = 64
    vision_layers: int = 2
    vision_heads: int = 2
    text_width: int = 64
    text_layers: int = 4          # BERT layers in all: [0, fusion_layer) text, the rest fusion
    fusion_layer: int = 2
    text_heads: int = 2
    mlp_ratio: int = 4
    embed_dim: int = 64           # ITA projection (256 in CTP)
    context_length: int = 24      # max text tokens (30 in CTP)
    vocab_size: int = 1500        # trained WordPiece vocab size (ignored with a pretrained BERT)
    dropout: float = 0.0          # BERT's hidden and attention dropout (0.1 in BERT-base)
    temperature: float = 0.07


PRESETS = {
    # CPU profile: 4 BERT layers (2 text + 2 fusion) and a 2-layer ViT at 32 px, width 64
    "albef-tiny": ALBEFConfig(),
    # one GPU: bigger, same benchmark
    "albef-small": ALBEFConfig(image_size=64, vision_width=256, vision_layers=6, vision_heads=4, text_width=256,
                               text_layers=6, fusion_layer=3, text_heads=4, embed_dim=128, context_length=30,
                               vocab_size=4000, dropout=0.1),
    # CTP: ViT-B/16 (DeiT-base) + BERT-base split 6/6, 256-d ITA, 30 tokens
    "albef-base": ALBEFConfig(image_size=224, patch_size=16, vision_width=768, vision_layers=12, vision_heads=12,
                              text_width=768, text_layers=12, fusion_layer=6, text_heads=12, embed_dim=256,
                              context_length=30, dropout=0.1),
}


class ALBEFOutput(NamedTuple):
    image_features: torch.Tensor        # [B, D] normalised
    text_features: torch.Tensor         # [B, D] normalised
    logit_scale: torch.Tensor           # 1 / temperature
    mlm_logits: torch.Tensor | None     # [M, V] at the masked positions (row-major)


class WordPieceTokenizer:
    """texts -> long [N, context_length] ([CLS] ... [SEP], padded with [PAD] = 0), the same call
    interface as open_clip's tokenizers."""

    def __init__(self, tok, context_length: int):
        self.tok = tok
        self.context_length = context_length
        tok.enable_truncation(context_length)
        tok.enable_padding(length=context_length, pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
        ids = {s: tok.token_to_id(s) for s in SPECIALS}
        missing = [s for s, i in ids.items() if i is None]
        if missing:
            raise VlcpError(f"tokenizer: vocab lacks the special tokens {missing}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (ids[s] for s in SPECIALS)
        self.vocab_size = tok.get_vocab_size()

    def __call__(self, texts: str | list[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            return torch.zeros(0, self.context_length, dtype=torch.long)
        return torch.tensor([e.ids for e in self.tok.encode_batch(texts)], dtype=torch.long)

    def masker(self, prob: float = 0.15):
        """(tokens, generator) -> (masked input, labels): BERT masking over this vocab, PAD and
        CLS excluded (as the CTP code; SEP may be masked)."""
        from functools import partial

        from vlcp.losses import mask_tokens
        return partial(mask_tokens, vocab_size=self.vocab_size, mask_id=self.mask_id,
                       special_ids=(self.pad_id, self.cls_id), prob=prob)

    @staticmethod
    def _bert_pipeline(tok):
        from tokenizers import normalizers, pre_tokenizers, processors
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
        return tok

    @classmethod
    def train(cls, corpus: list[str], vocab_size: int, context_length: int) -> "WordPieceTokenizer":
        """A BERT-style uncased WordPiece vocab built from `corpus`, deterministically: the
        special tokens, every character (as a word start and as a `##` piece), then whole words
        by decreasing count (ties by spelling) up to `vocab_size`. Words outside it split into
        characters. (`tokenizers`' WordPiece trainer breaks frequency ties differently from
        process to process, which would change token ids between runs of the same seed.)"""
        from collections import Counter

        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
        norm, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
        words = Counter(w for text in corpus for w, _ in pre.pre_tokenize_str(norm.normalize_str(text)))
        chars = sorted({c for w in words for c in w})
        vocab = list(SPECIALS) + chars + [f"##{c}" for c in chars]
        vocab += [w for w, _ in sorted(words.items(), key=lambda x: (-x[1], x[0])) if len(w) > 1][: max(0, vocab_size - len(vocab))]
        tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
        return cls(cls._bert_pipeline(tok), context_length)

    @classmethod
    def from_vocab(cls, vocab_file: str | Path, context_length: int) -> "WordPieceTokenizer":
        """A BERT directory's `vocab.txt` (bert-base-uncased, bert-base-chinese, ...)."""
        from tokenizers import Tokenizer, models
        tok = Tokenizer(models.WordPiece.from_file(str(vocab_file), unk_token="[UNK]"))
        return cls(cls._bert_pipeline(tok), context_length)


def _bert_config(cfg: ALBEFConfig, vocab_size: int, pad_id: int):
    from transformers import BertConfig
    return BertConfig(vocab_size=vocab_size, hidden_size=cfg.text_width, num_hidden_layers=cfg.text_layers,
                      num_attention_heads=cfg.text_heads, intermediate_size=cfg.mlp_ratio * cfg.text_width,
                      max_position_embeddings=max(cfg.context_length, 512 if cfg.text_width >= 768 else cfg.context_length),
                      hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout, pad_token_id=pad_id)


def _fusion_layers(mlm, cfg: ALBEFConfig) -> None:
    """Replace BERT layers >= fusion_layer by layers with cross-attention (their self-attention
    bidirectional), keeping the existing weights (pretrained or not); cross-attention is new."""
    from transformers.models.bert.modeling_bert import BertLayer
    dec = copy.deepcopy(mlm.config)
    dec.is_decoder, dec.add_cross_attention = True, True
    layers = mlm.bert.encoder.layer
    for i in range(cfg.fusion_layer, cfg.text_layers):
        new = BertLayer(dec, layer_idx=i)
        new.apply(mlm._init_weights)
        new.attention.self.is_causal = False
        new.load_state_dict(layers[i].state_dict(), strict=False)
        layers[i] = new


class CosineLinear(nn.Module):
    """LUCIR's cosine-normalised linear layer, as CTP's LUCIR swaps it in for ALBEF's
    `vision_proj` / `text_proj` (KevinLight831/CTP, models/clip_pretrain.py, `CosineLinear`):
    σ · (x/‖x‖) Wᵀ with each row of W L2-normalised, no bias, a learnable scale σ initialised
    to 1. The input is normalised over its last dimension (the CTP code: dim = 1, the same on its
    [B, width] inputs)."""

    def __init__(self, in_features: int, out_features: int, sigma: bool = True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.sigma = nn.Parameter(torch.ones(1)) if sigma else None
        bound = 1 / math.sqrt(in_features)              # the CTP code's reset_parameters
        nn.init.uniform_(self.weight, -bound, bound)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "CosineLinear":
        """A CosineLinear with `linear`'s weight (its bias dropped: the layer has none), σ = 1."""
        layer = cls(linear.in_features, linear.out_features).to(linear.weight)
        with torch.no_grad():
            layer.weight.copy_(linear.weight)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(F.normalize(x, p=2, dim=-1), F.normalize(self.weight, p=2, dim=1))
        return self.sigma * out if self.sigma is not None else out


class ALBEF(nn.Module):
    def __init__(self, cfg: ALBEFConfig, vocab_size: int, pad_id: int, mlm=None):
        super().__init__()
        from timm.models.vision_transformer import VisionTransformer
        from transformers import BertForMaskedLM
        if not 0 < cfg.fusion_layer < cfg.text_layers:
            raise VlcpError(f"model: fusion_layer must be in (0, text_layers), got {cfg.fusion_layer} of {cfg.text_layers}")
        self.cfg, self.pad_id = cfg, pad_id
        self.visual = VisionTransformer(img_size=cfg.image_size, patch_size=cfg.patch_size, embed_dim=cfg.vision_width,
                                        depth=cfg.vision_layers, num_heads=cfg.vision_heads, mlp_ratio=cfg.mlp_ratio,
                                        num_classes=0, global_pool="token")
        self.mlm = mlm if mlm is not None else BertForMaskedLM(_bert_config(cfg, vocab_size, pad_id))
        _fusion_layers(self.mlm, cfg)
        self.image_to_text = nn.Identity() if cfg.vision_width == cfg.text_width else nn.Linear(cfg.vision_width, cfg.text_width)
        self.vision_proj = nn.Linear(cfg.vision_width, cfg.embed_dim)
        self.text_proj = nn.Linear(cfg.text_width, cfg.embed_dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / cfg.temperature)), requires_grad=False)

    @property
    def layers(self) -> nn.ModuleList:
        return self.mlm.bert.encoder.layer

    # -- towers ----------------------------------------------------------------------------
    def image_embeds(self, images: torch.Tensor) -> torch.Tensor:
        """All image tokens [B, 1 + patches, vision_width] (after the final norm)."""
        return self.visual.forward_features(images)

    def text_hidden(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Text-encoder hidden states [B, L, width] and the additive attention mask."""
        h = self.mlm.bert.embeddings(input_ids=tokens)
        ext = (tokens == self.pad_id)[:, None, None, :].to(h.dtype) * torch.finfo(h.dtype).min
        for layer in self.layers[: self.cfg.fusion_layer]:
            h = layer(h, ext)
        return h, ext

    def fuse(self, h: torch.Tensor, ext: torch.Tensor, image_embeds: torch.Tensor) -> torch.Tensor:
        """Fusion-encoder hidden states: text states cross-attending to the image tokens."""
        img = self.image_to_text(image_embeds)
        for layer in self.layers[self.cfg.fusion_layer:]:
            h = layer(h, ext, encoder_hidden_states=img)
        return h

    # -- features (CLIP's interface) -------------------------------------------------------
    def encode_image(self, images: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        x = self.vision_proj(self.image_embeds(images)[:, 0])
        return F.normalize(x, dim=-1) if normalize else x

    def encode_text(self, tokens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        x = self.text_proj(self.text_hidden(tokens)[0][:, 0])
        return F.normalize(x, dim=-1) if normalize else x

    def encode_multimodal(self, images: torch.Tensor, tokens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        """The fused [CLS] of (image, text): CTP's multi-modal retrieval feature."""
        h, ext = self.text_hidden(tokens)
        x = self.fuse(h, ext, self.image_embeds(images))[:, 0]
        return F.normalize(x, dim=-1) if normalize else x

    def forward(self, images: torch.Tensor, tokens: torch.Tensor, mlm_input: torch.Tensor | None = None,
                mlm_mask: torch.Tensor | None = None) -> ALBEFOutput:
        emb = self.image_embeds(images)
        img = F.normalize(self.vision_proj(emb[:, 0]), dim=-1)
        txt = F.normalize(self.text_proj(self.text_hidden(tokens)[0][:, 0]), dim=-1)
        logits = None
        if mlm_input is not None:
            h, ext = self.text_hidden(mlm_input)
            logits = self.mlm.cls(self.fuse(h, ext, emb)[mlm_mask])
        return ALBEFOutput(img, txt, self.logit_scale.exp(), logits)


def is_albef(name: str) -> bool:
    return name in PRESETS


def create_albef(name: str, pretrained: str | None = None, device: str | torch.device = "cpu",
                 image_size: int | None = None, corpus: list[str] | None = None):
    """Return (model, tokenizer). `pretrained`: None (random init, a WordPiece vocab trained on
    `corpus`), a `.pt` weights file written by `vlcp pretrain` for this config (its vocab rebuilt
    from the same `corpus`: the build is deterministic), or a directory with `bert/` (transformers
    BERT) and optionally `vit.pth`."""
    if name not in PRESETS:
        raise VlcpError(f"model.name: unknown ALBEF config {name!r}; known: {', '.join(PRESETS)}")
    cfg = PRESETS[name] if image_size is None else replace(PRESETS[name], image_size=image_size)
    mlm = None
    weights = Path(pretrained) if pretrained and Path(pretrained).suffix == ".pt" else None
    if weights is not None and not weights.exists():
        raise VlcpError(f"model.pretrained: {weights} not found; build it with `dvc repro` (stage ctp_base) "
                        f"or `vlcp pretrain ctp-base --out {weights}`")
    if pretrained and weights is None:
        root = Path(pretrained)
        bert = root / "bert"
        if not (bert / "config.json").exists() or not (bert / "vocab.txt").exists():
            raise VlcpError(f"model.pretrained: {bert} must be a transformers BERT directory (config.json, weights, "
                            "vocab.txt); see docs/paper-scale.md, 'Weights'")
        from transformers import BertForMaskedLM
        tokenizer = WordPieceTokenizer.from_vocab(bert / "vocab.txt", cfg.context_length)
        mlm = BertForMaskedLM.from_pretrained(str(bert), local_files_only=True,
                                              hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
        c = mlm.config
        cfg = replace(cfg, text_width=c.hidden_size, text_layers=c.num_hidden_layers, text_heads=c.num_attention_heads,
                      fusion_layer=c.num_hidden_layers // 2)
    else:
        if not corpus:
            raise VlcpError("model: an ALBEF without a BERT directory needs the captions to build its vocab from")
        tokenizer = WordPieceTokenizer.train(corpus, cfg.vocab_size, cfg.context_length)
    model = ALBEF(cfg, tokenizer.vocab_size, tokenizer.pad_id, mlm)
    if weights is not None:
        _load_weights(model, weights, cfg)
    elif pretrained and (Path(pretrained) / "vit.pth").exists():
        _load_vit(model.visual, Path(pretrained) / "vit.pth")
    return model.to(device), tokenizer


def _load_weights(model: ALBEF, path: Path, cfg: ALBEFConfig) -> None:
    """A `vlcp pretrain` state dict into `model`; a file for another config or vocab is refused."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    mine = model.state_dict()
    bad = [k for k, v in state.items() if k in mine and v.shape != mine[k].shape]
    missing = sorted(set(mine) - set(state))
    if bad or missing or set(state) - set(mine):
        raise VlcpError(f"model.pretrained: {path} does not fit {cfg} (shape mismatch {bad[:3]}, missing {missing[:3]}); "
                        "it was trained for another ALBEF config or vocab")
    model.load_state_dict(state)


def _load_vit(visual: nn.Module, path: Path) -> None:
    """A timm ViT/DeiT checkpoint (`model` key or a bare state dict); position embeddings are
    resampled to this image size; the classifier head is dropped."""
    from timm.layers import resample_abs_pos_embed
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = state.get("model", state)
    state = {k: v for k, v in state.items() if not k.startswith(("head", "fc_norm"))}
    if "pos_embed" in state and state["pos_embed"].shape != visual.pos_embed.shape:
        grid = visual.patch_embed.grid_size
        state["pos_embed"] = resample_abs_pos_embed(state["pos_embed"], list(grid), num_prefix_tokens=1)
    missing, unexpected = visual.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise VlcpError(f"model.pretrained: {path} does not fit the ViT (missing {missing[:3]}, unexpected {unexpected[:3]})")
