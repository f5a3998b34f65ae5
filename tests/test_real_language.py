"""The language runner on CLL-CLIP's real data formats (`data.benchmark: mscoco36`): CLFM's triplet
files (`triplet/coco_vision-en-<lang>.tsv.gz`, line-aligned across languages), MSCOCO36's per-language
test files and XM3600's, written here in their layouts, read, and trained on end to end."""
import gzip
import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from vlcp.config import DataCfg, experiment_from_dict
from vlcp.data.load import load_language_data
from vlcp.errors import ConfigError, VlcpError
from vlcp.run import run_experiment

LANGS = {"en": "a {c} square, photo {i}", "de": "ein {c} Quadrat, Foto {i}", "quz": "{c} tawa k'uchu {i}"}
COLOURS = {"red": (220, 20, 20), "green": (20, 220, 20), "blue": (20, 20, 220), "yellow": (220, 220, 20)}


def save(path: Path, colour, n: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (20, 14), tuple(min(255, c + 4 * (n % 6)) for c in colour)).save(path)
    return path.name


def dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")


def write_clfm(data: Path, train_per_colour: int = 3) -> tuple[Path, Path]:
    """`data/mscoco36` (triplets of en, de and quz: 2 captions per COCO training image; test split
    in the three languages) and `data/xm3600` (the three languages' test.json)."""
    coco, xm = data / "mscoco36", data / "xm3600"
    lines = []
    for k, (c, rgb) in enumerate(COLOURS.items()):
        for i in range(train_per_colour):
            rel = f"train2014/COCO_train2014_{k * 100 + i:012d}.jpg"
            save(coco / "images" / rel, rgb, i)
            lines += [(rel, c, i), (rel, c, i + 50)]
    for lang, template in LANGS.items():
        path = coco / "triplet" / f"coco_vision-en-{lang}.tsv.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            for rel, c, i in lines:
                f.write(f"{rel}\t{LANGS['en'].format(c=c, i=i)}\t{template.format(c=c, i=i)}\n")
    test = [(f"val2014/COCO_val2014_{k:012d}.jpg", c) for k, c in enumerate(COLOURS)]
    for rel, c in test:
        save(coco / "images" / rel, COLOURS[c], 1)
        save(xm / "images" / f"x{c}.jpg", COLOURS[c], 2)
    for lang, template in LANGS.items():
        rows = [{"image": rel, "caption": [template.format(c=c, i=j) for j in (7, 8)], "image_id": k}
                for k, (rel, c) in enumerate(test)]
        dump(coco / ("en" if lang == "en" else f"translated/{lang}") / "test.json", rows)
        dump(xm / lang / "test.json", [{"image": f"x{c}.jpg", "image/locale": "pe", "caption": [template.format(c=c, i=9)],
                                        "image_id": k} for k, (_, c) in enumerate(test[: 3 if lang == "quz" else 4])])
    return coco, xm


@pytest.fixture(scope="module")
def clfm(tmp_path_factory):
    return write_clfm(tmp_path_factory.mktemp("data"))


def data_cfg(coco, xm=None, **kw) -> DataCfg:
    return DataCfg(benchmark="mscoco36", root=str(coco), ood_root=str(xm or ""), stream="language", image_size=16,
                   unseen_styles=[], languages=["en", "de", "qu"], workers=2, **kw)


def test_mscoco36_language_data(clfm):
    """Examples are (language, image, line) of the line-aligned triplet files; Quechua is CLDR's
    `qu` (CLFM's file code `quz`); the test sets keep every caption of an image."""
    coco, xm = clfm
    data = load_language_data(data_cfg(coco, xm))
    assert data.languages == ["en", "de", "qu"] and len(data.examples) == 3 * 24
    ex = data.examples
    de = ex.of_language("de")
    assert ex.texts(de[:2]) == ["ein red Quadrat, Foto 0", "ein red Quadrat, Foto 50"]
    assert data.english[int(ex.row[de[1]])] == "a red square, photo 50"
    assert torch.equal(ex.item[de], ex.item[ex.of_language("en")]) and len(data.train_images[0]) == 12
    assert data.train_images[0][ex.item[de[:1]]].shape == (1, 16, 16, 3)
    ind, ood = data.eval_sets["in_domain"], data.eval_sets["out_domain"]
    assert len(ind.images) == 4 and ind.captions["qu"][0][:2] == ["red tawa k'uchu 7", "red tawa k'uchu 8"]
    assert ind.captions["qu"][1].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert ood.captions["qu"][1].tolist() == [0, 1, 2] and data.coverage["test"]["qu"] == 1.0
    assert "out_domain" not in load_language_data(data_cfg(coco)).eval_sets
    # the default order is CLL-CLIP's order222, cut to num_languages
    cut = DataCfg(benchmark="mscoco36", root=str(coco), stream="language", unseen_styles=[], num_languages=2)
    with pytest.raises(VlcpError, match=r"coco_vision-en-it\.tsv\.gz: not found"):   # order222: en, it, ...
        load_language_data(cut)


