"""CLL-CLIP's expandable vocabulary: CLIP's byte-level BPE, grown per language with stable ids.

`Vocab.from_open_clip` rebuilds open_clip's CLIP tokenizer (same vocab, merges and ids) as a
`tokenizers` BPE model with CLIP's normaliser and pre-tokeniser (as transformers' CLIP converter
does). `train_bpe` learns a language's own BPE vocab from its captions with the same pipeline (as
CLFM's `CLIPTokenizerFast.train_new_from_iterator`). `Vocab.merge` is the paper's
V_t = V_{t-1} ∪ V̂_t: tokens not yet known are appended (existing ids never change) and the new
merges follow the old ones (old merges keep priority). `encode` writes [SOT] tokens [EOT] padded
with 0 and returns each row's end-of-text position explicitly: after expansion EOT is no longer
the largest id, so CLIP's argmax pooling would be wrong.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
SUFFIX = "</w>"


def _pipeline(model: models.BPE) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(lines: list[str], vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A language's own BPE vocab (token -> id) and merges, learned from `lines`; deterministic.

    `tokenizers`' trainer creates the word-final tokens ("a</w>") lazily in hash-map order, so
    their ids, and through the pair-id tie-break of equal counts the merges, changed from one
    training to the next (huggingface/tokenizers#1794). They are declared up front in sorted
    order instead (the same set the trainer would create: one per word-final symbol), so every
    id, and so every merge, is fixed by the captions."""
    tok = _pipeline(models.BPE(end_of_word_suffix=SUFFIX, continuing_subword_prefix=""))
    # the words of the distinct space-separated chunks: the split never crosses whitespace, so
    # these are the lines' words (pre-tokenising every line's text took 0.1 s a language)
    chunks = " ".join(dict.fromkeys(tok.normalizer.normalize_str(" ".join(lines)).split(" ")))
    finals = sorted({word[-1] for word, _ in tok.pre_tokenizer.pre_tokenize_str(chunks)})
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, end_of_word_suffix=SUFFIX,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[c + SUFFIX for c in finals])
    tok.train_from_iterator(lines, trainer)
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]


@dataclass
class Vocab:
    tokens: list[str]                    # id -> token string (ids are stable)
    merges: list[tuple[str, str]]        # by priority
    sot: int
    eot: int

    @classmethod
    def from_open_clip(cls, tokenizer) -> "Vocab":
        """open_clip's SimpleTokenizer (CLIP's BPE) as a Vocab with identical ids."""
        tokens = [None] * len(tokenizer.encoder)
        for t, i in tokenizer.encoder.items():
            tokens[i] = t
        merges = [m for m, _ in sorted(tokenizer.bpe_ranks.items(), key=lambda kv: kv[1])]
        return cls(tokens, merges, tokenizer.sot_token_id, tokenizer.eot_token_id)

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def tokenizer(self) -> Tokenizer:
        vocab = {t: i for i, t in enumerate(self.tokens)}
        return _pipeline(models.BPE(vocab=vocab, merges=list(self.merges), end_of_word_suffix=SUFFIX,
                                    continuing_subword_prefix="", fuse_unk=False))

    def merge(self, vocab: dict[str, int], merges: list[tuple[str, str]]) -> "Vocab":
        """V ∪ V̂: append unknown tokens (in V̂'s id order) and unknown merges.

        A Vocab remembers what it was merged into, by the identity of the added vocab and
        merges: the runs of a study in one process grow the same chain from one base vocab with
        the same (memoised) language vocabs, and so share each step's Vocab, its `tokenizers`
        object and its text -> ids memo (a 36-language run built and filled them again: ~13 of
        its ~70 s on one thread). The memo keeps the added objects alive, so an id is never
        reused while its entry stands."""
        key = (id(vocab), id(merges))
        hit = self._merged.get(key)
        if hit is not None:
            return hit[2]
        known = set(self.tokens)
        new = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in known]
        have = set(self.merges)
        out = Vocab(self.tokens + new, self.merges + [m for m in merges if m not in have], self.sot, self.eot)
        self._merged[key] = (vocab, merges, out)
        return out

    @cached_property
    def _merged(self) -> dict[tuple[int, int], tuple]:
        """(id of V̂'s vocab, id of its merges) -> (vocab, merges, V ∪ V̂), see `merge`."""
        return {}

    @cached_property
    def _memo(self) -> dict[str, list[int]]:
        """text -> token ids under this vocab. A task encodes the same texts again and again (its
        token statistics, then every training batch; every test caption twice for † methods), and
        `tokenizers` takes ~20 µs a short caption; a vocab never changes, so neither do its ids."""
        return {}

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids (no special tokens), encoding only texts not seen before."""
        memo = self._memo
        new = [t for t in dict.fromkeys(texts) if t not in memo]
        if new:
            memo.update(zip(new, (e.ids for e in self.tokenizer.encode_batch_fast(new, add_special_tokens=False))))
        return [memo[t] for t in texts]

    def encode(self, texts: list[str], context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens long [B, ctx]: SOT ids EOT, 0-padded and truncated like open_clip; EOT index [B])."""
        rows = [r[: context_length - 2] for r in self.token_ids(list(texts))]
        n = np.fromiter(map(len, rows), np.int64, len(rows))
        out = np.zeros((len(rows), context_length), np.int64)
        pos = np.arange(context_length)
        out[(pos >= 1) & (pos <= n[:, None])] = np.fromiter(chain.from_iterable(rows), np.int64, int(n.sum()))
        out[:, 0] = self.sot
        out[np.arange(len(rows)), n + 1] = self.eot
        return torch.from_numpy(out), torch.from_numpy(n + 1)

    def ids_used(self, texts: list[str]) -> torch.Tensor:
        """Sorted unique token ids the texts use (special tokens excluded)."""
        used = set(chain.from_iterable(self.token_ids(list(dict.fromkeys(texts)))))
        return torch.tensor(sorted(used), dtype=torch.long)

    def __deepcopy__(self, memo) -> "Vocab":
        """A Vocab is a value: `merge` returns a new one and nothing mutates it, so copies of a model
        (the FLOP counter's, per task) share it instead of rebuilding ~100K tokens and merges."""
        return self

    @cached_property
    def _json(self) -> str:
        return json.dumps([self.tokens, self.merges, self.sot, self.eot], ensure_ascii=False)

    def __getstate__(self) -> dict:
        """Pickled as one JSON string, made once per vocab (every task's checkpoint pickles it;
        ~100K small token and merge objects took 0.27 s a checkpoint to pickle, their JSON 0.04 s);
        the cached `tokenizers` object and ids are not pickled (rebuilt on demand)."""
        return {"json": self._json}

    def __setstate__(self, state: dict) -> None:
        tokens, merges, sot, eot = json.loads(state["json"])
        self.__init__(tokens, [tuple(m) for m in merges], sot, eot)
