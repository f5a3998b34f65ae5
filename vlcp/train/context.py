"""What the loop hands a method's hooks: `TaskContext` (one task's data and state), `Batch` (one
step's tensors) and `model_outputs` (the model's forward on a batch). The hooks themselves are
`vlcp.methods.base.Method`'s."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class TaskContext:
    """What hooks may read (and, for `pool`, change) during one task."""
    task: int                          # index of the current task in the stream
    num_tasks: int
    train_set: Any                     # PairSet of every task's training pairs
    task_ids: list[torch.Tensor]       # per task: indices into train_set
    pool: torch.Tensor                 # indices the loop samples this task's batches from
    materialize: Any                   # ids -> Batch (images, tokens), with augmentation
    generator: torch.Generator         # per-task, per-seed sampling generator
    step: int = 0                      # step within the task
    materialize_plain: Any = None      # ids -> Batch without augmentation or masking (task-end feature passes)
    sampler: Any = None                # (batch size, generator) -> ids of one batch; None = uniform over `pool`
    steps: int | None = None           # the task's step budget (set by the loop; None outside a run)
    reference: torch.Tensor | None = None   # ids into train_set of pairs the pretrained θ0 saw (the "reference"
    #                                         capability: the concept stream's pool P); None where the stream has none
    extras: dict = field(default_factory=dict)


@dataclass
class Batch:
    images: torch.Tensor   # float [B, 3, S, S], normalised
    tokens: torch.Tensor   # long [B, ctx]
    ids: torch.Tensor      # long [B]: indices into the train set
    mlm_input: torch.Tensor | None = None    # long [B, ctx]: masked tokens (models with an MLM head)
    mlm_labels: torch.Tensor | None = None   # long [B, ctx]: original ids at masked positions, -100 elsewhere


def model_outputs(model: torch.nn.Module, batch: Batch):
    """The model's forward on a batch: (image features, text features, logit scale, ...), all
    normalised. With MLM inputs (ALBEF) the output also carries `mlm_logits` [M, V] for the
    M masked positions (row-major order of `mlm_labels != -100`)."""
    if batch.mlm_input is None:
        return model(batch.images, batch.tokens)
    return model(batch.images, batch.tokens, batch.mlm_input, batch.mlm_labels != -100)
