"""Every field of every config dataclass (the experiment's sections, recursively, and every
registered method's `Config`) against wrong types, values outside its declared range, non-finite
floats, unknown keys and sections of the wrong type: each case is either accepted (a valid value)
or a `ConfigError` naming the field, never another exception; a seeded sample goes through
`vlcp config show` (exit 2, one line, nothing written)."""
import dataclasses
import math
import random
import re
import types
import typing

import pytest
import yaml

from vlcp.cli import main
from vlcp.config import ExperimentCfg, MethodCfg, experiment_from_dict, field_range
from vlcp.errors import ConfigError
from vlcp.methods import available_methods, get_method

SEED = 1234
SECTION_VALUES = [3, 2.5, "x", [1], True]     # a section (a mapping) given anything else
WRONG = ["abc", "", [1], ["abc"], {"a": 1}, True, False, None, 3, 2.5, -1, [None], [[1]], {}]


def sections(cls=ExperimentCfg, path=""):
    """(dotted section path, dataclass) of the experiment config, recursively (not `method`:
    its fields are each method's Config)."""
    yield path, cls
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and tp is not MethodCfg:
            yield from sections(tp, f"{path}.{f.name}" if path else f.name)


def method_configs():
    seen = {}
    for name in available_methods():
        cfg = get_method(name).Config
        seen.setdefault(cfg, name)   # methods sharing a Config class (lora/dora...) are tried once
    return [(name, cfg) for cfg, name in seen.items()]


def unwrap(tp):
    """(base type, optional, is_list) of a field type."""
    optional = is_list = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        optional, tp = True, next(a for a in typing.get_args(tp) if a is not type(None))
    if typing.get_origin(tp) is list:
        is_list, tp = True, typing.get_args(tp)[0]
    return tp, optional, is_list


def scalar_ok(v, tp, rng) -> bool:
    """Whether `v` is a valid scalar of type `tp` within `rng` (the config's own rules, restated)."""
    if tp is bool:
        return isinstance(v, bool)
    if tp is str:
        return isinstance(v, str)
    if tp in (int, float):
        if isinstance(v, bool):
            return False
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                return False
        if not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
            return False
        if tp is int and isinstance(v, float) and not v.is_integer():
            return False
        return rng is None or rng.ok(v)
    return True


def may_accept(value, tp, rng) -> bool:
    """False where the config must reject `value` (a wrong type, out of range, non-finite)."""
    base, optional, is_list = unwrap(tp)
    if value is None:
        return optional
    if is_list:
        return isinstance(value, list) and all(scalar_ok(v, base, rng) for v in value)
    return scalar_ok(value, base, rng)


def numbers(rng, base, randomness):
    """Values at and beyond the range's bounds, non-finite floats, number notations, random values."""
    step = 1 if base is int else 1e-6
    out = []
    if rng is not None:
        for bound, inside in ((rng.ge, True), (rng.gt, False), (rng.le, True), (rng.lt, False)):
            if bound is not None:
                up = 1 if bound in (rng.le, rng.lt) and bound not in (rng.ge, rng.gt) else -1
                out += [bound, bound + up * step, bound - up * step]
        if rng.nonzero:
            out.append(0)
    out += [float("nan"), float("inf"), float("-inf"), 10**30, -(10**30), 0, 1, 1.0]
    for _ in range(3):   # random magnitudes and signs (a fixed seed)
        v = randomness.choice([-1, 1]) * 10 ** randomness.uniform(-6, 6)
        out.append(round(v) if base is int and randomness.random() < 0.7 else v)
    out += [f"{v:.6e}" for v in out if isinstance(v, (int, float)) and math.isfinite(v) and abs(v) < 1e20]
    return out


def cases():
    """(label, raw experiment dict, section path, field name, value, may be accepted)."""
    randomness = random.Random(SEED)
    targets = [(path, cls, lambda d, path=path: nest(path, d)) for path, cls in sections()]
    targets += [("method", cfg, lambda d, name=name: {"method": {"name": name, **d}})
                for name, cfg in method_configs()]
    for path, cls, wrap in targets:
        hints = typing.get_type_hints(cls)
        yield f"{path}: extra key", wrap({"zz_unknown": 1}), path, "zz_unknown", None, False
        yield f"{path}: no keys", wrap({}), path, None, None, True
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                continue   # a section: below
            base, optional, is_list = unwrap(tp)
            rng = field_range(f)
            values = list(WRONG)
            if base in (int, float):
                nums = numbers(rng, base, randomness)
                values += [[v] for v in nums] if is_list else nums
            for v in values:
                yield f"{path}.{f.name}={v!r}", wrap({f.name: v}), path, f.name, v, may_accept(v, tp, rng)
    for path, cls in sections():
        if path:
            for v in SECTION_VALUES:
                parent, _, name = path.rpartition(".")
                yield f"{path}={v!r}", nest(parent, {name: v}), parent, name, v, False
    for v in SECTION_VALUES:
        yield f"method={v!r}", {"method": v}, "", "method", v, False


