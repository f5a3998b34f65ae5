"""Real-data images decoded in DataLoader worker processes (`data.workers`), and unreadable images
skipped, counted in results.json (`data.bad_images`) and, past `data.max_bad_images`, stopping the
run with one line; on the tiny P9D layout of tests/test_real_data.py."""
import json
import shutil

import psutil
import pytest
import torch

from test_real_data import p9d_experiment, write_p9d
from vlcp.data.augment import train_transform
from vlcp.data.load import load_benchmark
from vlcp.errors import VlcpError
from vlcp.run import run_experiment
from vlcp.train.loop import Materializer


@pytest.fixture(scope="module")
def p9d_root(tmp_path_factory):
    return write_p9d(tmp_path_factory.mktemp("data") / "p9d", per_category=2)


def broken_copy(root, dest, how_many: int):
    """A copy of the P9D folder with the first `how_many` training images (in file order) truncated,
    and their names."""
    shutil.copytree(root, dest)
    broken = sorted((dest / "train_images").glob("*.jpg"))[:how_many]
    for path in broken:
        path.write_bytes(path.read_bytes()[:40])
    return dest, [p.name for p in broken]


def batches(root, workers: int, transform: str):
    """Two training batches of the runner's Materializer (seeded), images decoded with `workers`, and
    the number of processes this one started to decode them."""
    cfg = p9d_experiment(root, "er", transform=transform).data
    cfg.workers = workers
    train = load_benchmark(cfg).pairs("train", [])
    tokens = torch.arange(len(train) * 2 * 4).view(len(train), 2, 4)
    mat = Materializer(train.images, train.image_text, tokens, torch.device("cpu"), augment=True,
                       transform=train_transform(transform))
    gen = torch.Generator().manual_seed(5)
    before = {c.pid for c in psutil.Process().children()}
    out = [mat(torch.randint(0, len(train), (5,), generator=gen), gen) for _ in range(2)]
    return out, len({c.pid for c in psutil.Process().children()} - before)


@pytest.mark.parametrize("transform", ["shift", "ctp"])
def test_two_workers_give_the_batches_of_one_process(p9d_root, transform):
    (inline, none), (workers, started) = batches(p9d_root, 0, transform), batches(p9d_root, 2, transform)
    assert none == 0 and started == 2    # two worker processes, kept for the next batch
    for a, b in zip(inline, workers):
        assert torch.equal(a.images, b.images) and torch.equal(a.tokens, b.tokens) and torch.equal(a.ids, b.ids)


def test_an_unreadable_image_takes_the_next_readable_pair(p9d_root, tmp_path):
    root, names = broken_copy(p9d_root, tmp_path / "p9d", 1)
    cfg = p9d_experiment(root, "er").data
    cfg.workers = 2
    train = load_benchmark(cfg).pairs("train", [])
    bad = next(i for i in range(len(train)) if train.images._files.name(train.images._file(i)).endswith(names[0]))
    ok = (bad + 1) % len(train)
    images, used = train.images.decode([ok, bad, ok])
    assert used == [ok, ok, ok] and torch.equal(images[1], images[0])
    assert len(train.images.bad) == 1 and names[0] in train.images.bad.examples()[0]
    tokens = torch.arange(len(train) * 4).view(len(train), 1, 4)
    batch = Materializer(train.images, train.image_text, tokens, torch.device("cpu"), augment=False)(
        torch.tensor([bad]), torch.Generator().manual_seed(0))
    assert batch.ids.tolist() == [ok] and torch.equal(batch.tokens[0], tokens[train.image_text[ok], 0])


def test_a_run_skips_counts_and_resumes_past_bad_images(p9d_root, tmp_path, capsys):
    root, names = broken_copy(p9d_root, tmp_path / "p9d", 2)
    cfg = p9d_experiment(root, "er", buffer_size=6)
    cfg.data.workers, cfg.train.steps = 0, 3
    first = run_experiment(cfg, tmp_path / "run", stop_after_task=0)
    summary = first["data"]["bad_images"]
    assert summary["count"] == 2 and sorted(summary["images"]) == sorted(str(root / "train_images" / n) for n in names)
    assert capsys.readouterr().out.count("skipping unreadable image") == 1
    cfg.data.max_bad_images = 2    # the same two images again on resume: still two, under the limit
    done = run_experiment(cfg, tmp_path / "run")
    assert done["data"]["bad_images"]["count"] == 2
    assert json.loads((tmp_path / "run" / "results.json").read_text())["data"]["bad_images"]["count"] == 2


def test_past_the_limit_the_run_stops_with_one_line(p9d_root, tmp_path):
    root, names = broken_copy(p9d_root, tmp_path / "p9d", 3)
    cfg = p9d_experiment(root, "er", buffer_size=6)
    cfg.data.workers, cfg.data.max_bad_images, cfg.train.steps = 0, 1, 3
    with pytest.raises(VlcpError, match=r"data.max_bad_images: 2 unreadable images, more than the limit of 1") as e:
        run_experiment(cfg, tmp_path / "run")
    line = str(e.value)
    assert "\n" not in line and sum(n in line for n in names) == 2 and "raise the limit" in line
