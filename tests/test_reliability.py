"""Reliability: ties and non-finite features never reward a model, outputs never replace what a
user wrote, errors reach the user as one line (issue: no user file is deleted, no traceback, no
silent wrong result)."""
import json

import pytest
import torch

from vlcp.errors import ConfigError, NonFiniteError, VlcpError
from vlcp.eval.retrieval import (RANK_GALLERY, cross_modal, match_ranks, mean_average_precision, ranked_hits,
                                 recall_at_k, recall_from_ranks)
from vlcp.utils import MANIFEST, atomic_dir, atomic_path


# ----------------------------------------------------------------------------- ties and NaN

@pytest.mark.parametrize("n", [RANK_GALLERY, RANK_GALLERY + 1])
def test_collapsed_text_encoder_scores_chance_not_100_on_either_gallery_path(n):
    """Every text has the same feature: each image ties with all n texts. Counted against the
    query, only a gallery of one item could be 'found'; before, the rank path (n <= 640) gave
    TR@1 = 100 and the top-k path (n = 641) 0.16."""
    g = torch.Generator().manual_seed(0)
    img = torch.nn.functional.normalize(torch.randn(n, 8, generator=g), dim=-1)
    txt = torch.ones(n, 8) / 8 ** 0.5
    out = cross_modal(img, txt, torch.arange(n), torch.arange(n))
    assert out["TR@1"] == out["TR@5"] == out["TR@10"] == 0.0


def test_ties_count_against_the_query_on_both_paths():
    # query 0: its match ties with one non-match -> rank 1; query 1: ties only with another match -> rank 0
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    gal = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    ql, gl = torch.tensor([0, 1]), torch.tensor([9, 0, 1, 1, 5])
    assert match_ranks(q, gal, ql, gl).tolist() == [1, 0]
    hits = ranked_hits(q, gal, ql, gl, 3)
    assert hits.tolist() == [[False, True, False], [True, True, False]]
    assert recall_from_ranks(match_ranks(q, gal, ql, gl), (1, 2)) == recall_at_k(hits, (1, 2))


def test_both_paths_agree_with_many_ties():
    """Quantised features make many exact ties; the rank path and the top-k path (and mAP's
    ordering) give the same recall, and equal the brute-force pessimistic rank."""
    g = torch.Generator().manual_seed(1)
    q = torch.randint(0, 3, (60, 4), generator=g).float()
    gal = torch.randint(0, 3, (RANK_GALLERY + 40, 4), generator=g).float()
    ql, gl = torch.randint(0, 30, (60,), generator=g), torch.randint(0, 30, (len(gal),), generator=g)
    ranks = match_ranks(q, gal, ql, gl, chunk=7)
    sim = q @ gal.T
    for i in range(len(q)):   # brute force: non-matches scoring >= the best match
        m = gl == ql[i]
        if m.any():
            assert ranks[i] == int(((sim[i] >= sim[i][m].max()) & ~m).sum())
    assert recall_from_ranks(ranks) == recall_at_k(ranked_hits(q, gal, ql, gl, 10, chunk=9))
    full = ranked_hits(q, gal, ql, gl, len(gal))       # every row re-ranked exactly: same first 10 flags
    assert torch.equal(full[:, :10], ranked_hits(q, gal, ql, gl, 10))


