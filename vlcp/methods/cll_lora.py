"""LoRA (Hu et al. 2022) on the language stream, through `peft`: a LoRA adapter per language
(rank `r`, alpha `alpha`; CLFM: r = α = 8 on q, v) on the text encoder's attention (peft's
nn.MultiheadAttention LoRA: the packed in-projection and the out-projection); older adapters
frozen, the language's own adapter active with the oracle (†), the latest one without."""
from dataclasses import dataclass

import torch

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.cll_per_language import PerLanguage
from vlcp.models.adapters import quiet_bitsandbytes


def _lora_layers(model):
    with quiet_bitsandbytes():
        from peft.tuners.lora import LoraLayer
    return [m for m in model.transformer.modules() if isinstance(m, LoraLayer)]


@register
class CLLLoRA(PerLanguage):
    name = "cll-lora"
    key = "lora"

    @dataclass
    class Config(PerLanguage.Config):
        r: int = ranged(8, ge=1)
        alpha: int = ranged(8, ge=1)     # peft's lora_alpha (scale alpha / r)
        target_modules: list[str] = None

        def __post_init__(self):
            super().__post_init__()
            if self.target_modules is None:
                self.target_modules = ["attn"]

    def before_task(self, model, ctx):
        with quiet_bitsandbytes():
            from peft import LoraConfig, inject_adapter_in_model

        super(PerLanguage, self).before_task(model, ctx)      # vocab growth and TEIR statistics
        name = f"lang_{ctx.extras['languages'][-1]}"
        cfg = LoraConfig(r=self.cfg.r, lora_alpha=self.cfg.alpha, target_modules=list(self.cfg.target_modules),
                         lora_dropout=0.0)
        inject_adapter_in_model(cfg, model.transformer, adapter_name=name)
        self.activate(model, name)
        for layer in _lora_layers(model):   # only the new adapter trains
            for n, p in layer.named_parameters():
                p.requires_grad_(name in n)
        self.latest = name                  # (peft's layers hold the adapters: no entry in model.extras)

    @staticmethod
    def activate(model, name):
        for layer in _lora_layers(model):
            if name in layer.lora_A:
                layer._active_adapter = name

    def text_features(self, model, batch, ctx):
        return model(batch.tokens, batch.eot)

    @torch.no_grad()
    def encode_eval(self, model, lang, texts, oracle=True):
        layers = _lora_layers(model)
        name = f"lang_{lang}"
        known = bool(layers) and name in layers[0].lora_A
        current = layers[0].active_adapter if layers else None
        self.activate(model, name if oracle and known else getattr(self, "latest", None))
        out = model(*model.encode(texts))
        if current is not None:
            self.activate(model, current if isinstance(current, str) else current[0])
        return out
