"""Locked-image tuning (LiT-style, FoMo-in-Flux's `freeze_features`): the image tower
(`model.visual`) is frozen, the text tower and the logit scale train. Frozen parameters build
no autograd graph, so the image forward costs no backward (FoMo-in-Flux runs it under
no_grad). Otherwise plain fine-tuning."""
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.models.adapters import freeze_all_but, text_tower_names


@register
class LockedImage(Method):
    name = "locked-image"

    def prepare_model(self, model):
        super().prepare_model(model)
        freeze_all_but(model, text_tower_names(model))
