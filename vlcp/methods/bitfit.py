"""BitFit (Ben Zaken et al. 2022) as in FoMo-in-Flux: only the bias terms of both towers train
(every `bias` / `*_bias` parameter, LayerNorm biases and MHA's `in_proj_bias` included);
weights, embeddings and the logit scale are frozen. Otherwise plain fine-tuning."""
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.models.adapters import bias_names, freeze_all_but


@register
class BitFit(Method):
    name = "bitfit"

    def prepare_model(self, model):
        super().prepare_model(model)
        freeze_all_but(model, bias_names(model))
