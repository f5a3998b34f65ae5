"""The mini FoMo-in-Flux: its datasets, the concept-stream runner, budgets, resume."""
import json

import pytest
import torch

from vlcp.config import DataCfg, POOL_GROUPS, experiment_from_dict
from vlcp.data import concepts as cs
from vlcp.errors import ConfigError


@pytest.fixture(scope="module")
def fomo(emoji_root):
    from vlcp.data.fomo import build_fomo
    from vlcp.data.load import load_benchmark

    cfg = DataCfg(root=str(emoji_root))
    return build_fomo(load_benchmark(cfg), POOL_GROUPS, cfg.train_styles, cfg.unseen_styles)


def fomo_experiment(root, method="seqf", **fomo):
    return experiment_from_dict({
        "name": f"fomo-{method}", "seed": 0, "data": {"root": str(root), "stream": "concepts"},
        "model": {"name": "vlcp-tiny"}, "method": {"name": method},
        "fomo": {"num_tasks": 3, "steps_per_task": 4, **fomo},
        "train": {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "warmup_frac": 0.1},
        "eval": {"batch_size": 256}})


def test_datasets_split_pool_adaptation_and_retention(fomo):
    train = fomo.train
    pool_groups = {fomo.train.groups[int(train.image_text[i])].item() for i in fomo.pool.tolist()}
    assert len(pool_groups) == len(POOL_GROUPS)
    adapt = torch.cat(fomo.concept_images)
    assert len(set(adapt.tolist())) == len(adapt)                       # every image in one concept
    assert not set(adapt.tolist()) & set(fomo.pool.tolist())            # adaptation data is not in P
    assert len(adapt) + len(fomo.pool) == len(train.images)
    datasets = {c.dataset for c in fomo.concepts}
    assert {"shapes", "scenes", "objects/twemoji"} <= datasets and len(datasets) == 10
    assert sum(c.dataset == "shapes" for c in fomo.concepts) == 36
    assert sum(c.dataset == "scenes" for c in fomo.concepts) == 12
    roles = {s.name: s.role for s in fomo.eval_sets}
    assert roles["shapes"] == roles["scenes"] == roles["objects/noto-mono"] == roles["adaptation-retrieval"] == "adaptation"
    assert roles["smileys-emotion"] == roles["pool-retrieval"] == roles["pool/openmoji"] == "retention"
    # every class of an adaptation dataset is a zero-shot class, streamed yet or not
    objects = next(s for s in fomo.eval_sets if s.name == "objects/twemoji")
    assert len(objects.classes) == sum(c.dataset == "objects/twemoji" for c in fomo.concepts)
    # side information: shapes are dated after every emoji; frequency counts pool caption words
    year = dict(zip(fomo.concepts, fomo.year))
    assert year[cs.Concept("shapes", "red star")] == year[cs.Concept("scenes", "two objects on pink")] > max(fomo.year[:-48])
    assert all(f >= 0 for f in fomo.frequency)


def test_adapt_unseen_scores_every_adaptation_item_in_the_unseen_style(emoji_root, fomo):
    from vlcp.data.fomo import build_fomo
    from vlcp.data.load import load_benchmark

    cfg = DataCfg(root=str(emoji_root))
    bench = load_benchmark(cfg)
    more = build_fomo(bench, POOL_GROUPS, cfg.train_styles, cfg.unseen_styles, adapt_unseen=True)
    before, after = {s.name: s for s in fomo.eval_sets}, {s.name: s for s in more.eval_sets}
    added = sorted(set(after) - set(before))
    adapt_groups = [g for g in bench.group_names if g not in POOL_GROUPS]
    assert len(added) == len(adapt_groups) * len(cfg.unseen_styles) and all(after[n].role == "adaptation" for n in added)
    assert all(torch.equal(after[n].labels, before[n].labels) for n in before if before[n].labels is not None)   # the others: unchanged
    assert more.concepts == fomo.concepts and len(more.train.images) == len(fomo.train.images)   # so is the stream
    objects = after[f"objects/{cfg.unseen_styles[0]}"]
    assert objects.classes == before["objects/twemoji"].classes                     # the group's subgroups
    assert len(objects.labels) == sum(it["group"] == "Objects" for it in bench.items)   # every item of the group, all splits


