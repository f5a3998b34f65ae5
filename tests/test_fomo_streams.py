"""FoMo-in-Flux stream layer: concept orderings, task cuts, stream files, data mixtures.

All expected values are computed by hand (see the comments), not by the code under test.
"""
import json
import math

import numpy as np
import pytest
import torch

from vlcp.data.concepts import (ORDERINGS, Concept, by_frequency, by_similarity, by_time, cut_tasks,
                                dataset_incremental, easy_to_hard, format_entry, parse_entry,
                                random_order, read_stream, reverse, write_stream)
from vlcp.data.mixtures import (PAPER_MIXTURES, MixtureSizes, buffer_pool, mixture_sizes,
                                sample_mixture, validate_mixture)
from vlcp.errors import ConfigError, VlcpError

C = [Concept("DTD", "banded"), Concept("DTD", "dotted"), Concept("CUB200", "Black footed Albatross"),
     Concept("FLOWERS102", "pink primrose"), Concept("CUB200", "Laysan Albatross")]


# ----------------------------------------------------------------------------- orderings

def test_easy_to_hard_ascending_loss_ties_keep_input_order():
    loss = {C[0]: 2.0, C[1]: 0.5, C[2]: 2.0, C[3]: 1.0, C[4]: 0.5}
    # 0.5: C1, C4 (input order) < 1.0: C3 < 2.0: C0, C2
    assert easy_to_hard(C, loss) == [C[1], C[4], C[3], C[0], C[2]]
    assert easy_to_hard(C, [2.0, 0.5, 2.0, 1.0, 0.5]) == [C[1], C[4], C[3], C[0], C[2]]  # aligned sequence
    assert easy_to_hard(C, loss) is not C and C[0] == Concept("DTD", "banded")  # input untouched


def test_frequency_least_frequent_first_ties_keep_input_order():
    counts = [30, 0, 7, 30, 7]
    # 0: C1 < 7: C2, C4 < 30: C0, C3
    assert by_frequency(C, counts) == [C[1], C[2], C[4], C[0], C[3]]
    assert reverse(by_frequency(C, counts)) == [C[3], C[0], C[4], C[2], C[1]]


def test_ordering_side_information_errors_name_the_problem():
    with pytest.raises(VlcpError, match="difficulty: no value for concept 'CUB200\\+\\+\\+Laysan Albatross'"):
        easy_to_hard(C, {c: 1.0 for c in C[:4]})
    with pytest.raises(VlcpError, match="frequency: 4 values for 5 concepts"):
        by_frequency(C, [1, 2, 3, 4])
    with pytest.raises(VlcpError, match="frequency: .*>= 0"):
        by_frequency(C, [1, 2, -3, 4, 5])
    with pytest.raises(VlcpError, match="difficulty: .*finite"):
        easy_to_hard(C, [1, 2, float("nan"), 4, 5])
    with pytest.raises(VlcpError, match="appears twice"):
        random_order(C + [C[0]], seed=0)


def _unit(deg):
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


def test_similarity_best_start_is_not_concept_zero():
    # Five unit vectors at angles (degrees); cosine distance grows with the angle gap (< 180),
    # so "most similar" = nearest angle. Listed as index 0..4 = C@30, A@0, B@10, D@60, E@100.
    # Greedy paths (angle gaps) from each start:
    #   C: C B A D E  (20, 10, 60, 40)        A: A B C D E  (10, 20, 30, 40)
    #   B: B A C D E  (10, 30, 30, 40)        D: D C B A E  (30, 20, 10, 100)
    #   E: E D C B A  (40, 30, 20, 10)  = A's gaps reversed: a tie with A, A has the lower index.
    # 1 - cos is convex, so {10, 20, 30, 40} beats every other gap set: best start = A (index 1).
    names = ["C", "A", "B", "D", "E"]
    cs = [Concept("ANGLES", n) for n in names]
    emb = np.array([_unit(a) for a in (30, 0, 10, 60, 100)])
    emb[3] *= 5.0  # not normalised: the ordering must normalise
    by_name = lambda s: [Concept("ANGLES", n) for n in s]  # noqa: E731
    assert by_similarity(cs, emb) == by_name("ABCDE")
    assert by_similarity(cs, torch.tensor(emb)) == by_name("ABCDE")
    assert by_similarity(cs, emb, start=0) == by_name("CBADE")
    assert by_similarity(cs, emb, start=4) == by_name("EDCBA")
    assert by_similarity(cs, emb, start=Concept("ANGLES", "D")) == by_name("DCBAE")
    assert reverse(by_similarity(cs, emb)) == by_name("EDCBA")