def test_non_finite_features_score_zero_not_100():
    n = 20
    img = torch.full((n, 8), float("nan"))
    txt = torch.nn.functional.normalize(torch.randn(n, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    for gallery_pad in (0, RANK_GALLERY):
        t = torch.cat([txt, torch.randn(gallery_pad, 8)])
        tl = torch.cat([torch.arange(n), torch.arange(n, n + gallery_pad)])
        out = cross_modal(img, t, torch.arange(n), tl)
        assert out["Rm"] < 100 / 3 and out["TR@10"] == 0.0
    maps = mean_average_precision(img, txt, torch.arange(n) % 4, torch.arange(n) % 4, (1, 5))
    assert maps[1] < 100


def test_encode_stops_on_non_finite_features():
    from vlcp.eval.encode import encode

    class Blown(torch.nn.Module):
        text_projection = torch.zeros(4, 4)

        def encode_image(self, x, normalize=True):
            return torch.full((len(x), 4), float("nan"))

        def encode_text(self, t, normalize=True):
            return torch.ones(len(t), 4)

    from vlcp.data.pairs import PairSet
    pairs = PairSet(torch.zeros(3, 8, 8, 3, dtype=torch.uint8), torch.arange(3), ["a", "b", "c"], [["a"], ["b"], ["c"]],
                    torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long), torch.arange(3))
    with pytest.raises(NonFiniteError, match="image features: 3 of 3 rows"):
        encode(Blown(), lambda texts: torch.zeros(len(texts), 5, dtype=torch.long), pairs, "cpu")


# ----------------------------------------------------------------------------- no user file is lost

def test_atomic_dir_keeps_what_it_did_not_write(tmp_path):
    out = tmp_path / "data"
    (out / "p9d").mkdir(parents=True)
    (out / "README.md").write_text("mine")
    (out / "p9d" / "train.json").write_text("{}")
    with atomic_dir(out, last=("meta.json",)) as tmp:
        (tmp / "meta.json").write_text("1")
        (tmp / "images.npz").write_text("x")
    assert (out / "README.md").read_text() == "mine" and (out / "p9d" / "train.json").exists()
    assert json.loads((out / MANIFEST).read_text()) == ["images.npz", "meta.json"]
    with atomic_dir(out) as tmp:        # a second call replaces its own files and drops the ones it no longer writes
        (tmp / "meta.json").write_text("2")
    assert (out / "meta.json").read_text() == "2" and not (out / "images.npz").exists()
    assert (out / "README.md").read_text() == "mine"


def test_atomic_dir_refuses_to_replace_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "configs"
    out.mkdir()
    (out / "a.json").write_text("user's")
    with pytest.raises(VlcpError, match="a.json: exists and was not written by vlcp"):
        with atomic_dir(out) as tmp:
            (tmp / "a.json").write_text("ours")
            (tmp / "b.json").write_text("ours")
    assert (out / "a.json").read_text() == "user's" and not (out / "b.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["configs"]        # no temporary folder left behind


def test_atomic_path_never_replaces_a_folder(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "keep.pt").write_text("x")
    with pytest.raises(VlcpError, match="is a folder"):
        with atomic_path(tmp_path / "models") as tmp:
            tmp.write_text("weights")
    assert (tmp_path / "models" / "keep.pt").exists()


def test_config_resolve_into_a_users_folder_keeps_their_files(tmp_path):
    from vlcp.cli import main

    out = tmp_path / "mine"
    (out / "p9d").mkdir(parents=True)
    (out / "README.md").write_text("notes")
    assert main(["config", "resolve", "--out", str(out)]) == 0
    assert (out / "README.md").read_text() == "notes" and (out / "p9d").is_dir()
    assert (out / "seqf.json").exists()
    assert main(["config", "resolve", "--out", str(out)]) == 0      # again: replaces its own files


def test_data_prepare_into_a_users_folder_keeps_their_files(tmp_path, monkeypatch):
    import vlcp.data.emoji as emoji
    from vlcp.cli import main

    out = tmp_path / "data"
    (out / "p9d").mkdir(parents=True)
    (out / "README.md").write_text("notes")
    entries = emoji.read_emoji_test()
    monkeypatch.setattr(emoji, "read_emoji_test", lambda: entries[:60])   # a small benchmark: seconds, not minutes
    assert main(["data", "prepare", "--out", str(out)]) == 0
    assert (out / "README.md").read_text() == "notes" and (out / "p9d").is_dir()
    assert {"meta.json", "images.npz"} <= {p.name for p in out.iterdir()}


# ----------------------------------------------------------------------------- one line, no traceback

def test_unexpected_errors_are_one_line_unless_debug(tmp_path, monkeypatch, capsys):
    import vlcp.cli as cli

    def boom(args):
        raise RuntimeError("something\nbroke")
    monkeypatch.setattr(cli, "cmd_list", boom)
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vlcp: error: RuntimeError: something broke") and err.count("\n") == 1
    assert "Traceback" not in err
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "list"])
    monkeypatch.setenv("VLCP_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main(["list"])


def test_nan_loss_is_a_one_line_error(emoji_root, tmp_path, capsys):
    """A diverging run names its task and step in one line (exit 2); no results are written."""
    from vlcp.cli import main
    from vlcp.models.clip import note_random_init

    note_random_init("vlcp-tiny")   # (said once per process: said here, whichever test ran first)
    capsys.readouterr()

    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({
        "profile": "t", "profiles": {"t": {}},
        "defaults": {"data": {"root": str(emoji_root), "tasks": ["Flags", "Activities"]},
                     "train": {"steps": 6, "batch_size": 8, "progress": False, "device": "cpu", "num_threads": 1}},
        "experiments": {"boom": {"train": {"lr": 1.0, "grad_clip": 0}}},
    }).replace("1.0,", "1.0e+30,"))
    rc = main(["run", "boom", "--params", str(params), "--out", str(tmp_path / "runs"),
               "--checkpoints", str(tmp_path / "ck")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("vlcp: error: boom s0 task") and "loss is nan" in err.lower()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "runs" / "boom" / "seed0" / "results.json").exists()


def _train_tiny(lr: float, steps: int = 10, grad_clip: float = 1.0):
    """vlcp-tiny, SeqF, `steps` steps on random batches: (stats, the model's weights)."""
    from vlcp.config import TrainCfg
    from vlcp.methods import get_method
    from vlcp.methods.base import Batch, TaskContext
    from vlcp.models.clip import create_clip
    from vlcp.train.loop import train_task

    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    g = torch.Generator().manual_seed(1)
    images, texts = torch.randn(32, 3, 32, 32, generator=g), torch.randint(1, 49408, (32, tok.context_length), generator=g)
    pool = torch.arange(32)
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[pool], pool=pool, generator=torch.Generator().manual_seed(2),
                      materialize=lambda ids: Batch(images[ids], texts[ids], ids))
    cfg = TrainCfg(batch_size=8, lr=lr, warmup_steps=0, grad_clip=grad_clip, progress=False)
    stats = train_task(model, get_method("seqf")(), ctx, steps, cfg, torch.device("cpu"))
    return stats, {k: v.clone() for k, v in model.state_dict().items()}


