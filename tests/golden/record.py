"""Record the golden results: `python tests/golden/record.py` on the code whose results are the
reference (re-record only on purpose, on the commit before a change that may alter results, e.g. in
a `git worktree` of it). Writes tests/golden/recorded/<capability>-<vendor>/results/<case>.json
and meta.json beside them: a set per CPU capability (AVX2, AVX512) and vendor (Intel and AMD
kernels round differently at one capability), each from the same code."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES  # noqa: E402
from golden import checkpoint_digest, machine, normalise, recorded, run_case  # noqa: E402

from vlcp.config import DataCfg  # noqa: E402
from vlcp.data.emoji import prepare_emoji  # noqa: E402


def main() -> None:
    dest = recorded()
    results = dest / "results"
    results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "emoji"
        prepare_emoji(DataCfg(root=str(root)), root, progress=False)
        digests = {}
        for name, case in CASES.items():
            out = Path(tmp) / "runs" / name
            (results / f"{name}.json").write_text(normalise(run_case(case, root, out), root))
            digests[name] = checkpoint_digest(out / "checkpoint.pt")
            print("recorded", name, flush=True)
    (dest / "meta.json").write_text(json.dumps({**machine(), "checkpoints": digests}, indent=1) + "\n")


if __name__ == "__main__":
    main()