def test_similarity_ties_are_broken_by_lowest_index():
    # X and Y identical, Z orthogonal. Steps: from Z, X and Y tie (cos 0) -> X (lower index).
    # Totals: X Y Z = 0 + 1, Y X Z = 0 + 1, Z X Y = 1 + 0: a three-way tie -> start 0.
    cs = [Concept("S", "X"), Concept("S", "Y"), Concept("S", "Z")]
    emb = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    assert by_similarity(cs, emb) == cs
    assert by_similarity(cs, emb, start=2) == [cs[2], cs[0], cs[1]]
    assert by_similarity(cs[:1], [[3.0, 4.0]]) == cs[:1]


def test_similarity_input_errors():
    with pytest.raises(VlcpError, match="embeddings: need shape \\(5, d\\)"):
        by_similarity(C, np.ones((4, 3)))
    with pytest.raises(VlcpError, match="non-zero"):
        by_similarity(C, np.zeros((5, 3)))
    with pytest.raises(VlcpError, match="start"):
        by_similarity(C, np.eye(5), start=5)
    with pytest.raises(VlcpError, match="start: concept 'DTD\\+\\+\\+zigzag'"):
        by_similarity(C, np.eye(5), start=Concept("DTD", "zigzag"))


def test_time_ascending_year_stable_or_seeded_shuffle_within_a_year():
    cs = [Concept("E", f"e{i}") for i in range(8)]
    year = [2019, 2010, 2015, 2010, 2019, 2015, 2010, 2019]
    # 2010: e1 e3 e6 | 2015: e2 e5 | 2019: e0 e4 e7
    assert by_time(cs, year) == [cs[i] for i in (1, 3, 6, 2, 5, 0, 4, 7)]
    a, b = by_time(cs, year, seed=3), by_time(cs, year, seed=3)
    assert a == b
    assert set(a[:3]) == {cs[1], cs[3], cs[6]} and set(a[3:5]) == {cs[2], cs[5]}
    assert set(a[5:]) == {cs[0], cs[4], cs[7]}
    shuffles = {tuple(by_time(cs, year, seed=s)) for s in range(10)}
    assert len(shuffles) > 1  # the seed does reorder within years
    assert by_time(cs, dict(zip(cs, year))) == by_time(cs, year)


def test_dataset_incremental_keeps_datasets_contiguous_and_class_order():
    # datasets in the given order; within CUB200 the input order (Black footed before Laysan)
    assert dataset_incremental(C, ["FLOWERS102", "CUB200", "DTD"]) == [C[3], C[2], C[4], C[0], C[1]]
    with pytest.raises(VlcpError, match="dataset_order: dataset 'FLOWERS102' .* is not listed"):
        dataset_incremental(C, ["CUB200", "DTD"])
    with pytest.raises(VlcpError, match="dataset_order: dataset 'SUN397' has no concepts"):
        dataset_incremental(C, ["FLOWERS102", "SUN397", "CUB200", "DTD"])
    with pytest.raises(VlcpError, match="dataset_order: dataset 'DTD' is listed twice"):
        dataset_incremental(C, ["DTD", "FLOWERS102", "CUB200", "DTD"])


def test_random_order_is_a_seeded_permutation():
    cs = [Concept("R", str(i)) for i in range(50)]
    a = random_order(cs, seed=0)
    assert a == random_order(cs, seed=0) and a != random_order(cs, seed=1)
    assert sorted(a) == sorted(cs) and a != cs
    assert reverse(a) == a[::-1] and reverse(reverse(a)) == a


