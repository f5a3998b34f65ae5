"""Where a run's wall time goes, phase by phase: the results' `run_seconds` block.

`RunSeconds` is the block (seconds per phase, in `PHASES` order); `RunClock` times one attempt's
phases and closes them into a `RunSeconds`, what no phase timed going to `other`; `startup`
charges the process's own start (to `import vlcp`) and imports (to the run's start) to the first
run the process executes, and nothing to the later ones (`vlcp run --list`, a `--jobs` worker).
Timing reads clocks only: it changes no number of the run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from dataclasses import dataclass, fields

import vlcp

# process_start: the process's creation to `import vlcp` (interpreter, site, the console script);
# imports: `import vlcp` to the first run's start (torch, the CLI, resolving configs; a module a run
# imports on first use, such as open_clip, falls in the phase that uses it: build, mostly);
# data: the stream's data loaded (a memo's hit costs ~0); build: method, model, tokenizer, evaluator,
# budget measurements, a resume's restore; flops: FLOP counting outside the timed training;
# zero_shot_eval: the starting model's evaluation; train: the tasks' training (the train rows'
# seconds); eval: after each task (their eval_seconds); finish: after the last task (the final
# pools' scores, an update's exported model); checkpoint: saving (and resuming from) checkpoints;
# other: the rest of the attempts' wall time (progress lines, the non-finite check). results.json's
# own write comes after the run's wall time is read (as for `wall_seconds`): a stage's remainder.
PHASES = ("process_start", "imports", "data", "build", "flops", "zero_shot_eval", "train", "eval", "finish",
          "checkpoint", "other")


@dataclass(frozen=True)
class RunSeconds:
    """Seconds per phase of a run (`PHASES`); a resumed run's are the sum over its attempts.
    Without start-up (`process_start`, `imports`) the phases sum to the run's `wall_seconds`."""
    process_start: float = 0.0
    imports: float = 0.0
    data: float = 0.0
    build: float = 0.0
    flops: float = 0.0
    zero_shot_eval: float = 0.0
    train: float = 0.0
    eval: float = 0.0
    finish: float = 0.0
    checkpoint: float = 0.0
    other: float = 0.0

    def __add__(self, other: RunSeconds) -> RunSeconds:
        return RunSeconds(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def to_dict(self) -> dict[str, float]:
        return {f.name: round(getattr(self, f.name), 3) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "run_seconds") -> RunSeconds:
        """The block as results.json holds it; None (a results file written before the block): zeros."""
        if d is None:
            return cls()
        unknown = set(d) - set(PHASES)
        if unknown:
            raise ValueError(f"{where}: unknown phase {sorted(unknown)[0]!r} (phases: {', '.join(PHASES)})")
        return cls(**{k: float(v) for k, v in d.items()})


class RunClock:
    """One attempt's seconds per phase: `with clock("build"): ...` times a block, `add` counts
    seconds timed elsewhere, `move` re-labels part of a phase (a data load inside the build)."""

    def __init__(self):
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - t0)

    def add(self, phase: str, seconds: float) -> None:
        if phase not in self.seconds:
            raise KeyError(f"RunClock: unknown phase {phase!r}")
        self.seconds[phase] += max(0.0, seconds)

    def move(self, seconds: float, source: str, to: str) -> None:
        seconds = min(max(0.0, seconds), self.seconds[source])
        self.seconds[source] -= seconds
        self.seconds[to] += seconds

    def close(self, wall: float, startup: tuple[float, float] = (0.0, 0.0)) -> RunSeconds:
        """The attempt's `RunSeconds`: its timed phases, `startup` (process_start, imports), and in
        `other` what of its `wall` seconds no phase timed."""
        timed = {k: v for k, v in self.seconds.items() if k not in ("process_start", "imports", "other")}
        return dataclasses.replace(RunSeconds(**timed), process_start=startup[0], imports=startup[1],
                                   other=max(0.0, wall - sum(timed.values())))


def process_created() -> float | None:
    """When this process was created (fork, on the `time.time()` scale): Linux's /proc/self/stat
    start time against the boot clock (10 ms ticks); None where it cannot be read."""
    try:
        stat = open("/proc/self/stat").read()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])   # field 22, starttime: clock ticks after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age


@functools.cache
def _first_run() -> tuple[float, float, float]:
    """(process_start, imports, when): read once per process, at the start of its first run."""
    now, created = time.time(), process_created()
    process_start = max(0.0, vlcp.IMPORTED_AT - created) if created is not None else 0.0
    return process_start, max(0.0, now - vlcp.IMPORTED_AT), now


def startup(started: float) -> tuple[float, float]:
    """(process_start, imports) charged to a run that started at `started` (`time.time()`, read
    just before): the process's for the first run it executes, (0, 0) for every later one."""
    process_start, imports, when = _first_run()
    return (process_start, imports) if when >= started else (0.0, 0.0)
