"""Zero-shot prompt ensembles (`eval.prompts`, vlcp/eval/zeroshot.py `prompt_templates`): the
paper profile's IncCLIP runs evaluate with CLIP's per-dataset prompt ensembles (IncCLIP §4.1.3)."""
import copy

import pytest
from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

from vlcp.config import EvalCfg, load_params, resolve_experiment
from vlcp.errors import ConfigError
from vlcp.eval.zeroshot import clip_ensembles, prompt_templates


def test_paper_profile_uses_prompt_ensembles():
    params = load_params("params.yaml")
    tiny = copy.deepcopy(params)
    tiny["profile"] = "tiny"
    assert resolve_experiment(tiny, "ic4-incclip").eval.prompts == "single"   # the emoji suite: its own templates
    paper = copy.deepcopy(params)
    paper["profile"] = "paper"
    for name in ("ic4-incclip", "ic8-er", "ici-co2l"):
        assert resolve_experiment(paper, name).eval.prompts == "ensemble"


def test_prompt_templates():
    assert prompt_templates("CIFAR10", "a photo of a {}.", "single") == ["a photo of a {}."]
    cifar = prompt_templates("CIFAR10", "a photo of a {}.", "ensemble")
    assert len(cifar) == 18 and cifar[0] == "a photo of a {}." and "a photo of the big {}." in cifar
    imagenet = prompt_templates("ImageNet", "x {}", "ensemble")
    assert imagenet == [t("{}") for t in OPENAI_IMAGENET_TEMPLATES] and len(imagenet) == 80
    assert prompt_templates("some-new-set", "x {}", "ensemble") == imagenet      # no CLIP ensemble: ImageNet's
    assert {len(clip_ensembles()[n]) for n in ("caltech101", "dtd", "sun397", "food101", "flowers102")} == {34, 8, 2, 1}
    for templates in clip_ensembles().values():
        assert all("\0" in t.format("\0") for t in templates)
    with pytest.raises(ConfigError, match="eval.prompts"):
        prompt_templates("cifar10", "{}", "many")


def test_eval_prompts_error_names_the_field():
    with pytest.raises(ConfigError, match="prompts"):
        EvalCfg(prompts="many")


def test_downstream_scores_use_the_ensemble(monkeypatch):
    """`downstream_scores(..., prompts="ensemble")` builds each classifier from the dataset's ensemble."""
    import torch

    from vlcp.data.fomo import EvalSet
    from vlcp.eval import fomo

    seen = []

    def fake_weights(model, tokenizer, classes, templates, device):
        seen.append(list(templates))
        return torch.eye(4, len(classes))

    class Model(torch.nn.Module):
        def encode_image(self, x, normalize=True):
            return torch.nn.functional.normalize(torch.randn(len(x), 4), dim=-1)

    monkeypatch.setattr(fomo, "zeroshot_weights", fake_weights)
    s = EvalSet(name="cifar10", role="retention", images=torch.zeros(3, 8, 8, 3, dtype=torch.uint8),
                labels=torch.tensor([0, 1, 2]), classes=["a", "b", "c"], template="a photo of a {}.")
    fomo.downstream_scores(Model(), None, [s], "cpu")
    fomo.downstream_scores(Model(), None, [s], "cpu", prompts="ensemble")
    assert seen[0] == ["a photo of a {}."] and seen[1] == prompt_templates("cifar10", "", "ensemble")