def test_orderings_registry_names():
    assert ORDERINGS == {"easy-to-hard": easy_to_hard, "frequency": by_frequency, "similarity": by_similarity,
                         "time": by_time, "dataset": dataset_incremental, "random": random_order}


# ----------------------------------------------------------------------------- task cuts

def test_cut_tasks_by_concept_count_like_fomo():
    # 18,381 = 20 * 919 + 1: the first task gets 920, the other 19 get 919
    sizes = [len(t) for t in cut_tasks(list(range(18381)), 20)]
    assert sizes == [920] + [919] * 19
    # 7 = 3 * 2 + 1 -> 3, 2, 2, contiguous
    assert cut_tasks(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
    # 8 into 3 -> 3, 3, 2; one task -> everything; T = len -> singletons
    assert [len(t) for t in cut_tasks(list(range(8)), 3)] == [3, 3, 2]
    assert cut_tasks(C, 1) == [C]
    assert cut_tasks(C, 5) == [[c] for c in C]


@pytest.mark.parametrize("bad", [0, -1, 8, 2.0, True])
def test_cut_tasks_rejects_bad_task_counts(bad):
    with pytest.raises(ConfigError, match="num_tasks"):
        cut_tasks(list("abcdefg"), bad)


# ----------------------------------------------------------------------------- stream files

AWKWARD = [Concept("PLACES365", "New York, NY"), Concept("FOOD101", "crème brûlée"),
           Concept("OBSC_THINGS", "  spaces  around "), Concept("X", "a+++b"),
           Concept("inaturalist2021", "日本語 \"quoted\" \\ back"), Concept("DTD", "banded")]


def test_stream_file_round_trip_is_exact(tmp_path):
    path = tmp_path / "streams" / "awkward.json"
    write_stream(path, AWKWARD)
    assert read_stream(path) == AWKWARD
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw[0] == "PLACES365+++New York, NY" and raw[3] == "X+++a+++b"  # flat list of strings
    assert all(isinstance(e, str) for e in raw)
    assert [parse_entry(format_entry(c)) for c in AWKWARD] == AWKWARD
    # a file written by FoMo's own json.dump (ASCII escapes) reads the same
    fomo = tmp_path / "fomo.json"
    fomo.write_text(json.dumps([format_entry(c) for c in AWKWARD]))
    assert read_stream(fomo) == AWKWARD
    # the round trip composes with the orderings
    write_stream(path, reverse(AWKWARD))
    assert read_stream(path) == AWKWARD[::-1]


def test_read_stream_rejects_duplicates_naming_file_and_entry(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(["DTD+++banded", "DTD+++dotted", "DTD+++banded"]))
    with pytest.raises(VlcpError) as e:
        read_stream(path)
    assert str(path) in str(e.value) and "entry 2 'DTD+++banded' duplicates entry 0" in str(e.value)


@pytest.mark.parametrize("entry, why", [
    ("DTD banded", "not a 'DATASET\\+\\+\\+classname'"),
    ("+++banded", "'\\+\\+\\+banded' has an empty dataset"),
    ("DTD+++", "'DTD\\+\\+\\+' has an empty class name"),
    (5, "entry 1: 5 is not a 'DATASET"),
    (["DTD", "banded"], "not a 'DATASET"),
])
def test_read_stream_rejects_malformed_entries_naming_file_and_entry(tmp_path, entry, why):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(["DTD+++dotted", entry]))
    with pytest.raises(VlcpError, match=why) as e:
        read_stream(path)
    assert str(path) in str(e.value) and "entry 1" in str(e.value) and repr(entry) in str(e.value)


