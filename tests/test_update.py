"""`vlcp update` / `vlcp eval` end to end on small synthetic data in every layout users have, with
the tiny model: two successive updates, an ImageFolder keep-set, the exported model loads in
open_clip, the history holds both updates, the report renders."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from vlcp.errors import ConfigError, VlcpError
from vlcp.update import evaluate, update
from vlcp.update.history import load_history, trajectory
from vlcp.update.recipes import pick

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 60, 220), "yellow": (230, 210, 40),
           "purple": (140, 50, 170), "orange": (240, 140, 20)}
SHAPES = ("square", "circle", "triangle")
TRAIN = {"lr": 1e-3, "batch_size": 8, "device": "cpu", "num_threads": 1, "progress": False}
OPTIONS = {"steps": 3, "holdout": 0.25, "max_eval": 16, "min_candidates": 0}   # the sets are small: score them anyway
SMALL = {"holdout": 0.25, "max_eval": 16, "min_candidates": 0}                  # vlcp eval of those folders


def picture(colour: str, shape: str, k: int) -> Image.Image:
    """A 40x40 picture of a coloured shape, jittered by k (different pictures of one caption)."""
    im = Image.new("RGB", (40, 40), (250, 250, 250))
    d, o = ImageDraw.Draw(im), k % 5
    box = (6 + o, 6 + o, 30 + o, 30 + o)
    if shape == "square":
        d.rectangle(box, fill=COLOURS[colour])
    elif shape == "circle":
        d.ellipse(box, fill=COLOURS[colour])
    else:
        d.polygon([(box[0], box[3]), (box[2], box[3]), ((box[0] + box[2]) // 2, box[1])], fill=COLOURS[colour])
    return im


def pairs(chunk: int, n: int = 24):
    """(file name, image, caption) of a chunk: chunk 0 draws from the first colours, chunk 1 from the others."""
    colours = list(COLOURS)[:4] if chunk == 0 else list(COLOURS)[2:]
    out = []
    for k in range(n):
        c, s = colours[k % len(colours)], SHAPES[(k // len(colours)) % len(SHAPES)]
        out.append((f"c{chunk}_{k:03d}.png", picture(c, s, k), f"a {c} {s}"))
    return out


def png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def make_chunk(root: Path, layout: str, chunk: int) -> str:
    """Chunk `chunk` in `layout` under root; returns the path `vlcp update` takes (the chunk's name,
    the path's own, is `<layout>-<chunk>`)."""
    items = pairs(chunk)
    base = root / f"{layout}-{chunk}"
    images = base if layout == "folder" else base / "images"
    if layout != "wds":
        images.mkdir(parents=True)
        for name, im, _ in items:
            im.save(images / name)
    if layout == "folder":
        for name, _, cap in items:
            (images / name).with_suffix(".txt").write_text(cap + "\n")
        return str(base)
    if layout in ("csv", "tsv"):
        sep, head = (",", "filepath,title") if layout == "csv" else ("\t", "path\tcaption")
        lines = [head] + [f"images/{name}{sep}{cap}" for name, _, cap in items]
        (base / f"{layout}-{chunk}.{layout}").write_text("\n".join(lines) + "\n")
        return str(base / f"{layout}-{chunk}.{layout}")
    if layout == "coco":
        coco = {"images": [{"id": i, "file_name": f"images/{name}"} for i, (name, _, _) in enumerate(items)],
                "annotations": [{"id": i, "image_id": i, "caption": cap} for i, (_, _, cap) in enumerate(items)]}
        (base / f"coco-{chunk}.json").write_text(json.dumps(coco))
        return str(base / f"coco-{chunk}.json")
    if layout == "karpathy":
        data = {"images": [{"filepath": "images", "filename": name, "split": "train",
                            "sentences": [{"raw": cap}, {"raw": cap + " on white"}]} for name, _, cap in items]}
        (base / f"karpathy-{chunk}.json").write_text(json.dumps(data))
        return str(base / f"karpathy-{chunk}.json")
    if layout == "wds":
        base.mkdir(parents=True)
        for s in range(2):
            with tarfile.open(base / f"{s:03d}.tar", "w") as tar:
                for name, im, cap in items[s::2]:
                    for ext, data in (("png", png(im)), ("txt", cap.encode())):
                        info = tarfile.TarInfo(f"{Path(name).stem}.{ext}")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
        return str(base / "{000..001}.tar")
    raise ValueError(layout)


@pytest.fixture(scope="module")
def keep_folder(tmp_path_factory) -> Path:
    """An ImageFolder keep-set: three colour classes, four pictures each."""
    root = tmp_path_factory.mktemp("keep") / "colours"
    for c in ("red", "green", "blue"):
        (root / c).mkdir(parents=True)
        for k in range(4):
            picture(c, SHAPES[k % 3], k).save(root / c / f"{k}.png")
    return root


def run_update(chunk, out, **kw):
    kw.setdefault("train", TRAIN)
    kw.setdefault("options", OPTIONS)
    return update([chunk], out, **kw)


def exported_features(out: Path):
    """The exported model as open_clip builds it, and the features it gives on a fixed batch."""
    import open_clip

    from vlcp.models.clip import register_configs
    register_configs()
    model = open_clip.create_model("vlcp-tiny", pretrained=str(out / "model.pt")).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 3, 32, 32, generator=g)
    tok = open_clip.get_tokenizer("vlcp-tiny")(["a red square", "a blue circle", "a green triangle"])
    with torch.no_grad():
        return model.encode_image(x), model.encode_text(tok)


