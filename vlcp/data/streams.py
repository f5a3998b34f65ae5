"""Task streams: which task each benchmark item belongs to (pure functions of the item list).

- `group`: one task per Unicode group (CTP's industries), in `data.tasks` order or Unicode order.
- `class`: class-incremental, like IncCLIP's split of CC2M by pseudo-labels into chunks of
  ImageNet classes. The classes (subgroups) are kept in Unicode order, so neighbouring classes
  are related concepts ("face-smiling", "face-affection", …), and cut into `num_tasks` contiguous
  concept clusters of about equal size in items (`data.class_chunks: items`) or in classes
  (`classes`: IncCLIP's 4 x 250 ImageNet classes). Every item of a class is in its class's chunk.
- `instance`: instance-incremental (IncCLIP's "identically distributed chunks"): the items in a
  seeded random order, cut into `num_tasks` equal chunks.
Items of groups not in `data.tasks` (when it is given) belong to no task (-1).
"""
from __future__ import annotations

import numpy as np

from vlcp.config import DataCfg
from vlcp.errors import VlcpError


def assign_tasks(items: list[dict], groups: list[str], subgroups: list[str], cfg: DataCfg
                 ) -> tuple[np.ndarray, list[str]]:
    """(task id per item, -1 = not used; task names), after `cfg.reverse`."""
    order = list(cfg.tasks) or list(groups)
    unknown = [t for t in order if t not in groups]
    if unknown:
        raise VlcpError(f"data.tasks: unknown task {unknown[0]!r}; known: {', '.join(groups)}")
    used = np.array([it["group"] in order for it in items])
    task = np.full(len(items), -1, dtype=np.int64)
    if cfg.stream in ("group", "language", "concepts"):  # the language and concept streams use every group
        names = order
        for i, it in enumerate(items):
            if used[i]:
                task[i] = order.index(it["group"])
    elif cfg.stream == "class":
        names, task = _class_chunks(items, used, subgroups, cfg.num_tasks, cfg.class_chunks == "classes")
    else:
        idx = np.flatnonzero(used)
        perm = idx[np.random.default_rng(cfg.seed).permutation(len(idx))]
        task[perm] = np.arange(len(perm)) * cfg.num_tasks // len(perm)
        names = [f"chunk {k + 1}" for k in range(cfg.num_tasks)]
    if cfg.stream != "group" and len(set(task[used].tolist())) < len(names):
        raise VlcpError(f"data.num_tasks: {cfg.num_tasks} chunks leave some empty; use fewer")
    if cfg.reverse:
        names = names[::-1]
        task = np.where(task >= 0, len(names) - 1 - task, -1)
    return task, list(names)


def _class_chunks(items, used, subgroups, n, equal_classes=False):
    sizes = {c: 0 for c in subgroups}
    for i, it in enumerate(items):
        if used[i]:
            sizes[it["subgroup"]] += 1
    classes = [c for c in subgroups if sizes[c]]
    if len(classes) < n:
        raise VlcpError(f"data.num_tasks: {n} chunks but only {len(classes)} classes")
    if equal_classes:   # ⌊C / n⌋ or ⌈C / n⌉ classes each
        chunk_of = {c: i * n // len(classes) for i, c in enumerate(classes)}
    else:
        chunk_of = _item_balanced(classes, sizes, n)
    task = np.array([chunk_of[it["subgroup"]] if used[i] else -1 for i, it in enumerate(items)], dtype=np.int64)
    names = []
    for k in range(n):
        members = [c for c in classes if chunk_of[c] == k]
        names.append(f"{members[0]}…{members[-1]}" if len(members) > 1 else (members[0] if members else f"chunk {k + 1}"))
    return names, task


def _item_balanced(classes: list[str], sizes: dict[str, int], n: int) -> dict[str, int]:
    """Chunk of each class: contiguous runs of about equal size in items, every chunk non-empty."""
    total, before, k, chunk_of = sum(sizes.values()), 0, 0, {}
    for i, c in enumerate(classes):
        # next chunk when this class's middle item passes the chunk's share of the items, or
        # when the classes left are just enough to give every later chunk one
        if i and k < n - 1 and (
                before + sizes[c] / 2 > (k + 1) * total / n or len(classes) - i <= n - 1 - k):
            k += 1
        chunk_of[c] = k
        before += sizes[c]
    return chunk_of