def nest(path, d):
    for part in reversed(path.split(".") if path else []):
        d = {part: d}
    return d


def names_field(msg, section, name):
    """The message names the field: its dotted path, or (a cross-field rule) the section and its name."""
    if name is None:
        return True
    path = f"{section}.{name}" if section else name
    return path in msg or (msg.startswith(f"{section}." if section else "")
                           and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", msg) is not None)


def test_every_numeric_field_declares_a_range():
    missing = []
    for path, cls in sections():
        missing += [f"{path}.{f.name}" for f in dataclasses.fields(cls)
                    if unwrap(typing.get_type_hints(cls)[f.name])[0] in (int, float) and field_range(f) is None]
    for name, cls in method_configs():
        missing += [f"{name}: method.{f.name}" for f in dataclasses.fields(cls)
                    if unwrap(typing.get_type_hints(cls)[f.name])[0] in (int, float) and field_range(f) is None]
    assert not missing, f"numeric fields without a declared range (config.ranged): {missing}"


def test_every_field_accepts_or_names_itself():
    accepted_invalid, unnamed, n = [], [], 0
    for label, raw, section, name, value, may in cases():
        n += 1
        try:
            experiment_from_dict(raw)
        except ConfigError as e:
            if not names_field(str(e), section, name):
                unnamed.append(f"{label}: {e}")
        else:
            if not may:
                accepted_invalid.append(label)
    assert n > 3000
    assert not accepted_invalid, f"{len(accepted_invalid)} invalid values accepted: {accepted_invalid[:20]}"
    assert not unnamed, f"{len(unnamed)} errors that do not name the field: {unnamed[:20]}"


def test_valid_notations_are_the_numbers():
    cfg = experiment_from_dict({"train": {"lr": "5E-4", "steps": "2e2", "warmup_steps": 1e1},
                                "method": {"name": "ctp", "momentum": ".5", "queue_size": "1_024"}})
    assert (cfg.train.lr, cfg.train.steps, cfg.train.warmup_steps) == (5e-4, 200, 10)
    assert (cfg.method.args["momentum"], cfg.method.args["queue_size"]) == (0.5, 1024)
    assert isinstance(cfg.train.steps, int) and isinstance(cfg.method.args["queue_size"], int)


def yaml_text(value) -> str:
    lines = yaml.safe_dump(value, default_flow_style=True).strip().splitlines()
    return " ".join(line for line in lines if line != "...")


def kind(value) -> str:
    if isinstance(value, float) and not math.isfinite(value) or isinstance(value, list) and any(
            isinstance(v, float) and not math.isfinite(v) for v in value):
        return "non-finite"
    if isinstance(value, (int, float)) and not isinstance(value, bool) or isinstance(value, list) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "number"   # of the right type: out of the field's range
    return "type"


def test_cli_sample_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"profile": "tiny", "profiles": {"tiny": {}}, "experiments": {"seqf": {}}}))
    invalid = [c for c in cases() if not c[5] and c[4] is not None]
    randomness = random.Random(SEED)
    sample = [c for k in ("non-finite", "number", "type")
              for c in randomness.sample([c for c in invalid if kind(c[4]) == k], 25)]
    for label, raw, section, name, value, _ in sample:
        path = f"{section}.{name}" if section else name
        sets = []
        if section == "method":
            sets = ["--set", f"method.name={raw['method']['name']}"]
        sets += ["--set", f"{path}={yaml_text(value)}"]
        code = main(["config", "show", "seqf", "--params", str(params)] + sets)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert code == 2, (label, code, out, err)
        assert len(lines) == 1 and lines[0].startswith("vlcp: error: ") and not out, (label, out, err)
        assert names_field(lines[0][len("vlcp: error: "):], section, name) or path in lines[0], (label, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


@pytest.mark.parametrize("name", available_methods())
def test_method_defaults_are_valid(name):
    """The declared ranges hold every default (no default value changed)."""
    experiment_from_dict({"method": {"name": name}})