@pytest.mark.parametrize("layout", ["folder", "csv", "tsv", "wds", "coco", "karpathy"])
def test_two_updates_in_each_layout(tmp_path, keep_folder, layout):
    first, second = make_chunk(tmp_path, layout, 0), make_chunk(tmp_path, layout, 1)
    csv = {"csv_img_key": "path", "csv_caption_key": "caption"} if layout == "tsv" else {}
    out = tmp_path / "model"
    h1 = run_update(first, out, model="vlcp-tiny", keep=[f"colours={keep_folder}"],
                    options={**OPTIONS, **csv}, report=layout == "folder")
    h2 = run_update(second, out, options={**OPTIONS, **csv}, report=True)

    assert [u["update"] for u in h2["updates"]] == [1, 2] and len(h1["updates"]) == 1
    assert load_history(out) == json.loads(json.dumps(h2))
    u1, u2 = h2["updates"]
    assert u1["data"]["read"] == 24 and u1["data"]["train"] + u1["data"]["heldout"] == 24
    # the second update scores the first chunk's held-out slice too, and the keep-set, before and after
    assert set(u2["before"]["datasets"]) == {u1["chunk"], u2["chunk"], "colours"}
    assert u2["before"]["A_ZS"] == pytest.approx(u2["before"]["datasets"]["colours"])
    assert u2["before"]["A_KA"] == pytest.approx((u2["before"]["datasets"][u1["chunk"]]
                                                  + u2["before"]["datasets"][u2["chunk"]]) / 2)
    assert u2["before"]["datasets"] == pytest.approx(u1["after"]["datasets"] | {u2["chunk"]: u2["before"]["datasets"][u2["chunk"]]})
    assert u2["steps"] == 3 and u2["samples"] == 3 * 8 and u2["flops"] > 0
    assert len(trajectory(h2)) == 3
    # the exported model is the trained one, as open_clip loads it
    img, txt = exported_features(out)
    assert torch.isfinite(img).all() and torch.isfinite(txt).all()
    assert (out / "model.pt").read_bytes() == (out / "runs" / "002" / "model.pt").read_bytes()
    assert (out / "model.pt").read_bytes() != (out / "runs" / "001" / "model.pt").read_bytes()
    html = (out / "report.html").read_text()
    assert "accumulation" in html and "Traceback" not in html and "<img" in html   # (papermill stops on a cell error)


