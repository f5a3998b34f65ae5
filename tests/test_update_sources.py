"""How `vlcp update` and `vlcp eval` read their sources, as a user hits it: --image-root beside a
folder chunk, file names that are not UTF-8, a symlink loop, a malformed pending.json, a chunk
re-created with other data, byte-identical images across the held-out split. Most cases read the
user stream directly (no training); the few that need a history run a tiny update."""
import os
import shutil
from pathlib import Path

import pytest
import torch
from test_update import SMALL, keep_folder, make_chunk, picture, run_update  # noqa: F401 (keep_folder: a fixture)

from vlcp.config import experiment_from_dict
from vlcp.errors import VlcpError
from vlcp.run.streams.user import UserStream
from vlcp.update import evaluate
from vlcp.update.history import load_history, write_history

READ = {"holdout": 0.25, "max_eval": 16, "min_candidates": 0}


def stream(chunks, **options) -> UserStream:
    """The user stream of `vlcp update` over `chunks`, its sources read (`load_sets`: its training
    parts in `parts`), no model."""
    cfg = experiment_from_dict({
        "name": "sources", "data": {"benchmark": "user", "stream": "user", "unseen_styles": [], "image_size": 32},
        "model": {"name": "vlcp-tiny"}, "train": {"device": "cpu", "progress": False},
        "update": {**READ, **options, "chunks": list(chunks)}})
    s = UserStream(cfg, torch.device("cpu"))
    s.parts = s.load_sets()
    return s


def test_image_root_leaves_a_folder_chunk_beside_a_csv_alone(tmp_path):
    """--image-root is where a CSV's relative paths start; a folder chunk given with it is read from
    its own folder (it was refused as 'resolving outside' the image root)."""
    folder = make_chunk(tmp_path, "folder", 0)
    listed = tmp_path / "lists" / "captions.csv"              # the CSV away from its images
    listed.parent.mkdir()
    shutil.move(make_chunk(tmp_path, "csv", 1), listed)
    s = stream([folder, str(listed)], image_root=str(tmp_path / "csv-1"))
    assert s.data["folder-0"]["read"] == 24 and "outside" not in s.data["folder-0"]
    assert s.data["captions"]["read"] == 24 and "outside" not in s.data["captions"]


def test_a_file_name_that_is_not_utf8_is_read(tmp_path):
    """A folder chunk whose file names hold bytes that are not UTF-8 (a Latin-1 'café.png') is read
    like any other: its pairs are trained on or held out (the key hash took the name as UTF-8)."""
    chunk = Path(make_chunk(tmp_path, "folder", 0))
    name = os.fsdecode(b"caf\xe9")                              # 'caf\udce9': the undecodable byte escaped
    for suffix in (".png", ".txt"):
        (chunk / f"c0_000{suffix}").rename(chunk / f"{name}{suffix}")
    s = stream([str(chunk)])
    assert s.data["folder-0"]["read"] == 24 and not s.data["folder-0"]["skipped"]
    assert s.data["folder-0"]["train"] + s.data["folder-0"]["heldout"] == 24


def test_a_symlink_loop_is_one_line_naming_it_or_skipped_when_images_are_checked(tmp_path):
    """`a.png -> b.png -> a.png` and `self.png -> self.png` in a chunk: checked, they are skipped and
    counted; with --no-check-images one line names the loop (it was a RuntimeError, 'please report it')."""
    chunk = Path(make_chunk(tmp_path, "folder", 0))
    (chunk / "a.png").symlink_to(chunk / "b.png")
    (chunk / "b.png").symlink_to(chunk / "a.png")
    (chunk / "self.png").symlink_to(chunk / "self.png")
    for name in ("a", "b", "self"):
        (chunk / f"{name}.txt").write_text(f"a picture {name}\n")
    s = stream([str(chunk)])
    assert s.data["folder-0"]["read"] == 24 and s.data["folder-0"]["skipped"] == {"missing image": 3}
    with pytest.raises(VlcpError, match=r"^\S+/a\.png: a symlink loop \(it never reaches a file\), not an image: "
                                        r"remove it \(or read without --no-check-images"):
        stream([str(chunk)], check_images=False)


