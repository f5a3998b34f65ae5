"""The runs whose results are pinned by tests/test_golden_results.py: a few per stream, chosen so
that every per-stream path of the loop runs (FLOP counting, per-task passes, MLM and mAP, held-out
suites, a grown token table, † no-id rows, a one-task plan, MAFs budgets, side-information
orderings). Each case is a plain experiment dict; `root` is the prepared emoji benchmark."""
from __future__ import annotations

TASKS = ["Smileys & Emotion", "Animals & Nature", "Activities"]
TRAIN = {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1}


def group(method: str, model: str = "vlcp-tiny", stream: str | None = None, heldout: bool = False, **args) -> dict:
    data = {"tasks": TASKS} if stream is None else {"stream": stream, "num_tasks": 2}
    return {"name": f"golden-{method}", "seed": 0, "data": data, "model": {"name": model},
            "method": {"name": method, **args}, "train": {"steps": 6, **TRAIN},
            "eval": {"batch_size": 256, "heldout": heldout}}


def language(method: str, convergence: bool = False, **args) -> dict:
    return {"name": f"golden-{method}", "seed": 0, "data": {"stream": "language", "languages": ["en", "de", "ja"]},
            "model": {"name": "vlcp-tiny"}, "method": {"name": method, "vocab_size": 400, **args},
            "train": {"steps": 6, "steps_split": "equal", "lr": 0.01, "min_lr_ratio": 1.0, "warmup_steps": 0, **TRAIN},
            "eval": {"batch_size": 256, "convergence": convergence}}


def concepts(method: str, fomo: dict | None = None, **args) -> dict:
    return {"name": f"golden-fomo-{method}", "seed": 0, "data": {"stream": "concepts"}, "model": {"name": "vlcp-tiny"},
            "method": {"name": method, **args}, "fomo": {"num_tasks": 3, "steps_per_task": 4, **(fomo or {})},
            "train": {"warmup_frac": 0.1, **TRAIN}, "eval": {"batch_size": 256}}


CASES: dict[str, dict] = {
    "group-seqf": group("seqf"),
    "group-er": group("er", buffer_size=20),
    "group-ewc": group("ewc", fisher_batches=2, fisher_batch_size=8),
    "group-ctp": group("ctp", model="albef-tiny", queue_size=32),
    "group-lora": group("lora", r=4),
    "class-incclip": group("incclip", model="vlcp-tiny-rn", stream="class", heldout=True, buffer_size=20,
                           pseudo_iters=1),
    "language-cllclip": language("cllclip", convergence=True, teir=True),
    "language-cll-mla": language("cll-mla"),
    "language-cll-joint": language("cll-joint"),
    "language-cll-der": language("cll-der", buffer_size=30),
    "concepts-seqf": concepts("seqf"),
    "concepts-ewc": concepts("ewc", fisher_batches=1),
    "concepts-lora": concepts("lora", r=4),
    "concepts-ema-merge": concepts("ema-merge", fomo={"ordering": "easy-to-hard"}, w=0.9),
    "concepts-locked-text": concepts("locked-text", fomo={"budget": "steps"}),
}
# one case per stream is also run as task 0, stop, resume: it must end in the same golden file
RESUMED = ["group-er", "class-incclip", "language-cll-der", "concepts-ewc"]
