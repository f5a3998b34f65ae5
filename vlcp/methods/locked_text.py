"""Locked-text tuning (FoMo-in-Flux's `freeze_head`): the text tower (token and positional
embeddings, transformer, ln_final, text_projection) and the logit scale are frozen; the image
tower (`model.visual`) trains. Otherwise plain fine-tuning."""
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.models.adapters import freeze_all_but, image_tower_names


@register
class LockedText(Method):
    name = "locked-text"

    def prepare_model(self, model):
        super().prepare_model(model)
        freeze_all_but(model, image_tower_names(model))
