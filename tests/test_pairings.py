"""Every method runs on every stream it applies to (two tiny tasks each), and a pairing that
cannot run is one line naming the method, the stream and where the method runs."""
import dataclasses

import pytest

from vlcp.config import experiment_from_dict
from vlcp.errors import ConfigError
from vlcp.registry import METHODS, STREAMS, load_method, load_stream
from vlcp.run import run_experiment
from vlcp.run.requirements import check_config, supplied

# small settings for whichever methods have the field (a tiny run's scale)
SMALL = {"buffer_size": 20, "fisher_batches": 1, "fisher_batch_size": 8, "importance_batches": 1,
         "importance_batch_size": 8, "expand_steps": 2, "pseudo_iters": 1, "queue_size": 16, "r": 4,
         "vocab_size": 300, "ae_steps": 5, "ae_reference_steps": 5, "ref_texts": 32}
TRAIN = {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "pass_flops_seeds": [],
         "flops_every": 100}


def config(root, method: str, stream: str, model: str = "vlcp-tiny") -> dict:
    fields = {f.name for f in dataclasses.fields(load_method(method).Config)}
    m = {"name": method, **{k: v for k, v in SMALL.items() if k in fields}}
    cfg = {"name": f"pair-{method}-{stream}", "seed": 0, "model": {"name": model}, "method": m,
           "train": {"steps": 4, **TRAIN}, "eval": {"batch_size": 256}}
    if stream == "group":
        cfg["data"] = {"root": str(root), "tasks": ["Smileys & Emotion", "Animals & Nature"], "unseen_styles": []}
    elif stream in ("class", "instance"):
        cfg["data"] = {"root": str(root), "stream": stream, "num_tasks": 2, "unseen_styles": []}
    elif stream == "language":
        cfg["data"] = {"root": str(root), "stream": "language", "languages": ["en", "de"]}
        cfg["train"].update(steps_split="equal", lr=0.01)
    else:
        cfg["data"] = {"root": str(root), "stream": "concepts"}
        cfg["fomo"] = {"num_tasks": 2, "steps_per_task": 2}
    return experiment_from_dict(cfg)


def applies(method: str, stream: str) -> bool:
    return load_method(method).needs <= load_stream(stream).provides | {"clip"}   # (the tiny CLIP)


# The class and instance streams are the group stream's class (GroupStream) with other task cuts: every
# method runs on the group stream, and on class and instance the IncCLIP study's methods do. The user
# stream (your own data, vlcp update) runs the update recipes' methods and others in tests/test_update.py.
CUTS = ("class", "instance")
INCCLIP_STUDY = ("seqf", "jointt", "er", "ucir", "geodl", "co2l", "incclip")
PAIRS = [(m, s) for s in STREAMS for m in sorted(METHODS)
         if s != "user" and applies(m, s) and (s not in CUTS or m in INCCLIP_STUDY)]


def test_every_method_has_a_stream():
    assert {m for m, _ in PAIRS} == set(METHODS)
    assert len(PAIRS) >= 30 * 2 + 10 + 2 * len(INCCLIP_STUDY)
    assert all(load_stream(s) is load_stream("group") for s in CUTS)


@pytest.mark.parametrize("method,stream", PAIRS, ids=[f"{s}-{m}" for m, s in PAIRS])
def test_method_runs_on_stream(emoji_root, tmp_path, method, stream):
    r = run_experiment(config(emoji_root, method, stream), tmp_path)
    assert len(r["train"]) == len(r["tasks"]) == (1 if method == "cll-joint" else 2)
    assert all(t["steps"] >= 1 and t["samples"] > 0 for t in r["train"])


@pytest.mark.parametrize("method,stream,model,says", [
    ("cllclip", "group", "vlcp-tiny", "the task's language and a growable token table"),
    ("ewc", "language", "vlcp-tiny", "image batches"),
    ("incclip", "group", "albef-tiny", "an open_clip text tower"),
    ("cll-er", "concepts", "vlcp-tiny", "the task's language and a growable token table"),
])
def test_impossible_pairing_is_one_line_naming_both(emoji_root, tmp_path, method, stream, model, says):
    cfg = config(emoji_root, method, stream, model)
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"method.name: {method!r} needs {says}")
    assert f"the {stream} stream (model {model!r})" in msg and "it runs on: " in msg
    with pytest.raises(ConfigError, match="does not supply"):   # the run refuses before any data loads
        run_experiment(cfg, tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_where_a_method_runs_follows_its_needs(emoji_root):
    cfg = config(emoji_root, "seqf", "group")
    assert supplied(cfg, load_stream("group")) == {"pixels", "replay", "clip"}
    with pytest.raises(ConfigError, match="it runs on: language$"):
        check_config(config(emoji_root, "cllclip", "group"))


def concept_budget(root, out, name: str) -> dict:
    """The MAFs budget a run of `name` on the concept stream (10 steps per task) reports."""
    cfg = config(root, name, "concepts")
    cfg.fomo.steps_per_task = 10
    return run_experiment(cfg, out / name)["budget"]


@pytest.fixture(scope="module")
def full_ft_budget(emoji_root, tmp_path_factory):
    """Full fine-tuning's budget on the concept stream, run once for the teacher methods below."""
    return concept_budget(emoji_root, tmp_path_factory.mktemp("budget"), "seqf")


@pytest.mark.parametrize("method", ["lwf", "ucir"])
def test_teacher_methods_pay_for_their_teacher_in_the_mafs_budget(emoji_root, tmp_path, method, full_ft_budget):
    """On the concept stream a method's steps are measured where they cost what they cost: a
    teacher's forward exists from the second task on (Method.budget_probe_task), so the step
    counts it and the method gets fewer steps than full fine-tuning."""
    own, ft = concept_budget(emoji_root, tmp_path, method), full_ft_budget
    assert own["method"]["flops"] >= 1.2 * own["full_ft"]["flops"]
    assert own["steps_per_task"] < ft["steps_per_task"] == 10


def test_a_streams_own_refusal_comes_before_any_run(emoji_root):
    """`vlcp run` checks every experiment first: the pairing, then the stream's own refusals."""
    cfg = config(emoji_root, "cllclip", "language")
    cfg.train.compile = "default"
    with pytest.raises(ConfigError, match="^train.compile: the language stream's model grows"):
        check_config(cfg)
