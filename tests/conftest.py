import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):      # `make test` runs two workers on the two cores: one torch thread
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # each (read when torch loads), or they slow each other ~20x

import pytest  # noqa: E402

from vlcp.config import DataCfg  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """The longest tests first: the tiny `dvc repro` (tests/test_pipeline.py), then the other
    end-to-end tests (marked slow), then the rest in file order. Under `make test` (pytest-xdist,
    `-n 2 --dist worksteal`) one worker starts on the repro while the other takes the rest, and
    steals from its queue: the suite lasts about as long as its longest test, not their sum."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item.path.name != "test_pipeline.py"))


SMALL_TASKS = ["Smileys & Emotion", "Animals & Nature", "Activities"]


@pytest.fixture(scope="session")
def emoji_root(tmp_path_factory):
    """The real emoji benchmark, prepared once per test session (32 px, 3 pip styles)."""
    from vlcp.data.emoji import prepare_emoji

    root = tmp_path_factory.mktemp("data") / "emoji"
    prepare_emoji(DataCfg(root=str(root)), root, progress=False)
    return root


@pytest.fixture(scope="session")
def paper_experiments():
    """Every experiment of params.yaml resolved under the `paper` profile ({name: config}), but the
    tiny profile's pretraining stages (ctp-base, ...), which name an architecture only."""
    from vlcp.config import load_params, resolve_experiment

    params = load_params("params.yaml")
    params["profile"] = "paper"
    return {name: resolve_experiment(params, name) for name, exp in params["experiments"].items()
            if "arch_of" not in ((exp or {}).get("model") or {})}


def tiny_experiment(root, method="seqf", steps=12, model="vlcp-tiny", **method_args):
    from vlcp.config import experiment_from_dict

    return experiment_from_dict({
        "name": f"test-{method}", "seed": 0,
        "data": {"root": str(root), "tasks": SMALL_TASKS},
        "model": {"name": model},
        "method": {"name": method, **method_args},
        "train": {"steps": steps, "batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 256},
    })


def cll_experiment(root, method, steps=9, convergence=True, **method_args):
    """A three-language (en, de, ja) CLL-CLIP stream of `steps` steps over the tiny CLIP."""
    from vlcp.config import experiment_from_dict

    return experiment_from_dict({
        "name": f"test-{method}", "seed": 0,
        "data": {"root": str(root), "stream": "language", "languages": ["en", "de", "ja"]},
        "model": {"name": "vlcp-tiny"},
        "method": {"name": method, "vocab_size": 400, **method_args},
        "train": {"steps": steps, "steps_split": "equal", "batch_size": 16, "lr": 0.01, "progress": False,
                  "device": "cpu", "num_threads": 1, "min_lr_ratio": 1.0, "warmup_steps": 0},
        "eval": {"batch_size": 256, "convergence": convergence},
    })


def strip_timings(r: dict) -> dict:
    """A results dict without its wall-clock fields (a resumed run must equal an uninterrupted
    one in everything else)."""
    import json

    r = json.loads(json.dumps(r))
    r.pop("wall_seconds", None), r.pop("attempt_seconds", None), r.pop("run_seconds", None), r.pop("checksum", None)   # (a file's checksum covers the timings)
    for t in r["train"]:
        t.pop("seconds"), t.pop("eval_seconds"), t.pop("peak_memory_mb"), t.pop("phase_seconds")
    return r
