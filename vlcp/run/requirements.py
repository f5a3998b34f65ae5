"""Which methods run on which streams: a method declares what it needs (`Method.needs`), a stream
what it supplies (`Stream.provides`) and the model the rest (`model_capabilities`). A pairing that
cannot run is refused before any data loads, in one line naming both and where the method runs."""
from __future__ import annotations

from vlcp import registry
from vlcp.config import ExperimentCfg
from vlcp.errors import ConfigError

CAPABILITIES = {   # capability -> what it is, as the error message says it
    "pixels": "image batches",
    "replay": "stable training-set ids to replay",
    "reference": "a reference set of pairs the pretrained model saw",
    "languages": "the task's language",
    "token_table": "a growable token table",
    "clip": "an open_clip text tower",
    "fusion": "a fusion encoder (ALBEF)",
}


def model_capabilities(cfg: ExperimentCfg) -> frozenset[str]:
    from vlcp.models.albef import is_albef

    return frozenset({"fusion"} if is_albef(cfg.model.name) else {"clip"})


def supplied(cfg: ExperimentCfg, stream_cls) -> frozenset[str]:
    return stream_cls.provides | model_capabilities(cfg)


def runs_on(cfg: ExperimentCfg, method_cls) -> list[str]:
    """The stream kinds that supply everything `method_cls` needs, with this config's model."""
    return [kind for kind in registry.STREAMS
            if method_cls.needs <= supplied(cfg, registry.load_stream(kind))]


def check_config(cfg: ExperimentCfg) -> None:
    """What the loop refuses before any data loads, for the method and stream a config names:
    `check_pairing`, then the stream's own refusals (`Stream.check`)."""
    from vlcp.methods import get_method

    method_cls, stream_cls = get_method(cfg.method.name), registry.load_stream(cfg.data.stream)
    check_pairing(cfg, method_cls, stream_cls)
    stream_cls.check(cfg, method_cls)


def check_pairing(cfg: ExperimentCfg, method_cls, stream_cls) -> None:
    missing = sorted(method_cls.needs - supplied(cfg, stream_cls))
    if missing:
        where = ", ".join(runs_on(cfg, method_cls)) or f"no stream with model {cfg.model.name!r}"
        raise ConfigError(f"method.name: {cfg.method.name!r} needs {' and '.join(CAPABILITIES[m] for m in missing)}, "
                          f"which the {cfg.data.stream} stream (model {cfg.model.name!r}) does not supply; "
                          f"it runs on: {where}")
    from vlcp.models.albef import is_albef
    from vlcp.train.loop import check_step_options
    check_step_options(cfg.train, method_cls, cfg.model.name, is_albef(cfg.model.name))