@pytest.mark.parametrize("text", ["[]", "3", '{"format": 1, "update": 1}', '{"update": "1", "command": {}}'])
def test_a_pending_json_that_begin_did_not_write_is_one_line_naming_it(tmp_path, capsys, text):
    """pending.json holding a list, a number, or an object without a `command` (or with a string
    `update`): `vlcp update` and `vlcp eval` exit 2 with one line naming the file and what to do
    (it was an AttributeError, 'please report it'); nothing is read or trained."""
    from vlcp.cli import main

    out = tmp_path / "m"
    out.mkdir()
    (out / "pending.json").write_text(text)
    chunk = make_chunk(tmp_path, "folder", 0)
    assert main(["update", chunk, "--out", str(out), "--model", "vlcp-tiny", "--no-report"]) == 2
    assert main(["eval", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    line = (f"vlcp: error: {out / 'pending.json'}: not an unfinished update written by vlcp update (an object with "
            f"its 'update' and 'command'); delete it and the folder's unfinished runs/ to start over")
    assert err == [line, line]


def test_held_out_images_with_a_byte_identical_twin_in_training_are_trained_on_and_counted(tmp_path, capsys):
    """A chunk where every image is there twice, under a second name: no held-out image has its
    bytes in the training part (they move there, counted as `duplicates`, and said); the chunk
    without twins keeps its slice."""
    chunk = Path(make_chunk(tmp_path, "folder", 0))
    plain = stream([str(chunk)]).data["folder-0"]
    for image in sorted(chunk.glob("*.png")):
        shutil.copy(image, chunk / f"copy-{image.name}")
        shutil.copy(image.with_suffix(".txt"), chunk / f"copy-{image.stem}.txt")
    s = stream([str(chunk)])
    d = s.data["folder-0"]
    assert plain["duplicates"] == 0 and d["read"] == 48
    assert d["duplicates"] > 0 and d["train"] + d["heldout"] == 48 and d["heldout"] + d["duplicates"] > plain["heldout"]
    train = {r.image.read_bytes() for _, part in s.parts for r in part}
    scored = s.sets[0].pairs.images.sources
    assert len(scored) == d["heldout"] and not any(image.read_bytes() in train for image in scored)
    out = capsys.readouterr().out
    assert (f"vlcp: folder-0: {d['duplicates']} of its {d['heldout'] + d['duplicates']} held-out image(s) have the "
            f"same bytes as a training image") in out


def test_a_chunk_recreated_with_other_data_is_refused_naming_it_and_the_history(tmp_path, keep_folder, capsys):
    """The history keeps each chunk's fingerprint: a chunk's folder re-created with other pairs, or
    with one image replaced, is refused by `vlcp eval DIR` and by a later update (one line: the
    chunk, what changed, the history file, what to do); --moved at the original data scores as
    before; a history written before fingerprints reads the chunk as before."""
    from vlcp.cli import main

    chunk = Path(make_chunk(tmp_path / "data", "folder", 0))
    original = tmp_path / "original"
    shutil.copytree(chunk, original)
    out = tmp_path / "m"
    h = run_update(str(chunk), out, model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    data = h["updates"][0]["data"]
    assert data["fingerprint"]["items"] == 24 and data["duplicates"] == 0
    history = out / "history.json"

    shutil.rmtree(chunk)                                        # the same folder, other pairs
    shutil.move(make_chunk(tmp_path / "other", "folder", 1), chunk)
    refused = (rf"^folder-0: {chunk} is not the data update 1 read as this chunk \(24 items then, 24 now, not all of "
               rf"the same names \([\d,]+ bytes of images then, [\d,]+ now\); {history}\): restore it, or point "
               rf"--moved folder-0=PATH at the original data$")
    with pytest.raises(VlcpError, match=refused):
        evaluate(folder=out, options=SMALL)
    with pytest.raises(VlcpError, match=refused):
        run_update(make_chunk(tmp_path / "data", "folder", 1), out, report=False)
    assert main(["eval", str(out)]) == 2 and "is not the data update 1 read" in capsys.readouterr().err

    again = evaluate(folder=out, moved=[f"folder-0={original}"], options=SMALL)
    assert again["datasets"] == pytest.approx(h["updates"][0]["after"]["datasets"])
    shutil.rmtree(chunk)
    shutil.copytree(original, chunk)
    picture("purple", "circle", 3).save(chunk / "c0_000.png")   # one image replaced, its name kept
    with pytest.raises(VlcpError, match=r"the same 24 items by name, but other image sizes or captions"):
        evaluate(folder=out, options=SMALL)

    old = load_history(out)                                     # as written before fingerprints
    del old["updates"][0]["data"]["fingerprint"]
    write_history(out, old)
    assert evaluate(folder=out, options=SMALL)["sizes"]["folder-0"] > 0
