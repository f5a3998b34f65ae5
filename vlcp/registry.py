"""Where each continual method lives, by name, without importing it.

`METHODS` maps a method's registered name to "module:Class", `STREAMS` a `data.stream` kind to its
stream's class. The config validates `method.name`
against it and imports only the one module a run uses (`load_method`), so `import vlcp.config`
loads no method and no method module depends on the config's import order. A new built-in method is
one file in `vlcp/methods/` plus one line here; `@register` (vlcp.methods) checks that the line
names the decorated class, and registers a method defined outside the package (a user's own
module, imported before the run) under its name.
"""
from __future__ import annotations

import importlib

from vlcp.errors import ConfigError, unknown_name

METHODS: dict[str, str] = {
    "afec": "vlcp.methods.afec:AFEC",
    "bitfit": "vlcp.methods.bitfit:BitFit",
    "cll-codaprompt": "vlcp.methods.cll_codaprompt:CLLCodaPrompt",
    "cll-der": "vlcp.methods.cll_der:CLLDER",
    "cll-dualprompt": "vlcp.methods.cll_dualprompt:CLLDualPrompt",
    "cll-er": "vlcp.methods.cll_er:CLLER",
    "cll-joint": "vlcp.methods.cll_joint:CLLJoint",
    "cll-lora": "vlcp.methods.cll_lora:CLLLoRA",
    "cll-mla": "vlcp.methods.cll_mla:CLLMLA",
    "cll-oewc": "vlcp.methods.cll_oewc:CLLoEWC",
    "cll-ptuning": "vlcp.methods.cll_ptuning:CLLPTuning",
    "cllclip": "vlcp.methods.cllclip:CLLCLIP",
    "co2l": "vlcp.methods.co2l:Co2L",
    "ctp": "vlcp.methods.ctp:CTP",
    "ctp-er": "vlcp.methods.ctp_er:CTPER",
    "dora": "vlcp.methods.dora:DoRA",
    "ema-merge": "vlcp.methods.ema_merge:EMAMerge",
    "er": "vlcp.methods.er:ER",
    "ewc": "vlcp.methods.ewc:EWC",
    "ft-merge": "vlcp.methods.ft_merge:FTMerge",
    "galore": "vlcp.methods.galore:GaLore",
    "geodl": "vlcp.methods.geodl:GeoDL",
    "icarl": "vlcp.methods.icarl:ICaRL",
    "incclip": "vlcp.methods.incclip:IncCLIP",
    "isolated": "vlcp.methods.isolated:Isolated",
    "jointt": "vlcp.methods.jointt:JointT",
    "kmeans": "vlcp.methods.kmeans:Kmeans",
    "lnfit": "vlcp.methods.lnfit:LNFit",
    "locked-image": "vlcp.methods.locked_image:LockedImage",
    "locked-text": "vlcp.methods.locked_text:LockedText",
    "lora": "vlcp.methods.lora:LoRA",
    "lucir": "vlcp.methods.lucir:LUCIR",
    "lwf": "vlcp.methods.lwf:LwF",
    "mas": "vlcp.methods.mas:MAS",
    "moe-adapters": "vlcp.methods.moe_adapters:MoEAdapters",
    "mof": "vlcp.methods.mof:MoF",
    "rwalk": "vlcp.methods.rwalk:RWalk",
    "seqf": "vlcp.methods.seqf:SeqF",
    "si": "vlcp.methods.si:SI",
    "ucir": "vlcp.methods.ucir:UCIR",
    "vera": "vlcp.methods.vera:VeRA",
    "zs-merge": "vlcp.methods.zs_merge:ZSMerge",
    "zscl": "vlcp.methods.zscl:ZSCL",
}


# data.stream -> the stream's class (vlcp.run.stream.Stream): a new stream is one file in vlcp/run/streams/ and one line here
STREAMS: dict[str, str] = {
    "group": "vlcp.run.streams.group:GroupStream",
    "class": "vlcp.run.streams.group:GroupStream",
    "instance": "vlcp.run.streams.group:GroupStream",
    "language": "vlcp.run.streams.language:LanguageStream",
    "concepts": "vlcp.run.streams.concepts:ConceptStream",
    "user": "vlcp.run.streams.user:UserStream",
}


def _import(where: str) -> type:
    """The class "module:Class" names (imports the module)."""
    module, cls = where.split(":")
    return getattr(importlib.import_module(module), cls)


def load_stream(kind: str) -> type:
    """The stream class that runs `data.stream: kind` (imports its module)."""
    if kind not in STREAMS:
        raise ConfigError("data.stream: " + unknown_name("stream", kind, STREAMS, "vlcp.registry.STREAMS names them"))
    return _import(STREAMS[kind])


def method_names() -> list[str]:
    return sorted(METHODS)


def load_method(name: str) -> type:
    """The class registered as `name` (imports its module); an unknown name is a ConfigError listing the known."""
    if not isinstance(name, str) or name not in METHODS:
        raise ConfigError("method.name: " + unknown_name("method", name, method_names(), "`vlcp list` lists them"))
    return _import(METHODS[name])


def add_method(name: str, module: str, qualname: str) -> None:
    """Record where `name` lives: a built-in's line must name this very class; a name from outside the
    package is added (a user's own method, registered when its module is imported)."""
    where = f"{module}:{qualname}"
    known = METHODS.get(name)
    if known is not None and known != where:
        raise ConfigError(f"method {name!r}: {where} registers a name that vlcp.registry.METHODS gives to {known}")
    METHODS[name] = where