def test_from_another_folder_leaves_it_as_it_was(tmp_path, keep_folder):
    """`--from PREV --out NEW` continues PREV into NEW and leaves PREV as it was (one DVC stage per chunk)."""
    prev = tmp_path / "prev"
    run_update(make_chunk(tmp_path, "karpathy", 0), prev, model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    before = {p.relative_to(prev): p.read_bytes() for p in prev.rglob("*") if p.is_file()}
    h = run_update(make_chunk(tmp_path, "folder", 1), tmp_path / "new", start=prev, report=False)
    assert {p.relative_to(prev): p.read_bytes() for p in prev.rglob("*") if p.is_file()} == before
    assert len(h["updates"]) == 2 and h["keep"] == [f"colours={keep_folder.resolve()}"]
    assert h["updates"][0]["data"]["read"] == 24 and load_history(tmp_path / "new") == json.loads(json.dumps(h))


def test_an_interrupted_first_update_resumes_on_the_same_command(tmp_path, keep_folder, monkeypatch):
    """Killed after its run but before its history: the folder says so, refuses another command,
    and the same command finishes it; the result equals an uninterrupted update's. One copy of the
    weights (a hard link) and no checkpoint stay after success."""
    import vlcp.update as upd

    chunk, out = make_chunk(tmp_path, "folder", 0), tmp_path / "m"
    kw = dict(model="vlcp-tiny", keep=[f"colours={keep_folder}"], report=False)

    def killed(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(upd, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        run_update(chunk, out, **kw)
    monkeypatch.undo()
    assert (out / "pending.json").exists() and not (out / "history.json").exists()
    with pytest.raises(VlcpError, match="update 1 .* has not finished: run the same vlcp update command"):
        evaluate(folder=out)
    with pytest.raises(VlcpError, match="differs in recipe"):
        run_update(chunk, out, recipe="lora", **kw)
    h = run_update(chunk, out, **kw)
    assert len(h["updates"]) == 1 and not (out / "pending.json").exists()
    assert not list(out.rglob("checkpoint*.pt"))
    assert (out / "model.pt").stat().st_ino == (out / "runs" / "001" / "model.pt").stat().st_ino
    clean = run_update(chunk, tmp_path / "clean", **kw)
    assert clean["updates"][0]["after"] == h["updates"][0]["after"]
    assert (out / "model.pt").read_bytes() == (tmp_path / "clean" / "model.pt").read_bytes()


def test_an_update_folder_moved_with_its_data_finds_it_and_names_what_is_missing(tmp_path, keep_folder, capsys):
    """history.json keeps each source absolute and, inside the folder's project, relative to the
    folder: a project moved as a whole still scores; a source that is gone is named, with the
    option that points at it."""
    from vlcp.cli import main

    project = tmp_path / "project"
    (project / ".dvc").mkdir(parents=True)
    shutil.copytree(keep_folder, project / "keep" / "colours")
    chunk = make_chunk(project / "chunks", "csv", 0)
    run_update(chunk, project / "models" / "m", model="vlcp-tiny", keep=[str(project / "keep" / "colours")],
               report=False)
    h = load_history(project / "models" / "m")
    assert h["relative"] == {"csv-0": "../../chunks/csv-0/csv-0.csv", "colours": "../../keep/colours"}
    before = evaluate(folder=project / "models" / "m", options=SMALL)
    moved = tmp_path / "elsewhere"
    shutil.move(project, moved)
    after = evaluate(folder=moved / "models" / "m", options=SMALL)                   # from the relative paths
    assert after["datasets"] == pytest.approx(before["datasets"])
    shutil.move(moved / "keep" / "colours", tmp_path / "colours-now")
    with pytest.raises(VlcpError, match="the keep-set 'colours' is not at .* nor at .*; if it moved, point at it "
                                        "with --moved colours=PATH"):
        evaluate(folder=moved / "models" / "m", options=SMALL)
    again = evaluate(folder=moved / "models" / "m", moved=[f"colours={tmp_path / 'colours-now'}"], options=SMALL)
    assert again["datasets"] == pytest.approx(before["datasets"])
    assert main(["eval", "--min-candidates", "0", str(moved / "models" / "m"), "--moved", f"colours={tmp_path / 'colours-now'}",
                 "--json", str(tmp_path / "s.json")]) == 0
    assert main(["eval", "--min-candidates", "0", str(moved / "models" / "m"), "--moved", f"colours={tmp_path / 'colours-now'}",
                 "--json", str(tmp_path / "s.json")]) == 2                # never over a file of the user's
    assert "s.json exists" in capsys.readouterr().err


def test_images_from_outside_the_chunk_are_refused_unless_followed(tmp_path, keep_folder, capsys):
    """A caption folder's symlink out of the chunk, or a CSV row ../x.png, is refused (exit 2, nothing
    written) unless --follow-links is given; then it is read, and said."""
    chunk = Path(make_chunk(tmp_path, "folder", 0))
    elsewhere = tmp_path / "elsewhere.png"
    shutil.move(chunk / "c0_001.png", elsewhere)
    (chunk / "c0_001.png").symlink_to(elsewhere)
    from vlcp.cli import main
    code = main(["update", str(chunk), "--out", str(tmp_path / "refused"), "--model", "vlcp-tiny",
                 "--keep", str(keep_folder), "--steps", "2", "--no-report"])
    assert code == 2 and not (tmp_path / "refused").exists()
    err = capsys.readouterr().err
    assert "1 image(s) resolve outside" in err and "give --follow-links" in err
    with pytest.raises(VlcpError, match=r"folder-0: 1 image\(s\) resolve outside .*give --follow-links"):
        run_update(str(chunk), tmp_path / "m", model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    h = run_update(str(chunk), tmp_path / "m", model="vlcp-tiny", keep=[str(keep_folder)], report=False,
                   options={**OPTIONS, "follow_links": True})
    assert h["updates"][0]["data"]["outside"] == 1
    out = capsys.readouterr().out
    assert "folder-0: 1 image(s) are read from outside" in out
    assert "vlcp update: time: one training step measured at" in out          # the plan's time, from a measured step


def test_time_estimate_scales_a_measured_step():
    from vlcp.run.streams.user import time_estimate

    assert time_estimate(0.5, 40, 3) == ("vlcp update: time: one training step measured at 0.50 s here, so about 20 s "
                                         "of training for 40 step(s), plus 3 evaluation(s)")
    assert "about 2.5 min of training" in time_estimate(3.0, 50, 2)


def test_corrupt_images_are_skipped_and_counted(tmp_path, keep_folder):
    chunk = Path(make_chunk(tmp_path, "folder", 0))   # (images and captions directly in the folder)
    (chunk / "c0_000.png").write_bytes(b"not a png")
    (chunk / "c0_001.txt").unlink()   # an image without its caption
    h = run_update(str(chunk), tmp_path / "out", model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    data = h["updates"][0]["data"]
    assert data["read"] == 22 and sum(data["skipped"].values()) == 2
    assert data["skipped"] == {"no caption": 1, "unreadable image": 1}


def test_auto_picks_the_highest_gm_of_its_trial(tmp_path):
    """A keep-set large enough (60 images) for a trial's gain to show beyond its sampling noise."""
    keep = tmp_path / "colours"
    for c in ("red", "green", "blue"):
        (keep / c).mkdir(parents=True)
        for k in range(20):
            picture(c, SHAPES[k % 3], k).save(keep / c / f"{k}.png")
    h = run_update(make_chunk(tmp_path, "folder", 0), tmp_path / "out", model="vlcp-tiny", keep=[str(keep)],
                   recipe="auto", candidates=("full", "lora", "zs-merge"), trial_fraction=0.5, report=False,
                   train={**TRAIN, "lr": 1e-2}, options={**OPTIONS, "steps": 16, "max_eval": 64})
    u = h["updates"][0]
    trial = u["trial"]
    assert [t["recipe"] for t in trial] == ["full", "lora", "zs-merge"]
    assert all(t["steps"] == 8 for t in trial)
    assert u["recipe"] == pick(trial)[0] and all(t["GM_halfwidth"] > 0 and t["flops"] > 0 for t in trial)
    assert u["recipe_source"] == "trial" and next(t for t in trial if t["recipe"] == u["recipe"])["moved"]
    assert (tmp_path / "out" / "runs" / "001" / "trial" / "lora" / "results.json").exists()


def test_pick_rule():
    rows = [{"recipe": "full", "GM": 20.0}, {"recipe": "lora", "GM": 25.5, "flops": 9.0},
            {"recipe": "ema-merge", "GM": 25.5, "flops": 4.0}, {"recipe": "zs-merge", "GM": None}]
    assert pick(rows)[0] == "ema-merge"                           # an exact tie goes to the cheaper, not the first
    assert pick([{"recipe": "zs-merge", "GM": None}, {"recipe": "full", "GM": 1.0}])[0] == "full"
    assert pick([{"recipe": "zs-merge", "GM": None}])[0] == "zs-merge"
    with pytest.raises(ConfigError):
        pick([])
    # within each other's sampling noise (half-widths 3: the difference's is 4.2): tied, the cheaper wins, and says so
    noisy = [{"recipe": "full", "GM": 30.0, "GM_halfwidth": 3.0, "flops": 10.0},
             {"recipe": "lora", "GM": 27.0, "GM_halfwidth": 3.0, "flops": 2.0},
             {"recipe": "zs-merge", "GM": 20.0, "GM_halfwidth": 3.0, "flops": 1.0}]
    recipe, why = pick(noisy)
    assert recipe == "lora" and "tied" in why and "zs-merge" not in why
    recipe, why = pick([{**r, "GM_halfwidth": 0.5} for r in noisy])     # now 3 points is beyond the noise
    assert recipe == "full" and "highest GM" in why


def test_sampling_half_widths_hand_computed():
    from vlcp.eval.continual import differs, score_halfwidth, trade_off_halfwidths

    assert score_halfwidth(50.0, 100) == pytest.approx(1.959964 * 0.05 * 100, rel=1e-6)     # 9.8 points
    assert score_halfwidth(100.0, 9) == pytest.approx(1.959964 * (0.9 * 0.1 / 9) ** 0.5 * 100, rel=1e-6)  # p held off 1
    assert score_halfwidth(None, 10) is None and score_halfwidth(50.0, 0) is None
    row = {"datasets": {"a": 50.0, "b": 50.0, "k": 80.0}, "A_KA": 50.0, "A_ZS": 80.0, "GM": 40 ** 0.5 * 10}
    h = trade_off_halfwidths(row, {"a": 100, "b": 100, "k": 100}, ["a", "b"], ["k"])
    assert h["A_KA"] == pytest.approx(9.79982 / 2 ** 0.5, rel=1e-4) and h["A_ZS"] == pytest.approx(1.959964 * 0.4 * 100 / 10, rel=1e-5)
    assert h["GM"] == pytest.approx(0.5 * row["GM"] * ((h["A_KA"] / 50) ** 2 + (h["A_ZS"] / 80) ** 2) ** 0.5)
    assert differs(50.0, 3.0, 56.0, 4.0) and not differs(50.0, 3.0, 54.0, 4.0) and not differs(50.0, None, 90.0, 1.0)


def test_scores_need_range_and_a_still_update_says_what_to_try(tmp_path, keep_folder, capsys):
    """With the default minimum (20 candidates; R@5 over at least 25), a 7-pair held-out slice and a
    12-image keep-set are not scored, and said; a one-class keep-set is an error; an update whose
    scores do not move beyond their sampling intervals prints what to try."""
    chunk = make_chunk(tmp_path, "folder", 0)
    h = run_update(chunk, tmp_path / "a", model="vlcp-tiny", keep=[f"colours={keep_folder}"], report=False,
                   options={**OPTIONS, "min_candidates": 20})
    printed = capsys.readouterr().out
    assert "folder-0 is not scored: R@5 over 7 candidates" in printed and "no score of" not in printed and "raise --holdout (now 0.25)" in printed
    assert "colours is not scored: zero-shot over 12 images" in printed
    assert h["updates"][0]["after"]["GM"] is None and h["updates"][0]["data"]["refused"].startswith("R@5 over 7")
    one = tmp_path / "one"
    shutil.copytree(keep_folder / "red", one / "red")
    with pytest.raises(ConfigError, match="one: an ImageFolder keep-set needs at least 2 classes"):
        run_update(chunk, tmp_path / "b", model="vlcp-tiny", keep=[f"one={one}"], report=False)
    run_update(chunk, tmp_path / "c", model="vlcp-tiny", keep=[f"colours={keep_folder}"], report=False,
               train={**TRAIN, "lr": 1e-12}, options={**OPTIONS, "steps": 1})
    assert "no score of update 1 moved beyond its sampling interval: try a higher --lr (now 1e-12)" in capsys.readouterr().out


def test_budgets(tmp_path, keep_folder):
    chunk = make_chunk(tmp_path, "folder", 0)
    h = run_update(chunk, tmp_path / "s", model="vlcp-tiny", keep=[str(keep_folder)], report=False,
                   options={**OPTIONS, "budget": "samples", "samples": 20})
    assert h["updates"][0]["steps"] == 3   # ceil(20 / 8)
    h = run_update(chunk, tmp_path / "m", model="vlcp-tiny", keep=[str(keep_folder)], report=False, recipe="lora",
                   options={**OPTIONS, "budget": "mafs", "steps": 4})
    run = json.loads((tmp_path / "m" / "runs" / "001" / "results.json").read_text())
    assert h["updates"][0]["steps"] == run["budget"]["steps_per_task"] >= 1
    assert run["budget"]["full_ft"]["flops"] > 0 and run["budget"]["memory_multiplier"] < 1   # LoRA keeps less than full FT


def test_pretraining_replay_and_any_method_by_name(tmp_path, keep_folder):
    """--pretraining-data mixes pretraining-like pairs into every batch (λP); a vlcp method by name
    (ER, with its own settings through --set) is a recipe too."""
    h = run_update(make_chunk(tmp_path, "folder", 0), tmp_path / "m", model="vlcp-tiny", keep=[str(keep_folder)],
                   report=False, recipe="er", overrides=["method.buffer_size=16"],
                   options={**OPTIONS, "pretraining": f"pool={make_chunk(tmp_path, 'coco', 1)}",
                            "mixture": [0.5, 0.5, 0.0]})
    run = json.loads((tmp_path / "m" / "runs" / "001" / "results.json").read_text())
    assert run["config"]["method"] == {"name": "er", **run["config"]["method"], "buffer_size": 16}
    assert run["data"]["pool"]["read"] == 24 and "pool" not in run["datasets"]   # replayed, not scored
    assert h["updates"][0]["recipe"] == "er" and h["updates"][0]["steps"] == 3
    with pytest.raises(ConfigError, match="update.pretraining is empty"):
        run_update(make_chunk(tmp_path, "csv", 0), tmp_path / "m2", model="vlcp-tiny", report=False,
                   options={**OPTIONS, "mixture": [0.5, 0.5, 0.0]})


def test_a_users_folder_is_never_written_into(tmp_path, keep_folder):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(VlcpError, match="not an update folder"):
        run_update(make_chunk(tmp_path, "folder", 0), mine, model="vlcp-tiny", report=False)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    second = make_chunk(tmp_path, "folder", 1)
    with pytest.raises(VlcpError, match="not an update folder"):   # nor as the folder a --from update goes to
        run_update(second, mine, start=tmp_path / "whatever", report=False)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(ConfigError, match="--model"):
        run_update(second, tmp_path / "new", report=False)


def test_eval_scores_a_folder_and_a_weights_file(tmp_path, keep_folder, capsys):
    from vlcp.cli import main

    out = tmp_path / "out"
    run_update(make_chunk(tmp_path, "csv", 0), out, model="vlcp-tiny", keep=[f"colours={keep_folder}"], report=False)
    row = evaluate(folder=out, options=SMALL)
    h = load_history(out)
    assert row["datasets"] == pytest.approx(h["updates"][0]["after"]["datasets"])
    row2 = evaluate(model="vlcp-tiny", pretrained=str(out / "model.pt"), keep=[f"colours={keep_folder}"], options=SMALL)
    assert row2["datasets"]["colours"] == pytest.approx(row["datasets"]["colours"]) and row2["A_KA"] is None
    assert main(["eval", "--min-candidates", "0", str(out), "--json", str(tmp_path / "scores.json")]) == 0
    printed = capsys.readouterr().out
    assert "colours" in printed and "A_ZS" in printed
    assert json.loads((tmp_path / "scores.json").read_text())["datasets"]["colours"] == pytest.approx(row["datasets"]["colours"])


def test_cli_update_runs_and_prints_the_gain(tmp_path, keep_folder, capsys):
    from vlcp.cli import main

    chunk = make_chunk(tmp_path, "folder", 0)
    rc = main(["update", chunk, "--out", str(tmp_path / "m"), "--model", "vlcp-tiny", "--keep", str(keep_folder),
               "--steps", "2", "--lr", "1e-3", "--batch-size", "8", "--device", "cpu", "--threads", "1",
               "--holdout", "0.25", "--min-candidates", "0", "--no-report", "--set", "train.progress=false"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "update 1 (folder-0, full): A_KA" in out and "wrote" in out and "(95 % sampling intervals)" in out
    # the plan, before training: steps, evaluations and their text encodings (3 classes × 7 templates), the disk
    assert "vlcp update: plan: 1 chunk(s) × 2 steps at batch 8 (16 samples); 2 evaluations of 2 set(s)" in out
    assert "text encodings each" in out and "MB kept (the model)" in out
    assert main(["update", chunk, "--out", str(tmp_path / "m2"), "--model", "vlcp-tiny", "--recipe", "nope"]) == 2
    # plain open_clip, in a process that never imports vlcp, loads the folder (vlcp-tiny is no open_clip
    # model): open_clip_config.json and open_clip_pytorch_model.bin, a hard link to model.pt
    folder = tmp_path / "m"
    assert (folder / "open_clip_pytorch_model.bin").stat().st_ino == (folder / "model.pt").stat().st_ino
    plain = ("import sys, torch, open_clip\n"
             "m = open_clip.create_model('local-dir:' + sys.argv[1]).eval()\n"
             "assert not [n for n in sys.modules if n == 'vlcp' or n.startswith('vlcp.')]\n"
             "x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))\n"
             "with torch.no_grad(): torch.save(m.encode_image(x), sys.argv[2])\n")
    done = subprocess.run([sys.executable, "-c", plain, str(folder), str(tmp_path / "f.pt")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert torch.allclose(torch.load(tmp_path / "f.pt"), exported_features(folder)[0])


def test_dvc_example_runs_one_stage_per_chunk(tmp_path, keep_folder):
    """examples/update: a monthly-update pipeline; `dvc repro` runs a stage per chunk, each from the last."""
    from vlcp.models import create_model
    from vlcp.models.export import save_open_clip

    example = Path(__file__).parents[1] / "examples" / "update"
    work = tmp_path / "monthly"
    shutil.copytree(example, work)
    for month, chunk in (("2026-01", 0), ("2026-02", 1)):
        src = Path(make_chunk(tmp_path, "folder", chunk))
        shutil.copytree(src, work / "chunks" / month)
    shutil.copytree(keep_folder, work / "keep" / "colours")
    model, _ = create_model("vlcp-tiny")
    save_open_clip(model, work / "start.pt")
    params = (work / "params.yaml").read_text()
    venv = Path(sys.executable).parent
    for old, new in (("model: ViT-B-32", "model: vlcp-tiny"), ("pretrained: ViT-B-32.pt", "pretrained: start.pt"),
                     ("steps: 500", "steps: 2"), ("lr: 1.0e-5", "lr: 1.0e-3"), ("batch_size: 128", "batch_size: 8"),
                     ("vlcp: vlcp ", f"vlcp: {venv / 'vlcp'} ")):
        assert old in params, old
        params = params.replace(old, new)
    (work / "params.yaml").write_text(params)
    # the README's convention: the venv's dvc by its path, the venv not on PATH (the `vlcp:` param names its vlcp)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != venv.resolve())
    env = dict(os.environ, PATH=path, DVC_NO_ANALYTICS="1")
    dvc = str(venv / "dvc")
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=work, check=True, env=env)
    r = subprocess.run([dvc, "repro"], cwd=work, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Running stage 'update@2026-02'" in r.stdout                  # named after the month
    h = load_history(work / "models" / "2026-02")
    assert [u["chunk"] for u in h["updates"]] == ["2026-01", "2026-02"]
    assert (work / "models" / "2026-02" / "report.html").exists()
    assert "up to date" in subprocess.run([dvc, "repro"], cwd=work, capture_output=True, text=True, env=env).stdout


def ddp_update(rank, world, port, chunk, out, keep):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    try:
        run_update(chunk, out, model="vlcp-tiny", keep=[keep], report=False)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.slow
def test_update_under_two_process_ddp_matches_one_process(tmp_path, keep_folder):
    """`torchrun -m vlcp update ...`: every rank trains its slice of each batch, the main rank
    evaluates and writes; the model and the scores are those of one process."""
    import socket

    import torch.multiprocessing as mp

    chunk = make_chunk(tmp_path, "folder", 0)
    single = run_update(chunk, tmp_path / "single", model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(ddp_update, args=(2, port, chunk, str(tmp_path / "ddp"), str(keep_folder)), nprocs=2, join=True)
    ddp = load_history(tmp_path / "ddp")
    run = json.loads((tmp_path / "ddp" / "runs" / "001" / "results.json").read_text())
    assert run["world_size"] == 2 and len(ddp["updates"]) == 1
    a, b = single["updates"][0]["after"]["datasets"], ddp["updates"][0]["after"]["datasets"]
    assert b == pytest.approx(a, abs=1e-3)
    wa, wb = (torch.load(tmp_path / d / "model.pt", weights_only=True) for d in ("single", "ddp"))
    for k, v in wa.items():
        w = wb[k]
        if k.endswith("attn.in_proj_bias"):
            # its key third gets no gradient but float noise (softmax is invariant to adding q·b_k to each of a
            # query's scores), which Adam turns into steps of ~lr: arbitrary in both runs (they differed by 2e-4
            # on an AVX-512 CPU), bounded by Adam's step size; the query and value thirds must agree
            d = len(v) // 3
            assert (w[d:2 * d] - v[d:2 * d]).abs().max() <= 3 * TRAIN["lr"] * OPTIONS["steps"], k
            v, w = torch.cat([v[:d], v[2 * d:]]), torch.cat([w[:d], w[2 * d:]])
        torch.testing.assert_close(w, v, rtol=1e-3, atol=1e-4, msg=k)


def test_eval_and_a_continued_update_read_as_the_folder_did(tmp_path, keep_folder):
    """The folder keeps how its first update read and scored its sources (history.json "read"):
    `vlcp eval DIR` and a continued update without those options score the same held-out slices
    and sets; an option given again overrides it."""
    chunk = make_chunk(tmp_path, "folder", 0)
    options = {**OPTIONS, "holdout": 0.4, "max_eval": 12}
    h = run_update(chunk, tmp_path / "m", model="vlcp-tiny", keep=[str(keep_folder)], report=False, options=options)
    assert h["read"]["holdout"] == 0.4 and h["read"]["max_eval"] == 12
    after = h["updates"][0]["after"]
    scored = evaluate(folder=tmp_path / "m")                         # no options: the folder's own
    assert scored["datasets"] == pytest.approx(after["datasets"])
    other = evaluate(folder=tmp_path / "m", options={"holdout": 0.2, "min_candidates": 0})
    assert other["sizes"] != scored["sizes"]                         # given again: it wins
    h2 = run_update(make_chunk(tmp_path, "folder", 1), tmp_path / "m", report=False,
                    options={k: v for k, v in OPTIONS.items() if k not in ("holdout", "max_eval")})
    before = h2["updates"][1]["before"]["datasets"]                  # the model after update 1, on its sets
    assert h2["read"]["holdout"] == 0.4 and {n: before[n] for n in after["datasets"]} == pytest.approx(after["datasets"])


@pytest.mark.slow
def test_a_first_update_killed_in_its_second_chunk_resumes_to_the_same_model(tmp_path, keep_folder):
    """`kill -9` during the second chunk of a first update, then the same command again: the folder's
    model.pt equals an uninterrupted update's, tensor for tensor."""
    import signal
    import time

    def weights(path):
        state = torch.load(path, map_location="cpu", weights_only=True)
        return state.get("state_dict", state)

    chunks = [make_chunk(tmp_path, "folder", 0), make_chunk(tmp_path, "folder", 1)]

    def command(out):
        return [sys.executable, "-m", "vlcp", "update", *chunks, "--out", str(out), "--model", "vlcp-tiny",
                "--keep", str(keep_folder), "--steps", "80", "--lr", "1e-3", "--batch-size", "8", "--device", "cpu",
                "--threads", "1", "--holdout", "0.25", "--max-eval", "16", "--min-candidates", "0", "--no-report"]

    out = tmp_path / "killed"
    proc = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = out / "runs" / "001" / "checkpoint.pt"
    deadline = time.time() + 600
    while not first.exists() and proc.poll() is None and time.time() < deadline:   # chunk 1 done, chunk 2 training
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the update finished before it could be killed: give it more steps"
    assert (out / "pending.json").exists() and not (out / "history.json").exists()
    assert subprocess.run(command(out), capture_output=True, text=True).returncode == 0
    assert subprocess.run(command(tmp_path / "clean"), capture_output=True, text=True).returncode == 0
    resumed, clean = weights(out / "model.pt"), weights(tmp_path / "clean" / "model.pt")
    assert resumed.keys() == clean.keys()
    assert all(torch.equal(resumed[k], clean[k]) for k in clean)


def test_a_chunk_and_a_keep_set_of_one_name_are_refused_before_anything_is_read(tmp_path, keep_folder, monkeypatch):
    """A COCO JSON chunk is named after its file: a keep-set of that name is a clear error, raised
    before any image is read, and nothing is written."""
    import vlcp.run.streams.user as user

    chunk = make_chunk(tmp_path, "coco", 0)                       # .../coco-0.json: named "coco-0"
    monkeypatch.setattr(user, "read_checked", lambda *a, **k: pytest.fail("read the data before the names"))
    with pytest.raises(ConfigError, match="two sources are named 'coco-0'; name them"):
        run_update(chunk, tmp_path / "m", model="vlcp-tiny", keep=[f"coco-0={keep_folder}"], report=False)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("recipe", ["moe-adapters", "zscl"])
def test_update_refuses_a_method_that_needs_the_pretraining_reference_set(tmp_path, recipe):
    """ZSCL and MoE-Adapters need pairs the pretrained model saw (a `reference` set), which a user's
    chunks do not supply: the update says so in one line before it trains, and writes no folder
    (so no MoE-routed model ever reaches the open_clip export, which could not represent its router)."""
    chunk = make_chunk(tmp_path, "folder", 0)
    with pytest.raises(ConfigError, match=rf"'{recipe}' needs a reference set of pairs the pretrained model saw"):
        run_update(chunk, tmp_path / "out", model="vlcp-tiny", recipe=recipe, report=False)
    assert not (tmp_path / "out").exists()
