"""The papers' training transforms (`data.transform`, `vlcp.data.augment`): crops drawn like
torchvision's from the original image, ALBEF's RandomAugment arguments, and draws that depend on
each image's seed only (not on batch slicing or decoding threads)."""
import math

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as TF

from vlcp import config
from vlcp.config import DataCfg
from vlcp.data import augment as aug
from vlcp.data.formats import ImageFiles
from vlcp.errors import ConfigError
from vlcp.train.loop import Materializer


def test_resized_crop_box_draws_torchvisions_ranges():
    areas, aspects = [], []
    for seed in range(300):
        top, left, h, w = aug.resized_crop_box(200, 100, (0.2, 1.0), (3 / 4, 4 / 3), torch.Generator().manual_seed(seed))
        assert 0 <= top and top + h <= 100 and 0 <= left and left + w <= 200
        areas.append(h * w / 20000)
        aspects.append(w / h)
    assert 0.19 <= min(areas) and max(areas) <= 1.0 and np.median(areas) > 0.35
    assert 0.72 <= min(aspects) and max(aspects) <= 1.36
    # no admissible crop (a 10:1 strip at ratio 1): the central crop at the nearest aspect
    assert aug.resized_crop_box(100, 10, (0.9, 1.0), (1.0, 1.0), torch.Generator().manual_seed(0)) == (0, 45, 10, 10)


def test_albef_ops_use_albefs_arguments():
    gen = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))
    # enhance ops at ALBEF's level 5: factor 5/10 x 1.8 + 0.1 = 1.0, the identity
    for name in ("Brightness", "Sharpness", "Identity"):
        assert np.array_equal(np.asarray(aug.albef_op(img, name, 5, gen)), np.asarray(img))
    # translate at level 5: 5 px, grey fill on the vacated side
    out = np.asarray(aug.albef_op(img, "TranslateX", 5, torch.Generator().manual_seed(1)))
    src = np.asarray(img)
    assert np.array_equal(out[:, 5:], src[:, :-5]) and (out[:, :5] == 128).all() or \
        np.array_equal(out[:, :-5], src[:, 5:]) and (out[:, -5:] == 128).all()
    # rotate at level 10: 30 degrees, one way or the other
    out = np.asarray(aug.albef_op(img, "Rotate", 10, torch.Generator().manual_seed(2)))
    assert any(np.array_equal(out, np.asarray(TF.rotate(img, a, fill=aug.GREY))) for a in (30.0, -30.0))
    # shear at level 10: factor 0.3, i.e. atan(0.3) as torchvision's degrees
    out = np.asarray(aug.albef_op(img, "ShearY", 10, torch.Generator().manual_seed(3)))
    ref = [np.asarray(TF.affine(img, angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, s * math.degrees(math.atan(0.3))],
                                fill=aug.GREY, center=[0, 0])) for s in (1, -1)]
    assert any(np.array_equal(out, r) for r in ref)
    with pytest.raises(ValueError, match="Posterize"):
        aug.albef_op(img, "Posterize", 5, gen)


def test_transform_is_a_function_of_its_seed():
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8))
    ctp = aug.TRANSFORMS["ctp"]
    a, b, c = ctp(img, 16, 7), ctp(img, 16, 7), ctp(img, 16, 8)
    assert a.shape == (16, 16, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_crop_comes_from_the_original_not_the_centre_crop(tmp_path):
    """A 64x32 image whose left quarter is red: FoMo's 0.9-1.0 crop keeps most of the width at
    some seed (red in the left column), which the evaluation's centre square never shows."""
    arr = np.zeros((32, 64, 3), np.uint8)
    arr[:, :16] = (255, 0, 0)
    path = tmp_path / "wide.png"
    Image.fromarray(arr).save(path)
    files = ImageFiles([path], 16, workers=1)
    assert files[[0]][0, :, 0, 0].max() < 50                 # centre square: no red
    crops = [files.augmented([0], [s], aug.TRANSFORMS["fomo"])[0] for s in range(8)]
    assert any(int(c[:, 0, 0].min()) > 200 for c in crops)
    # CTP's test transform squashes the whole photo: the red quarter is the left quarter
    squashed = ImageFiles([path], 16, workers=1, squash=True)[[0]][0]
    assert (squashed[:, :3, 0] > 200).all() and (squashed[:, 6:, 0] < 50).all()
    assert aug.TRANSFORMS["ctp"].squash_eval and not aug.TRANSFORMS["fomo"].squash_eval


def test_augmentation_does_not_depend_on_slicing_or_threads(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"{i}.jpg")
        Image.fromarray(rng.integers(0, 256, (30 + i, 40, 3), dtype=np.uint8)).save(paths[-1])
    ctp = aug.TRANSFORMS["ctp"]
    seeds = ctp.seeds(6, torch.Generator().manual_seed(0)).tolist()
    whole = ImageFiles(paths, 12, workers=4).augmented(list(range(6)), seeds, ctp)
    part = ImageFiles(paths, 12, workers=1).augmented([2, 3], seeds[2:4], ctp)
    assert torch.equal(whole[2:4], part)
    # in-memory images (the emoji benchmark's) take the same transform at their own size
    arrays = whole.clone()
    out = aug.augment_images(arrays, [0, 5], seeds[:2], ctp)
    assert out.shape == (2, 12, 12, 3) and torch.equal(out, aug.augment_images(arrays, [0, 5], seeds[:2], ctp))


def test_materializer_applies_the_transform_only_when_augmenting():
    images = torch.randint(0, 256, (8, 16, 16, 3), dtype=torch.uint8)
    tokens = torch.randint(0, 100, (8, 2, 6))
    ids = torch.arange(8)
    fomo = aug.TRANSFORMS["fomo"]
    on = Materializer(images, torch.arange(8), tokens, "cpu", augment=True, transform=fomo)
    off = Materializer(images, torch.arange(8), tokens, "cpu", augment=False, transform=fomo)
    plain = Materializer(images, torch.arange(8), tokens, "cpu", augment=False)
    a, b = on(ids, torch.Generator().manual_seed(0)), on(ids, torch.Generator().manual_seed(0))
    assert torch.equal(a.images, b.images)
    assert torch.equal(off(ids, torch.Generator().manual_seed(0)).images, plain(ids, torch.Generator().manual_seed(0)).images)
    assert not torch.equal(a.images, plain(ids, torch.Generator().manual_seed(0)).images)


def test_transform_names_and_config_error():
    assert set(config.TRANSFORMS) == {"shift"} | set(aug.TRANSFORMS)
    assert aug.train_transform("shift") is None and aug.train_transform("ctp") is aug.TRANSFORMS["ctp"]
    with pytest.raises(ConfigError, match="transform: unknown training transform 'randaug'"):
        DataCfg(transform="randaug")
