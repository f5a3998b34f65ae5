"""Multilingual image–text retrieval after each task of a language stream (CLL-CLIP's protocol).

The images are fixed (CLIP's frozen image tower, encoded once); per language j the evaluation
captions of each test set are encoded by the current model, and TR@K / IR@K / Rm are computed
with every caption of an image counted as its match (CLFM's multi-caption retrieval). The emoji
benchmark's sets: "in_domain" (unseen items in the training styles, the MSCOCO36 analogue) and
"out_domain" (the same items in a held-out style, the XM3600 analogue); on real data, MSCOCO36's
test split and XM3600. A language is scored once it has been learned (j <= i), as the paper and
CLFM do; unlearned cells are None.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from tqdm import tqdm

from vlcp.errors import require_finite
from vlcp.eval.retrieval import cross_modal


class LanguageEvaluator:
    def __init__(self, captions: dict[str, dict[str, tuple[list[str], torch.Tensor]]],
                 image_sets: dict[str, tuple[torch.Tensor, torch.Tensor]], ks=(1, 5, 10), batch_size: int = 512,
                 progress: bool = False):
        """`image_sets[name]` = (normalised image features [M, D], item of each image [M]);
        `captions[name][lang]` = (that set's captions in `lang`, item of each caption). Only the
        images of items with captions in the language are scored; a set without the language
        is left out of its row (None)."""
        self.captions, self.image_sets = captions, image_sets
        self.ks, self.batch_size, self.progress = tuple(ks), batch_size, progress   # progress: a bar over the languages

    @torch.no_grad()
    def language(self, encode_text, lang: str) -> dict[str, dict[str, float]]:
        """{set: metrics} for one language; `encode_text(lang, texts)` -> features [N, D]."""
        out, done = {}, {}
        for name, (img, img_item) in self.image_sets.items():
            if lang not in self.captions[name]:
                continue
            texts, pos = self.captions[name][lang]
            key = id(self.captions[name])
            if key not in done:    # sets sharing their captions (the emoji benchmark's) encode them once
                done[key] = F.normalize(require_finite(
                    torch.cat([encode_text(lang, texts[s:s + self.batch_size]).float().cpu()
                               for s in range(0, len(texts), self.batch_size)]), f"{lang} text features"), dim=-1)
            keep = torch.isin(img_item, pos)
            out[name] = cross_modal(img[keep], done[key], img_item[keep], pos, self.ks)
        return out

    def __call__(self, encode_text, languages: list[str], learned: set[str]) -> dict[str, dict[str, list]]:
        """{set: {metric: [value or None per language in `languages`]}} for the learned ones."""
        todo = [lang for lang in languages if lang in learned]
        cells = {lang: self.language(encode_text, lang)
                 for lang in tqdm(todo, desc="evaluate", unit="language", leave=False, disable=not self.progress)}
        out: dict[str, dict[str, list]] = {}
        for name in self.image_sets:
            metrics = next((c[name].keys() for c in cells.values() if name in c), ())
            out[name] = {m: [cells[lang][name][m] if name in cells.get(lang, {}) else None for lang in languages]
                         for m in metrics}
        return out
