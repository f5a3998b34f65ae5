"""Update recipes: FoMo-in-Flux's findings as named settings, and `auto`'s choice among them.

Every recipe trains with the guide's optimisation settings (`FOMO_TRAIN`: AdamW at peak 1e-5, 10 % linear
warmup, weight decay 0.2 on every parameter, β2 0.999, ε 1e-8, gradient clipping at 1, the
autoregressive rsqrt meta-schedule, which FoMo-in-Flux §6.1 finds keeps nearly all of the
accumulation of per-task cosine while retaining much more, continued over every earlier update).
FoMo-in-Flux tunes each method's peak learning rate; a recipe keeps the one `train.lr` you give
(`--lr`), the same for every recipe (and every candidate of `auto`'s trial).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from vlcp.errors import ConfigError, VlcpError, unknown_name


@dataclass(frozen=True)
class Recipe:
    method: str
    args: dict = field(default_factory=dict)
    finding: str = ""


FOMO_TRAIN = {"lr": 1.0e-5, "schedule": "autoregressive-rsqrt", "warmup_frac": 0.1, "min_lr_ratio": 0.001, "weight_decay": 0.2,
              "decay_all": True, "beta2": 0.999, "adam_eps": 1.0e-8, "grad_clip": 1.0}

RECIPES: dict[str, Recipe] = {
    "full": Recipe("seqf", {}, "full fine-tuning: the most accumulation and the most forgetting (FoMo-in-Flux §5.1)"),
    "lora": Recipe("lora", {"r": 4}, "LoRA r=4: parameter-efficient, retains more and accumulates less (§5.1)"),
    "locked-image": Recipe("locked-image", {}, "tune the text tower only (§6.3: updating both towers is the default)"),
    "ema-merge": Recipe("ema-merge", {"w": 0.9}, "EMA merge w=0.9: the best accumulation-retention trade-off (§5.2)"),
    "zs-merge": Recipe("zs-merge", {"w": 0.9}, "merge with the starting model, w=0.9: the most retention of the merges (§5.2)"),
}
AUTO_CANDIDATES = ("full", "lora", "ema-merge", "zs-merge")


def method_section(recipe: str, known_methods) -> dict:
    """The experiment's `method:` section for a recipe name, or for any vlcp method by its name."""
    if recipe in RECIPES:
        r = RECIPES[recipe]
        return {"name": r.method, **r.args}
    if recipe in known_methods:
        return {"name": recipe}
    names = [*RECIPES, "auto", *sorted(known_methods)]
    raise ConfigError("--recipe: " + unknown_name("recipe", recipe, names, f"{', '.join(RECIPES)}, auto, or a vlcp "
                                                  "method: `vlcp list` lists those"))


def pick(rows: list[dict], hint: str = "") -> tuple[str, str]:
    """`auto`'s rule, as (recipe, why): the trial candidate with the highest GM = √(A_KA·A_ZS) after
    its trial; candidates whose GM lies within the sampling noise of the best's (`GM_halfwidth`,
    `continual.differs`), or equals it, are tied, and the tie goes to the cheapest (fewest training
    `flops` in the trial; then trial order). A candidate that moved no score beyond its sampling
    interval (`moved` == []) cannot win, and when none moved the trial refuses (a VlcpError ending
    in `hint`: the likely cause and what to try). A candidate whose GM is missing (no keep-set or no
    held-out slice scored) cannot win; if none has one, the first candidate is the choice."""
    from vlcp.eval.continual import differs

    if not rows:
        raise ConfigError("--recipe auto: no trial candidates")
    still = [r for r in rows if r.get("moved") == []]
    if len(still) == len(rows):
        raise VlcpError(f"--recipe auto: none of the candidates ({', '.join(r['recipe'] for r in rows)}) moved any "
                        "score beyond its sampling interval in the trial" + (f"; {hint}" if hint else ""))
    left_out = f" ({', '.join(r['recipe'] for r in still)} moved no score: left out)" if still else ""
    rows = [r for r in rows if r.get("moved") != []]
    scored = [r for r in rows if r.get("GM") is not None]
    if not scored:
        return rows[0]["recipe"], ("no candidate has a GM (no keep-set or no held-out slice scored): the first "
                                   "candidate" + left_out)
    best = max(scored, key=lambda r: r["GM"])
    tied = [r for r in scored if r["GM"] == best["GM"]
            or (r.get("GM_halfwidth") is not None and best.get("GM_halfwidth") is not None
                and not differs(r["GM"], r["GM_halfwidth"], best["GM"], best["GM_halfwidth"]))]
    if len(tied) == 1:
        return best["recipe"], f"the highest GM, {best['GM']:.1f}, beyond the others' sampling noise" + left_out
    cheap = min(tied, key=lambda r: (r.get("flops") if r.get("flops") is not None else float("inf"), scored.index(r)))
    within = ", ".join(f"{r['recipe']} {r['GM']:.1f}" for r in tied)
    return cheap["recipe"], (f"GMs within sampling noise of the best ({within}): tied, so the cheapest in training "
                             "FLOPs" + left_out)
