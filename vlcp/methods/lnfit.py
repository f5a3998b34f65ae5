"""LNFit (De Min et al. 2023) as in FoMo-in-Flux: only the LayerNorm scales and biases of both
towers train (open_clip: ln_pre, ln_1, ln_2, ln_post, ln_final; selected by module type
nn.LayerNorm rather than FoMo-in-Flux's "ln_" substring); the logit scale is frozen. Otherwise
plain fine-tuning."""
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.models.adapters import freeze_all_but, layernorm_names


@register
class LNFit(Method):
    name = "lnfit"

    def prepare_model(self, model):
        super().prepare_model(model)
        freeze_all_but(model, layernorm_names(model))