def test_read_stream_file_level_errors(tmp_path):
    with pytest.raises(VlcpError, match="no such stream file"):
        read_stream(tmp_path / "missing.json")
    (tmp_path / "obj.json").write_text('{"DTD": ["banded"]}')
    with pytest.raises(VlcpError, match="obj.json: a stream file is a JSON list"):
        read_stream(tmp_path / "obj.json")
    (tmp_path / "broken.json").write_text('["DTD+++banded",')
    with pytest.raises(VlcpError, match="broken.json: not a readable JSON"):
        read_stream(tmp_path / "broken.json")


def test_write_stream_rejects_bad_streams_and_writes_nothing(tmp_path):
    path = tmp_path / "s.json"
    write_stream(path, C)
    before = path.read_bytes()
    with pytest.raises(VlcpError, match="s.json: entry 5 'DTD\\+\\+\\+banded' duplicates entry 0"):
        write_stream(path, C + [C[0]])
    with pytest.raises(VlcpError, match="s.json: entry 0"):
        write_stream(path, [Concept("A+++B", "c")])  # would read back as ("A", "B+++c")
    with pytest.raises(VlcpError, match="s.json: entry 1"):
        write_stream(path, [C[0], Concept("DTD", "")])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no temp files left


# ----------------------------------------------------------------------------- mixtures

def test_mixture_sizes_match_fomo_numbers():
    # int(512 * .33) = 168, int(512 * .34) = 174, 168: sum 510, +1 to pretraining and update
    assert mixture_sizes(512, 0.33, 0.34, 0.33, first_task=False) == MixtureSizes(169, 175, 168)
    # task 0: buffer's 168 split 84 / 84 -> 253 pretraining + 259 update
    assert mixture_sizes(512, 0.33, 0.34, 0.33, first_task=True) == MixtureSizes(253, 259, 0)
    # pretrain-heavy: 409, 51, 51 (+1 pretraining) -> 410/51/51; task 0: 51 -> update +26, pretraining +25
    assert mixture_sizes(512, 0.8, 0.1, 0.1, False) == (410, 51, 51)
    assert mixture_sizes(512, 0.8, 0.1, 0.1, True) == (435, 77, 0)
    # Ibrahim et al.: 25, 245, 240 (+1, +1) -> 26/246/240; task 0: 240 -> +120 / +120
    assert mixture_sizes(512, 0.05, 0.48, 0.47, False) == (26, 246, 240)
    assert mixture_sizes(512, 0.05, 0.48, 0.47, True) == (146, 366, 0)
    # IIDify (λP = 0): 0, 51, 460; the remainder skips pretraining -> 0/52/460; task 0: all to update
    assert mixture_sizes(512, 0.0, 0.1, 0.9, False) == (0, 52, 460)
    assert mixture_sizes(512, 0.0, 0.1, 0.9, True) == (0, 512, 0)
    # no buffer: nothing moves on task 0
    assert mixture_sizes(512, 0.5, 0.5, 0.0, True) == mixture_sizes(512, 0.5, 0.5, 0.0, False) == (256, 256, 0)
    # odd buffer share: 10 * .33 -> 3, 3, 3 (+1 pretraining) = 4/3/3; task 0: update +2, pretraining +1
    assert mixture_sizes(10, 0.33, 0.34, 0.33, False) == (4, 3, 3)
    assert mixture_sizes(10, 0.33, 0.34, 0.33, True) == (5, 5, 0)
    for lam in PAPER_MIXTURES.values():
        for first in (False, True):
            assert sum(mixture_sizes(512, *lam, first)) == 512


def test_paper_mixtures():
    assert PAPER_MIXTURES == {"reference": (0.33, 0.34, 0.33), "no-buffer": (0.5, 0.5, 0.0),
                              "pretrain-heavy": (0.8, 0.1, 0.1), "ibrahim": (0.05, 0.48, 0.47),
                              "iidify": (0.0, 0.1, 0.9)}
    for lam in PAPER_MIXTURES.values():
        validate_mixture(*lam)