def test_adapt_unseen_without_an_unseen_style_names_the_field(emoji_root):
    from vlcp.run.streams.concepts import ConceptStream

    cfg = experiment_from_dict({**fomo_experiment(emoji_root, adapt_unseen=True).to_dict(),
                                "data": {"root": str(emoji_root), "stream": "concepts", "unseen_styles": []}})
    with pytest.raises(ConfigError, match="fomo.adapt_unseen: .*data.unseen_styles is empty"):
        ConceptStream.check(cfg, None)
    ConceptStream.check(fomo_experiment(emoji_root, adapt_unseen=True), None)   # the default unseen style: fine


def test_fomo_config_errors_name_the_field(emoji_root):
    with pytest.raises(ConfigError, match="fomo.mixture: λ sum to 0.9"):
        fomo_experiment(emoji_root, mixture=[0.5, 0.4, 0.0])
    with pytest.raises(ConfigError, match="fomo.ordering: unknown ordering 'alphabetical'"):
        fomo_experiment(emoji_root, ordering="alphabetical")


def test_run_trajectory_budget_and_resume(emoji_root, tmp_path):
    from vlcp.run import run_experiment

    cfg = fomo_experiment(emoji_root)
    full = run_experiment(cfg, tmp_path / "full", resume=False)
    assert len(full["tasks"]) == 3 and len(full["trajectory"]) == 3
    assert sorted(e for t in full["tasks"] for e in t) == sorted(full["stream"])
    assert {"A_KA", "A_ZS", "GM", "datasets"} <= set(full["zero_shot"])
    shapes = full["datasets"]["shapes"]
    assert {k: shapes[k] for k in ("role", "n")} == {"role": "adaptation", "n": 108}
    assert len(shapes["class_n"]) == 36 and sum(shapes["class_n"].values()) == 108   # 36 colour-shape classes, 3 each
    row = full["trajectory"][0]
    assert set(row["classes"]) == {d for d, v in full["datasets"].items() if "class_n" in v}   # adaptation classification sets
    assert set(row["classes"]["shapes"]) == set(shapes["class_n"])
    hits = sum(row["classes"]["shapes"][c] / 100 * n for c, n in shapes["class_n"].items())
    assert hits / 108 * 100 == pytest.approx(row["datasets"]["shapes"])   # the per-class scores make up the dataset's
    assert {k: full["datasets"]["scenes"][k] for k in ("role", "n")} == {"role": "adaptation", "n": 36}
    assert full["steps_per_task"] == [4, 4, 4] and full["budget"]["memory_multiplier"] == pytest.approx(1.0)
    on_disk = json.loads((tmp_path / "full" / "results.json").read_text())
    assert on_disk["trajectory"][-1]["GM"] == pytest.approx(full["trajectory"][-1]["GM"])

    run_experiment(cfg, tmp_path / "part", stop_after_task=0, resume=False)
    resumed = run_experiment(cfg, tmp_path / "part")
    assert resumed["trajectory"] == full["trajectory"]


def test_mafs_budget_gives_cheaper_methods_more_steps(emoji_root, tmp_path):
    from vlcp.run import run_experiment

    r = run_experiment(fomo_experiment(emoji_root, "locked-text", num_tasks=2), tmp_path / "lt", resume=False)
    b = r["budget"]
    assert b["memory_multiplier"] < 1 and r["steps_per_task"][0] > 4
    assert b["method"]["memory"]["gradients"] < b["full_ft"]["memory"]["gradients"]
    equal = run_experiment(fomo_experiment(emoji_root, "locked-text", num_tasks=2, budget="steps"),
                           tmp_path / "eq", resume=False)
    assert equal["steps_per_task"] == [4, 4]


@pytest.mark.parametrize("ordering", ["easy-to-hard", "similarity", "time", "frequency", "dataset"])
def test_every_ordering_streams_every_concept_once(emoji_root, fomo, ordering):
    from vlcp.models import create_model
    from vlcp.run.streams.concepts import concept_order, cut
    from vlcp.train.loop import Materializer

    cfg = fomo_experiment(emoji_root, ordering=ordering, num_tasks=0 if ordering == "dataset" else 3)
    train = fomo.train
    corpus = [c for caps in train.captions for c in caps]
    model, tok = create_model("vlcp-tiny", None, "cpu", 32)
    plain = Materializer(train.images, train.image_text, tok(corpus).view(len(train.captions), -1, tok.context_length), "cpu", False)
    order = concept_order(cfg, fomo, model, tok, "cpu", lambda ids: plain(ids, torch.Generator().manual_seed(0)), 0)
    assert sorted(order) == sorted(fomo.concepts)
    tasks = cut(cfg, order)
    if ordering == "dataset":   # one task per dataset, each dataset contiguous
        assert len(tasks) == 10 and all(len({c.dataset for c in t}) == 1 for t in tasks)
    if ordering == "time":
        assert {c.dataset for c in order[-48:]} == {"shapes", "scenes"}