def test_the_loss_is_read_every_check_steps_and_a_nan_between_reads_still_stops_the_task(monkeypatch):
    """Reading a loss on the host waits for an accelerator's queue, so there the loop reads the running
    sums every `check_every(device)` steps (and at the task's end) instead of every step: the same
    training, fewer reads, and a NaN loss between two reads still stops the task, naming the steps."""
    from vlcp.train import loop

    reads = []
    item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: reads.append(1) or item(self))
    every_step, weights = _train_tiny(1e-3)
    n_every_step = len(reads)
    monkeypatch.setattr(loop, "check_every", lambda device: 4)
    reads.clear()
    sparse, sparse_weights = _train_tiny(1e-3)
    assert n_every_step - len(reads) == 10 - 3          # read at steps 3, 7 and 9 (the last), not at each of 10
    assert sparse["terms"] == every_step["terms"] and sparse["loss"] == every_step["loss"]
    for k, v in weights.items():
        assert torch.equal(sparse_weights[k], v), k
    with pytest.raises(NonFiniteError, match=r"train: loss is (nan|inf) at a step from 0 to 3 \(lower train.lr\?\)"):
        _train_tiny(1e30, grad_clip=0.0)
    monkeypatch.setattr(loop, "check_every", lambda device: 1)
    with pytest.raises(NonFiniteError, match=r"train: loss is (nan|inf) at step [1-9] "):
        _train_tiny(1e30, grad_clip=0.0)


def test_cli_version_help_and_list(capsys):
    from vlcp import __version__
    from vlcp.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"vlcp {__version__}"
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "(default: runs)" in out and "(default: None)" not in out
    assert main(["list", "teir"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cllclip (") and all("teir" in n for line in lines for n in line.split()[2:] if n)
    assert main(["list", "ViT-B-3*"]) == 0                            # the models vlcp update can start from
    out = capsys.readouterr().out
    assert "models (open_clip's and vlcp's" in out and "ViT-B-32" in out
    assert main(["list", "vlcp-tiny"]) == 0 and "vlcp-tiny" in capsys.readouterr().out


def test_update_inputs_that_used_to_escape_as_please_report_it(tmp_path, capsys, monkeypatch):
    """--out under a regular file, a two-character CSV separator, an open_clip tag offline: each a
    clear one-line error, not an unchecked exception."""
    from vlcp.cli import main
    from vlcp.config import UpdateCfg
    from vlcp.models.clip import create_clip

    (tmp_path / "file").write_text("x")
    (tmp_path / "chunk").mkdir()
    assert main(["update", str(tmp_path / "chunk"), "--out", str(tmp_path / "file" / "sub"), "--model", "vlcp-tiny",
                 "--no-report"]) == 2
    assert "--out: cannot create the update folder" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="csv_separator: one character"):
        UpdateCfg(chunks=["x"], csv_separator=";;")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                          # (vlcp sets it too)
    with pytest.raises(VlcpError, match="'openai' is an open_clip tag whose weights are not in the local cache"):
        create_clip("RN50", "openai")


def test_random_init_is_said_once_in_vlcps_words(capsys, caplog):
    from vlcp.models.clip import create_clip, note_random_init

    note_random_init.cache_clear()
    with caplog.at_level("WARNING"):
        create_clip("vlcp-tiny")
        create_clip("vlcp-tiny")
    assert not [r for r in caplog.records if "initialized randomly" in r.getMessage()]
    assert capsys.readouterr().err.count("vlcp: vlcp-tiny starts from random weights") == 1