def test_mixture_validation_names_the_field():
    with pytest.raises(ConfigError, match=r"^data\.mixture: λ sum to 0\.9, must be 1$"):
        mixture_sizes(512, 0.3, 0.3, 0.3, False)
    with pytest.raises(ConfigError, match=r"^data\.mixture\.pretraining: λ = -0\.1, must be in \[0, 1\]$"):
        mixture_sizes(512, -0.1, 0.6, 0.5, False)
    with pytest.raises(ConfigError, match=r"^data\.mixture\.buffer: λ = 1\.5"):
        mixture_sizes(512, 0.0, 0.0, 1.5, False)
    with pytest.raises(ConfigError, match=r"^data\.mixture\.update: λ = nan"):
        mixture_sizes(512, 0.5, float("nan"), 0.5, False)
    with pytest.raises(ConfigError, match=r"^data\.mixture\.update: λ must be a number"):
        mixture_sizes(512, 0.5, "0.5", 0.0, False)
    with pytest.raises(ConfigError, match=r"^task\.mixture: λ sum"):
        mixture_sizes(512, 0.5, 0.5, 0.5, False, field="task.mixture")
    with pytest.raises(ConfigError, match="batch_size"):
        mixture_sizes(0, 0.33, 0.34, 0.33, False)
    validate_mixture(0.3333333, 0.3333333, 0.3333334)  # within the 1e-6 tolerance


def test_buffer_pool_is_the_union_of_earlier_tasks():
    pools = [torch.tensor([0, 1, 2]), torch.tensor([5, 6]), torch.tensor([9])]
    assert buffer_pool(pools, 0).tolist() == [] and buffer_pool(pools, 0).dtype == torch.long
    assert buffer_pool(pools, 1).tolist() == [0, 1, 2]
    assert buffer_pool(pools, 2).tolist() == [0, 1, 2, 5, 6]
    assert buffer_pool(pools, 3).tolist() == [0, 1, 2, 5, 6, 9]
    assert buffer_pool([torch.tensor([4, 3]), torch.tensor([3, 7])], 2).tolist() == [4, 3, 7]
    with pytest.raises(VlcpError, match="task"):
        buffer_pool(pools, 4)


def test_sample_mixture_sizes_sources_and_determinism():
    pre = torch.arange(1000, 1100)
    pools = [pre, torch.tensor([3, 4, 5]), buffer_pool([torch.tensor([0, 1]), torch.tensor([2])], 2)]
    sizes = MixtureSizes(5, 7, 4)
    idx, src = sample_mixture(pools, sizes, torch.Generator().manual_seed(0))
    assert idx.dtype == src.dtype == torch.long and len(idx) == len(src) == 16
    assert src.tolist() == [0] * 5 + [1] * 7 + [2] * 4
    assert set(idx[:5].tolist()) <= set(pre.tolist())
    assert set(idx[5:12].tolist()) <= {3, 4, 5} and set(idx[12:].tolist()) <= {0, 1, 2}
    again, _ = sample_mixture(pools, sizes, torch.Generator().manual_seed(0))
    other, _ = sample_mixture(pools, sizes, torch.Generator().manual_seed(1))
    assert torch.equal(idx, again) and not torch.equal(idx, other)
    # uniform with replacement: a 1-element pool repeats
    idx, _ = sample_mixture([pre, torch.tensor([8]), pools[2]], (0, 3, 0), torch.Generator().manual_seed(0))
    assert idx.tolist() == [8, 8, 8]


def test_sample_mixture_empty_buffer():
    pools = [torch.arange(10), torch.arange(5), buffer_pool([torch.arange(5)], 0)]
    with pytest.raises(VlcpError, match="168 buffer samples requested but the buffer pool is empty"):
        sample_mixture(pools, mixture_sizes(512, 0.33, 0.34, 0.33, first_task=False), torch.Generator())
    sizes = mixture_sizes(512, 0.33, 0.34, 0.33, first_task=True)  # task 0: no buffer draw
    idx, src = sample_mixture(pools, sizes, torch.Generator().manual_seed(0))
    assert torch.bincount(src, minlength=3).tolist() == [253, 259, 0]
    with pytest.raises(VlcpError, match="3 pools and 3 sizes"):
        sample_mixture(pools[:2], sizes, torch.Generator())
