"""The paper items a report renders only in part or not at all: what is missing, why, and what
would render it. Each paper notebook shows its paper's rows (`not_rendered`), so a reader sees
every gap in the report itself, not only in docs/."""
from __future__ import annotations

import pandas as pd

COLUMNS = ("item", "rendered", "missing", "why", "what would render it")

NOT_RENDERED: dict[str, list[tuple[str, str, str, str, str]]] = {
    "fomo": [
        ("Table 5", "no", "fine-tuning on each adaptation dataset alone, against zero-shot",
         "our stream's 20 tasks are emoji concept groups, not the paper's 41 datasets; §1's per-task gains of "
         "full fine-tuning stand in", "not built: one single-task run per task (20 runs), a `long` stage"),
        ("Table 4", "in part", "the DoRA r = 64 and VeRA r = 64 rows",
         "the rank study runs LoRA at r = 4 and 64, DoRA and VeRA at r = 4 only", "not built: 2 `methods` runs"),
        ("Fig. 12 right", "in part", "LoRA's compute-scaling curve and the 4× point",
         "the compute study runs full fine-tuning and EMA-Merge at 0.25, 0.5, 1, 2 and 6×", "not built: 6 `compute` runs"),
        ("Fig. 19 centre", "no", "ViT-B/32 against ViT-B/16 across deployment scenarios",
         "a second θ0 at another patch size; the tiny profile has one architecture", "not built: a `small` or "
         "`paper` alias with a B/32 θ0 and the orderings at it"),
        ("Fig. 19 right", "in part", "T = 200, and EMA-Merge on the longer streams",
         "T = 200 cannot be cut from our 144 concepts at one concept or more per task; EMA-Merge runs at T = 20 only",
         "not built: EMA-Merge at T = 50 (1 run); T = 200 needs a larger stream (`paper` profile)"),
    ],
    "cllclip": [
        ("Table 2", "in part", "the M-CLIP and PaLI joint-training rows",
         "external multilingual models whose weights cannot be had offline; the joint row is ours (cll36-joint)",
         "none offline"),
    ],
}


def not_rendered(paper: str) -> pd.DataFrame:
    """The paper's items rendered in part or not at all, one row each (empty: none listed)."""
    return pd.DataFrame(NOT_RENDERED.get(paper, []), columns=list(COLUMNS))