def test_mscoco36_errors(clfm, tmp_path):
    coco, xm = clfm
    bad = tmp_path / "mscoco36"
    write_clfm(tmp_path, train_per_colour=1)
    path = bad / "triplet" / "coco_vision-en-de.tsv.gz"
    lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines()
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[:-1] + ["train2014/x.jpg\tanother English caption\tein Satz"]) + "\n")
    with pytest.raises(VlcpError, match=r"coco_vision-en-de\.tsv\.gz: line 8: not line-aligned with .*en-en"):
        load_language_data(data_cfg(bad))
    image_swapped = lines[0].split("\t")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join([lines[-1].split("\t")[0] + "\t" + "\t".join(image_swapped[1:])] + lines[1:]) + "\n")
    with pytest.raises(VlcpError, match=r"coco_vision-en-de\.tsv\.gz: line 1: not line-aligned"):
        load_language_data(data_cfg(bad))
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[:-1]) + "\n")
    with pytest.raises(VlcpError, match=r"coco_vision-en-de\.tsv\.gz: 7 lines, but .*en-en\.tsv\.gz has 8"):
        load_language_data(data_cfg(bad))
    with pytest.raises(VlcpError, match=r"nowhere: not found"):
        load_language_data(data_cfg(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="runs the language stream only"):
        DataCfg(benchmark="mscoco36", root=str(coco), unseen_styles=[])
    with pytest.raises(ConfigError, match="ood_root: only the mscoco36"):
        DataCfg(ood_root=str(xm))


@pytest.mark.parametrize("method,args", [("cllclip", {"teir": True}), ("cll-er", {"buffer_size": 8})])
def test_cll_clip_runs_on_clfm_data(clfm, tmp_path, method, args):
    """CLL-CLIP with TEIR and a replay method learn en -> de -> qu from the triplet files (cached
    image and English features, per-language BPE vocabs) and are evaluated after every task on
    MSCOCO36's test split and XM3600, learned languages only."""
    coco, xm = clfm
    cfg = experiment_from_dict({
        "name": f"clfm-{method}", "seed": 0,
        "data": {"benchmark": "mscoco36", "root": str(coco), "ood_root": str(xm), "stream": "language",
                 "image_size": 16, "unseen_styles": [], "languages": ["en", "de", "qu"], "workers": 2},
        "model": {"name": "vlcp-tiny"}, "method": {"name": method, "vocab_size": 300, **args},
        "train": {"steps": 6, "batch_size": 8, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 64},
    })
    res = run_experiment(cfg, tmp_path / method)
    assert res["benchmark"] == "mscoco36" and res["tasks"] == ["en", "de", "qu"] and res["task_sizes"] == [24] * 3
    assert set(res["matrix"]) == {"in_domain", "out_domain"}
    ir = res["matrix"]["out_domain"]["IR@1"]
    assert [[v is not None for v in row] for row in ir] == [[True, False, False], [True, True, False], [True] * 3]
    assert all(0 <= v <= 100 for row in res["matrix"]["in_domain"]["TR@1"] for v in row if v is not None)
    assert res["vocab_sizes"][0] < res["vocab_sizes"][-1] and (tmp_path / method / "results.json").exists()


def test_paper_profile_brings_clfm_data_with_the_cll_model(paper_experiments):
    """Under the `paper` profile every CLL-CLIP experiment trains on CLFM's MSCOCO36 corpus, tested
    on MSCOCO36 and XM3600, at 224 px with OpenAI's ViT-B/16, all 36 languages in CLL-CLIP's order."""
    for name, cfg in paper_experiments.items():
        assert (cfg.data.benchmark == "mscoco36") == (cfg.data.stream == "language"), name
    cfg = paper_experiments["cll-clip-teir"]
    assert (cfg.data.root, cfg.data.ood_root, cfg.data.image_size) == ("data/mscoco36", "data/xm3600", 224)
    assert (cfg.data.languages, cfg.data.num_languages, cfg.model.name) == ([], 0, "ViT-B-16")
