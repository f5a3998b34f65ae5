"""Image decoding throughput of the real datasets' paths: plain evaluation decodes (centre crop;
CTP's whole-image squash) and the papers' training transforms (`data.transform`: fomo, ctp), in
images per second with 1 and 2 decoding threads (`data.workers`).

    .venv/bin/python benchmarks/data_transforms.py [--images 256] [--source 640x480] [--size 224]
        [--repeats 5] [--out benchmarks/results/data_transforms.json]

The images are JPEGs of COCO's typical size (640 x 480, smooth random content), decoded through
`vlcp.data.formats.ImageFiles` exactly as a training batch is (`[ids]` or `.augmented`). The
repeats run the configurations interleaved (ABBA), so slow drift does not favour one of them.
Use the figures to size `data.workers`: a rank's images/s must exceed its training samples/s.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.data.augment import TRANSFORMS  # noqa: E402
from vlcp.data.formats import ImageFiles  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import interleaved, provenance  # noqa: E402  (benchmarks/common.py)

CONFIGS = {"centre crop (eval)": (None, False), "squash (CTP eval)": (None, True),
           "fomo (train)": ("fomo", False), "ctp (train)": ("ctp", False)}


def write_jpegs(folder: Path, n: int, width: int, height: int) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        small = rng.integers(0, 256, (height // 16, width // 16, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC)
        paths.append(folder / f"{i:05d}.jpg")
        img.save(paths[-1], quality=90)
    return paths


def images_per_second(paths: list[Path], size: int, threads: int, transform: str | None, squash: bool,
                      batch: int = 32) -> float:
    files = ImageFiles(paths, size, workers=threads, squash=squash)
    t = TRANSFORMS.get(transform) if transform else None
    t0 = time.perf_counter()
    for s in range(0, len(paths), batch):
        ids = list(range(s, min(s + batch, len(paths))))
        if t is None:
            files[ids]
        else:
            files.augmented(ids, [s * 1000 + k for k in range(len(ids))], t)
    return len(paths) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--source", default="640x480", help="source JPEG size, WxH")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/data_transforms.json")
    a = ap.parse_args()
    width, height = (int(v) for v in a.source.lower().split("x"))
    keys = [f"{name} | {th}" for name in CONFIGS for th in a.threads]
    runs: dict[str, list[float]] = {k: [] for k in keys}
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_jpegs(Path(tmp), a.images, width, height)
        images_per_second(paths[:8], a.size, 1, "ctp", False)   # warm-up (imports, caches)
        for rep in range(a.repeats):
            for k in interleaved(keys, rep):
                name, th = k.split(" | ")
                runs[k].append(images_per_second(paths, a.size, int(th), *CONFIGS[name]))
                print(f"repeat {rep + 1}/{a.repeats} {k}: {runs[k][-1]:.0f} images/s", flush=True)
    median = {name: {str(th): statistics.median(runs[f"{name} | {th}"]) for th in a.threads} for name in CONFIGS}
    out = {"what": "images/s through vlcp.data.formats.ImageFiles (decode + resize or a training transform)",
           "source_size": [width, height], "image_size": a.size, "images": a.images, "repeats": a.repeats,
           "threads": [str(th) for th in a.threads],
           "images_per_second": {name: {str(th): runs[f"{name} | {th}"] for th in a.threads} for name in CONFIGS},
           "median_images_per_second": median,
           "ms_per_image_one_thread": {name: 1000 / median[name][str(a.threads[0])] for name in CONFIGS},
           **provenance()}
    write_json(a.out, out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
