"""The paper items a report renders only in part or not at all: what is missing, why, and what
would render it. Each paper notebook shows its paper's rows (`not_rendered`), so a reader sees
every gap in the report itself, not only in docs/. An item that the `long` profile renders names
the runs it needs (`Gap.experiments`); a report that has them all drops it."""
from __future__ import annotations

from typing import Iterable, NamedTuple

import pandas as pd

COLUMNS = ("item", "rendered", "missing", "why", "what would render it")
LONG = "the long profile (`dvc repro long/dvc.yaml` → reports/long/)"


class Gap(NamedTuple):
    item: str
    rendered: str          # "no" | "in part"
    missing: str
    why: str
    renders_it: str        # what would render it
    experiments: tuple[str, ...] = ()   # the runs that render it, where they exist (the long profile's rows)


NOT_RENDERED: dict[str, list[Gap]] = {
    "fomo": [
        Gap("Table 5", "no", "fine-tuning on each adaptation dataset alone, against zero-shot",
            "the default pipeline is at its time budget; §1's per-dataset scores of full fine-tuning stand in",
            f"{LONG}: `fomo-isolated`, one run of 10 single-dataset tasks (~1 min)", ("fomo-isolated",)),
        Gap("Table 4", "in part", "the DoRA r = 64 and VeRA r = 64 rows",
            "the default rank study runs LoRA at r = 4 and 64, DoRA and VeRA at r = 4 only",
            f"{LONG}: `fomo-dora64`, `fomo-vera64`", ("fomo-dora64", "fomo-vera64")),
        Gap("Fig. 12 right", "in part", "LoRA's compute-scaling curve and the 4× point",
            "the default compute study runs full fine-tuning and EMA-Merge at 0.25, 0.5, 1, 2 and 6×",
            f"{LONG}: `fomo-ft-c4`, `fomo-ema-c4`, `fomo-lora-c025` … `fomo-lora-c6` (LoRA r = 4; 1× is `fomo-lora4`)",
            ("fomo-ft-c4", "fomo-ema-c4", "fomo-lora-c025", "fomo-lora-c05", "fomo-lora-c2", "fomo-lora-c4", "fomo-lora-c6")),
        Gap("Fig. 15 right", "no", "the six reversed orderings",
            "no claim reads them, and the default pipeline is over its time budget: the reversals went to the long profile",
            f"{LONG}: `fomo-o-random-rev`, `fomo-o-easy-rev` … `fomo-o-dataset-rev`",
            ("fomo-o-random-rev", "fomo-o-easy-rev", "fomo-o-freq-rev", "fomo-o-sim-rev", "fomo-o-time-rev", "fomo-o-dataset-rev")),
        Gap("Fig. 19 centre", "no", "ViT-B/32 against ViT-B/16 across deployment scenarios",
            "a second θ0 at another patch size; the tiny profile has one architecture", "not built: a `small` or "
            "`paper` alias with a B/32 θ0 and the orderings at it"),
        Gap("Fig. 19 right", "in part", "EMA-Merge on the longer stream",
            "the default runs EMA-Merge at T = 20 only", f"{LONG}: `fomo-ema-t50`", ("fomo-ema-t50",)),
        Gap("Fig. 19 right", "in part", "T = 200",
            "T = 200 cannot be cut from our 144 concepts at one concept or more per task",
            "a larger stream: the `paper` profile on FoMo-in-Flux's data"),
    ],
    "cllclip": [
        Gap("Table 2", "in part", "the M-CLIP and PaLI joint-training rows",
            "external multilingual models whose weights cannot be had offline; the joint row is ours (cll36-joint)",
            "none offline"),
    ],
}

NA = "does not apply"
DIAGRAM = "a diagram of the method or setting, not a result"
# The numbered items no run of ours can render: diagrams, the statistics and samples of the paper's own datasets,
# surveys of other work. Each report lists its paper's beside its gaps.
NOT_APPLICABLE: dict[str, list[tuple[str, str]]] = {
    "ctp": [
        ("Fig. 1", DIAGRAM + " (class-incremental learning vs continual pretraining)"),
        ("Fig. 2", "the statistics of P9D, the paper's dataset; the overview report shows the emoji benchmark's"),
        ("Fig. 3", DIAGRAM + " (CTP's architecture)"),
        ("Supp. Fig. 1", "the per-task sizes of P9D's subsets; our tasks' sizes are in the 'Does the stream teach?' table"),
        ("Supp. Table 1", "a survey of other continual-learning and pretraining datasets"),
        ("Supp. Fig. 2", "image–text samples of P9D; the overview report shows the benchmark's"),
    ],
    "incclip": [
        ("Fig. 2", DIAGRAM + " (IncCLIP's pipeline)"),
    ],
    "cllclip": [
        ("Fig. 1", DIAGRAM + " (continual language learning)"),
        ("Fig. 2", DIAGRAM + " (CLL-CLIP and TEIR)"),
        ("Table 1", "the statistics of MSCOCO36 and XM3600; §1 shows our stream's languages and sizes"),
        ("Fig. 5, Table 4", "translate-test and Multi30K against external multilingual models: no analogue offline "
         "(the section above says why)"),
    ],
    "fomo": [
        ("Table 1", "a survey of other continual-learning benchmarks"),
        ("Tables 2-3", "the paper's adaptation and evaluation-only datasets; §1 lists ours"),
        ("Fig. 1", DIAGRAM + " (the FoMo-in-Flux pipeline)"),
        ("Figs. 2-4, 20", "caption and image samples of the paper's datasets"),
        ("Fig. 5", DIAGRAM + " (the stream orderings); §9 draws ours"),
        ("Fig. 8", DIAGRAM + " (the merging strategies)"),
    ],
}


def not_rendered(paper: str, have: Iterable[str] = ()) -> pd.DataFrame:
    """The paper's items rendered in part or not at all, one row each, then those that do not apply
    here (empty: none listed); an item whose runs (`Gap.experiments`) are all in `have` (the runs
    the report loaded) is rendered and left out."""
    have = set(have)
    rows = [g[:5] for g in NOT_RENDERED.get(paper, []) if not (g.experiments and set(g.experiments) <= have)]
    rows += [(item, NA, "all", why, "none") for item, why in NOT_APPLICABLE.get(paper, [])]
    return pd.DataFrame(rows, columns=list(COLUMNS))