def test_stream_file_import(emoji_root, fomo, tmp_path):
    from vlcp.run.streams.concepts import concept_order

    path = tmp_path / "stream.json"
    cs.write_stream(path, cs.reverse(fomo.concepts))
    cfg = fomo_experiment(emoji_root, stream_file=str(path))
    assert concept_order(cfg, fomo, None, None, "cpu", None, 0) == cs.reverse(fomo.concepts)
    cs.write_stream(path, fomo.concepts[:-1])
    with pytest.raises(ConfigError, match="fomo.stream_file"):
        concept_order(cfg, fomo, None, None, "cpu", None, 0)


def test_pool_variants(fomo):
    from vlcp.data.fomo import with_pool

    assert with_pool(fomo, "full") is fomo
    one = with_pool(fomo, "one-style")
    items = fomo.train.image_text
    assert len(one.pool) == len(fomo.pool) // 2 and len(set(items[one.pool].tolist())) == len(one.pool)
    half = with_pool(fomo, "half", seed=1)
    n_items = len(set(items[fomo.pool].tolist()))
    assert len(set(items[half.pool].tolist())) == n_items // 2 and torch.isin(half.pool, fomo.pool).all()
    noisy = with_pool(fomo, "noisy", seed=1)
    changed = (noisy.train.image_text != items).nonzero().squeeze(1)
    assert 0 < len(changed) <= len(fomo.pool) // 2 and torch.isin(changed, fomo.pool).all()
    assert torch.equal(fomo.train.image_text, items)              # the input is not modified


def test_fomo_ewc_and_si_settings_run_and_pay_the_fisher_pass(emoji_root, tmp_path):
    """EWC and SI in FoMo's code's forms (its constants, with the default `fisher_merge: online`
    and `path: lr_grad2`, which params.yaml's fomo-ewc / fomo-si keep as settings: those
    experiments run the paper text's rolling-average Fisher and exact path integral): EWC's Fisher
    pass over the task's pairs is measured (after_task's FLOPs) and paid from the task's MAFs
    budget; SI with the code's ω = Σ lr·g² trains with its penalty from the second task on."""
    from vlcp.run import run_experiment

    def cfg(method):
        return experiment_from_dict({
            "name": f"fomo-{method['name']}", "seed": 0, "data": {"root": str(emoji_root), "stream": "concepts"},
            "model": {"name": "vlcp-tiny"}, "method": method, "fomo": {"num_tasks": 2, "steps_per_task": 4},
            "train": {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "warmup_frac": 0.1},
            "eval": {"batch_size": 256}})

    ewc = run_experiment(cfg({"name": "ewc", "ewc_lambda": 1.0, "half": True, "fisher_samples": 50000,
                              "fisher_batch_size": 16}), tmp_path / "ewc", resume=False)
    b = ewc["budget"]
    assert b["method"]["task_flops"] > 4 * b["full_ft"]["flops"]          # more than the task's 4 steps' worth
    assert b["task_mafs"] > 0 and ewc["steps_per_task"] == [1, 1]
    assert "ewc" in ewc["train"][1]["terms"]
    si = run_experiment(cfg({"name": "si", "path": "lr_grad2", "si_lambda": 0.5, "si_xi": 1.0}), tmp_path / "si",
                        resume=False)
    assert si["train"][1]["terms"]["si"] > 0


def test_order_seed_streams_one_order_at_every_run_seed(emoji_root, tmp_path):
    """FoMo's code streams one shipped file at every seed; so does the concept stream by default
    (`fomo.order_seed` 0), while `order_seed: null` gives each run seed its own order."""
    from dataclasses import replace

    from vlcp.run import run_experiment

    def stream(seed, **fomo):
        cfg = fomo_experiment(emoji_root, steps_per_task=1, **fomo)
        cfg = replace(cfg, seed=seed)
        return run_experiment(cfg, tmp_path / f"s{seed}-{fomo}", resume=False, stop_after_task=0)["stream"]

    fixed = stream(1)
    assert fixed == stream(2) == stream(3, order_seed=0)
    assert stream(1, order_seed=None) != stream(2, order_seed=None)
    assert stream(0, order_seed=None) == stream(4)                 # order seed 0 is run seed 0's order
    with pytest.raises(ConfigError, match="order_seed"):
        fomo_experiment(emoji_root, order_seed=-1)
