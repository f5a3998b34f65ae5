"""Task streams (group / class / instance) and the held-out evaluation suite."""
import numpy as np
import pytest

from vlcp.config import DataCfg
from vlcp.data.load import load_benchmark
from vlcp.data.procedural import BACKGROUNDS, render_scenes, render_shapes, scene_captions
from vlcp.data.streams import assign_tasks
from vlcp.errors import ConfigError, VlcpError

ITEMS = [{"group": g, "subgroup": s} for g, s, n in
         (("A", "a1", 4), ("A", "a2", 2), ("B", "b1", 3), ("B", "b2", 1), ("C", "c1", 6)) for _ in range(n)]
GROUPS, SUBGROUPS = ["A", "B", "C"], ["a1", "a2", "b1", "b2", "c1"]


def test_group_stream_is_one_task_per_group_in_order():
    task, names = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(tasks=["C", "A"]))
    assert names == ["C", "A"]
    assert task.tolist() == [1] * 6 + [-1] * 4 + [0] * 6


def test_class_stream_keeps_classes_whole_contiguous_and_balanced():
    # sizes 4, 2, 3, 1, 6 (16 items); halves by the middle item: a1 (2/16), a2 (5/16), b1 (7.5/16) -> 0;
    # b2 (9.5/16), c1 (13/16) -> 1
    task, names = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="class", num_tasks=2))
    assert task.tolist() == [0] * 9 + [1] * 7
    assert names == ["a1…b1", "b2…c1"]
    rev, rnames = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="class", num_tasks=2, reverse=True))
    assert rev.tolist() == [1] * 9 + [0] * 7 and rnames == names[::-1]


def test_class_stream_leaves_no_chunk_empty_when_one_class_dominates():
    items = [{"group": "A", "subgroup": s} for s, n in (("a", 1), ("b", 1), ("c", 1), ("d", 100)) for _ in range(n)]
    task, names = assign_tasks(items, ["A"], ["a", "b", "c", "d"], DataCfg(stream="class", num_tasks=3))
    assert names == ["a…b", "c", "d"]
    assert task.tolist() == [0, 0, 1] + [2] * 100


def test_class_stream_by_classes_gives_each_chunk_its_share_of_the_classes():
    """IncCLIP's split: 4 chunks of 250 ImageNet classes, whatever their sizes (here 5 classes: 3 + 2)."""
    task, names = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="class", num_tasks=2, class_chunks="classes"))
    assert task.tolist() == [0] * 9 + [1] * 7 and names == ["a1…b1", "b2…c1"]
    items = [{"group": "A", "subgroup": f"{k:04d}"} for k in range(1000) for _ in range(1 + k % 7)]
    task, _ = assign_tasks(items, ["A"], [f"{k:04d}" for k in range(1000)], DataCfg(stream="class", num_tasks=4, class_chunks="classes"))
    per_chunk = [len({it["subgroup"] for it, t in zip(items, task) if t == k}) for k in range(4)]
    assert per_chunk == [250] * 4 and (np.diff(task) >= 0).all()   # contiguous class ranges
    with pytest.raises(ConfigError, match="class_chunks"):
        DataCfg(class_chunks="pairs")


def test_instance_stream_is_seeded_equal_chunks():
    a, names = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="instance", num_tasks=4, seed=0))
    b, _ = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="instance", num_tasks=4, seed=0))
    c, _ = assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="instance", num_tasks=4, seed=1))
    assert names == ["chunk 1", "chunk 2", "chunk 3", "chunk 4"]
    assert np.bincount(a).tolist() == [4, 4, 4, 4]
    assert (a == b).all() and not (a == c).all()


def test_stream_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="stream"):
        DataCfg(stream="topic")
    with pytest.raises(ConfigError, match="num_tasks"):
        DataCfg(stream="class")
    with pytest.raises(ConfigError, match="num_tasks"):
        DataCfg(num_tasks=3)
    with pytest.raises(VlcpError, match="num_tasks"):
        assign_tasks(ITEMS, GROUPS, SUBGROUPS, DataCfg(stream="class", num_tasks=6))


def test_class_stream_on_the_real_benchmark(emoji_root):
    bench = load_benchmark(DataCfg(root=str(emoji_root), stream="class", num_tasks=4))
    train = bench.pairs("train", ["twemoji"])
    sizes = np.bincount(train.tasks.numpy())
    assert len(sizes) == 4 and sizes.min() > 0.7 * sizes.max()
    for c in train.labels.unique():   # each class lives in exactly one task, in every split
        everything = bench.pairs(("train", "val", "test", "query"), ["twemoji"])
        assert everything.tasks[everything.labels == c].unique().numel() == 1
    assert train.groups is not None and train.image_groups.shape == train.image_labels.shape


def test_shapes_are_deterministic_and_labelled():
    a, b = render_shapes(16, per_class=2, seed=0), render_shapes(16, per_class=2, seed=0)
    assert a.images.shape == (6 * 6 * 2, 16, 16, 3) and (a.images == b.images).all()
    assert np.bincount(a.labels["shape"]).tolist() == [12] * 6
    assert np.bincount(a.labels["colour"]).tolist() == [12] * 6
    # a red shape is mostly red where it is not white
    red = a.images[a.labels["colour"] == 0].reshape(-1, 3).astype(int)
    ink = red[red.sum(1) < 600]
    assert (ink[:, 0] > ink[:, 2] + 60).mean() > 0.8


def test_scenes_count_objects_on_their_background():
    a, b = render_scenes(32, per_class=6, seed=0), render_scenes(32, per_class=6, seed=0)
    assert a.images.shape == (3 * 4 * 6, 32, 32, 3) and (a.images == b.images).all()
    assert np.bincount(a.labels["scene"]).tolist() == [6] * 12
    assert a.classes["scene"][a.labels["scene"][-1]] == "three objects on brown"
    # the corner pixel is the background's colour; more objects cover more of it
    bg = np.array(list(BACKGROUNDS.values()))[a.labels["background"]]
    assert (np.abs(a.images[:, 0, 0].astype(int) - bg).max(1) <= 2).mean() > 0.8
    covered = (np.abs(a.images.astype(int) - bg[:, None, None]).sum(-1) > 30).mean((1, 2))
    by_count = [covered[a.labels["count"] == n].mean() for n in range(3)]
    assert by_count[0] < by_count[1] < by_count[2]
    caps = scene_captions(a, 3)
    assert caps[-1][0].startswith("three ") and "brown" in caps[-1][0] and all(len(c) == 3 for c in caps)
