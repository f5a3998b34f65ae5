"""How `vlcp update` and `vlcp eval` read their sources, as a user hits it: --image-root beside a
folder chunk, file names that are not UTF-8, a symlink loop, a malformed pending.json, a chunk
re-created with other data, byte-identical images across the held-out split. Most cases read the
user stream directly (no training); the few that need a history run a tiny update."""
import os
import shutil
from pathlib import Path

import pytest
import torch
from test_update import make_chunk

from vlcp.config import experiment_from_dict
from vlcp.errors import VlcpError
from vlcp.run.streams.user import UserStream

READ = {"holdout": 0.25, "max_eval": 16, "min_candidates": 0}


def stream(chunks, **options) -> UserStream:
    """The user stream of `vlcp update` over `chunks`, its sources read (`load_sets`), no model."""
    cfg = experiment_from_dict({
        "name": "sources", "data": {"benchmark": "user", "stream": "user", "unseen_styles": [], "image_size": 32},
        "model": {"name": "vlcp-tiny"}, "train": {"device": "cpu", "progress": False},
        "update": {**READ, **options, "chunks": list(chunks)}})
    s = UserStream(cfg, torch.device("cpu"))
    s.load_sets()
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
