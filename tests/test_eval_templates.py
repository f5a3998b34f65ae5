"""An EvalSet's explicit prompt ensemble (`EvalSet.templates`, a user's keep-set with its own
templates): zero-shot scoring builds the classifier from exactly those templates, whatever
`prompts` says; without it, the set's own template or CLIP's ensemble as before."""
import pytest
import torch

from vlcp.data.fomo import EvalSet
from vlcp.errors import VlcpError
from vlcp.eval import fomo
from vlcp.eval.zeroshot import prompt_templates

TEMPLATES = ["a photo of a {}.", "a drawing of a {}.", "{} in the wild"]


class Model(torch.nn.Module):
    def encode_image(self, x, normalize=True):
        return torch.nn.functional.normalize(torch.randn(len(x), 4), dim=-1)


@pytest.fixture
def seen(monkeypatch):
    """The templates each zero-shot classifier is built from."""
    seen = []

    def fake_weights(model, tokenizer, classes, templates, device):
        seen.append(list(templates))
        return torch.eye(4, len(classes))

    monkeypatch.setattr(fomo, "zeroshot_weights", fake_weights)
    return seen


def classification_set(**kw) -> EvalSet:
    return EvalSet(name="cifar10", role="retention", images=torch.zeros(3, 8, 8, 3, dtype=torch.uint8),
                   labels=torch.tensor([0, 1, 2]), classes=["a", "b", "c"], template="x {}", **kw)


def test_explicit_templates_are_used(seen):
    s = classification_set(templates=list(TEMPLATES))
    fomo.score(Model(), None, s, "cpu")
    fomo.score(Model(), None, s, "cpu", prompts="ensemble")
    assert seen == [TEMPLATES] * 2
    assert s.templates == TEMPLATES                       # not changed by scoring


def test_without_templates_nothing_changes(seen):
    s = classification_set()
    assert s.templates is None
    fomo.score(Model(), None, s, "cpu")
    fomo.score(Model(), None, s, "cpu", prompts="ensemble")
    assert seen == [["x {}"], prompt_templates("cifar10", "x {}", "ensemble")]


def test_empty_templates_are_an_error(seen):
    with pytest.raises(VlcpError, match="cifar10: .*templates"):
        fomo.score(Model(), None, classification_set(templates=[]), "cpu")


class TwoTowers(Model):
    def __init__(self):
        super().__init__()
        self.visual = torch.nn.Linear(2, 2)
        self.text_projection = torch.nn.Parameter(torch.ones(2, 2))
        self.logit_scale = torch.nn.Parameter(torch.ones(()))


def test_class_weights_are_reused_while_the_text_tower_is_unchanged(seen):
    """vlcp update's evaluation rounds: a text tower whose weights did not change (locked, or an
    image-only recipe) encodes no class prompt again; one whose weights moved does."""
    model, s, cache = TwoTowers(), classification_set(templates=list(TEMPLATES)), {}
    fomo.score_sets(model, None, [s], "cpu", text_cache=cache)
    with torch.no_grad():
        model.visual.weight.add_(1.0)            # the image tower and the logit scale move: no new prompts
        model.logit_scale.add_(1.0)
    fomo.score_sets(model, None, [s], "cpu", text_cache=cache)
    assert len(seen) == 1
    with torch.no_grad():
        model.text_projection.add_(1e-3)         # the text tower moves: encoded again
    fomo.score_sets(model, None, [s], "cpu", text_cache=cache)
    assert len(seen) == 2
    fomo.score_sets(model, None, [s], "cpu")     # no cache (the studies): every round encodes
    assert len(seen) == 3
