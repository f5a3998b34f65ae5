"""Replay buffers over sample ids (indices into the stream's training pairs).

Storing ids, not tensors, keeps the buffer cheap, checkpointable and identical on every DDP
rank (all ranks see the same global batch ids).
"""
from __future__ import annotations

import torch


class ReservoirBuffer:
    """Reservoir sampling (Vitter's algorithm R): after n offered ids, each is kept with
    probability capacity / n. Deterministic given its generator seed."""

    def __init__(self, capacity: int, seed: int = 0):
        if capacity < 0:
            raise ValueError(f"buffer capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.ids = torch.empty(0, dtype=torch.long)
        self.seen = 0
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: torch.Tensor) -> None:
        for i in ids.tolist():
            if len(self.ids) < self.capacity:
                self.ids = torch.cat([self.ids, torch.tensor([i])])
            else:
                j = int(torch.randint(0, self.seen + 1, (1,), generator=self.gen))
                if j < self.capacity:
                    self.ids[j] = i
            self.seen += 1

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        if len(self.ids) == 0 or n == 0:
            return torch.empty(0, dtype=torch.long)
        return self.ids[torch.randint(0, len(self.ids), (n,), generator=generator)]

    def state_dict(self) -> dict:
        return {"ids": self.ids.clone(), "seen": self.seen, "gen": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.ids, self.seen = state["ids"].clone(), state["seen"]
        self.gen.set_state(state["gen"])
