"""Multilingual image–text retrieval after each task of a language stream (CLL-CLIP's protocol).

The images are fixed (CLIP's frozen image tower, encoded once); per language j the evaluation
captions of the test items are encoded by the current model, and TR@K / IR@K / Rm are computed
on each image set: "in_domain" (unseen items in the training styles, the MSCOCO36 analogue) and
"out_domain" (the same items in a held-out style, the XM3600 analogue). A language is scored once
it has been learned (j <= i), as the paper and CLFM do; unlearned cells are None.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from vlcp.data.languages import LanguageCorpus
from vlcp.eval.retrieval import cross_modal


class LanguageEvaluator:
    def __init__(self, corpus: LanguageCorpus, items: list[int], image_sets: dict[str, tuple[torch.Tensor, torch.Tensor]],
                 ks=(1, 5, 10), batch_size: int = 512):
        """`items`: benchmark ids of the test items; `image_sets[name]` = (normalised image
        features [M, D], position in `items` of each image's item [M])."""
        self.corpus, self.items, self.image_sets = corpus, list(items), image_sets
        self.ks, self.batch_size = tuple(ks), batch_size

    def texts(self, lang: str) -> tuple[list[str], torch.Tensor]:
        """Evaluation captions of the test items this language covers, and their positions."""
        rows = self.corpus.text[lang]
        keep = [k for k, i in enumerate(self.items) if rows[i] is not None]
        return [rows[self.items[k]][0] for k in keep], torch.tensor(keep, dtype=torch.long)

    @torch.no_grad()
    def language(self, encode_text, lang: str) -> dict[str, dict[str, float]]:
        """{set: metrics} for one language; `encode_text(lang, texts)` -> features [N, D]."""
        texts, pos = self.texts(lang)
        feats = torch.cat([encode_text(lang, texts[s:s + self.batch_size]).float().cpu()
                           for s in range(0, len(texts), self.batch_size)])
        feats = F.normalize(feats, dim=-1)
        out = {}
        for name, (img, img_item) in self.image_sets.items():
            keep = torch.isin(img_item, pos)
            out[name] = cross_modal(img[keep], feats, img_item[keep], pos, self.ks)
        return out

    def __call__(self, encode_text, languages: list[str], learned: set[str]) -> dict[str, dict[str, list]]:
        """{set: {metric: [value or None per language in `languages`]}} for the learned ones."""
        cells = {lang: self.language(encode_text, lang) for lang in languages if lang in learned}
        out: dict[str, dict[str, list]] = {}
        for name in self.image_sets:
            metrics = next(iter(cells.values()))[name].keys() if cells else ()
            out[name] = {m: [cells[lang][name][m] if lang in cells else None for lang in languages] for m in metrics}
        return out
