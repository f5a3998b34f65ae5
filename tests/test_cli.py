"""The command line's help and its errors for a name it does not know: each --help ends with examples
that parse, `vlcp update`'s options are grouped (none lost), and an unknown experiment, method, study,
recipe or params key is one line naming the closest known names, never all of them."""
import argparse
import shlex

import pytest
import yaml

from vlcp.cli import EXAMPLES, build_parser, main
from vlcp.errors import ConfigError, unknown_name
from test_layers import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())

UPDATE_OPTIONS = {   # `vlcp update`'s option strings before they were grouped: none lost or renamed
    "--batch-size", "--budget", "--candidates", "--csv-caption-key", "--csv-img-key", "--csv-separator", "--debug",
    "--device", "--follow-links", "--from", "--help", "--holdout", "--image-root", "--keep", "--keep-sets", "--layout",
    "--lr", "--max-eval", "--min-candidates", "--mixture", "--model", "--moved", "--no-check-images", "--no-report",
    "--out", "--precision", "--pretrained", "--pretraining-data", "--recipe", "--samples", "--seed", "--set",
    "--steps", "--templates", "--threads", "--trial-fraction", "--workers", "-h", "chunks"}
EVAL_OPTIONS = {
    "--chunk", "--csv-caption-key", "--csv-img-key", "--csv-separator", "--debug", "--device", "--follow-links",
    "--force", "--help", "--holdout", "--image-root", "--json", "--keep", "--layout", "--max-eval", "--min-candidates",
    "--model", "--moved", "--no-check-images", "--pretrained", "--templates", "--threads", "--workers", "-h", "folder"}


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """{"config show": its parser, ...}: every command that runs something (no subcommands of its own)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {parser.prog.removeprefix("vlcp ").strip(): parser}
    return {name: p for sub in subs for child in sub.choices.values() for name, p in commands(child).items()}


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in (a.option_strings or [a.dest])}


def test_every_command_has_one_to_three_examples_that_parse():
    parser = build_parser()
    leaves = commands(parser)
    assert set(EXAMPLES) == set(leaves)
    experiments = PARAMS["experiments"]
    for command, rows in EXAMPLES.items():
        assert 1 <= len(rows) <= 3, command
        for _, line in rows:
            words = shlex.split(line)
            assert words[0] == "vlcp" and " ".join(words[1:]).startswith(command), line
            args = parser.parse_args(words[1:])
            assert args.func.__name__.startswith("cmd_"), line
            named = list(getattr(args, "experiments", None) or []) + [getattr(args, "experiment", None) or "er"]
            assert all(e in experiments for e in named), line
            keys = [getattr(args, k, None) for k in ("list", "skip")]
            keys += args.study or [] if command == "config resolve" else []
            for key in filter(None, keys):   # the params keys it names exist
                node = PARAMS
                for part in key.split("."):
                    assert part in node, (line, key)
                    node = node[part]


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["config", "--help"], ["update", "--help"]])
def test_help_ends_with_examples(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "\nexamples:\n  # " in out and "\n  vlcp " in out


def test_update_and_eval_options_are_grouped_and_none_lost():
    leaves = commands(build_parser())
    assert option_strings(leaves["update"]) == UPDATE_OPTIONS
    assert option_strings(leaves["eval"]) == EVAL_OPTIONS
    for name in ("update", "eval"):
        groups = leaves[name]._action_groups
        generic = {s for g in groups[:2] for a in g._group_actions for s in a.option_strings}
        assert generic == {"-h", "--help", "--debug"}, name   # every other option sits in a named group
        assert len(groups) >= 6


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vlcp: error: "), err
    assert len(err) < 240, err    # the closest names, not all of them
    return err


def test_an_unknown_experiment_suggests_the_closest(capsys):
    assert main(["run", "err"]) == 2
    err = one_error(capsys)
    assert "experiment: unknown experiment 'err' (did you mean: er" in err
    assert f"; {len(PARAMS['experiments'])} known (`vlcp list` lists them)" in err
    assert main(["config", "show", "ctp-sqf"]) == 2
    assert "(did you mean: ctp-seqf," in one_error(capsys)


def test_an_unknown_method_study_or_key_suggests_the_closest(capsys):
    assert main(["config", "show", "er", "--set", "method.name=ewx"]) == 2
    assert "method.name: unknown method 'ewx' (did you mean: ewc?)" in one_error(capsys)
    assert main(["report", "metrics", "--study", "fom"]) == 2
    assert "--study: unknown study 'fom' (did you mean: fomo?); known: " in one_error(capsys)
    assert main(["run", "--list", "report.fomo.studes"]) == 2
    assert "--list report.fomo.studes: no such key in params.yaml (did you mean: report.fomo.studies?)" in \
        one_error(capsys)


def test_a_study_list_naming_an_unknown_experiment(tmp_path, capsys):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["experiments"] = {e: params["experiments"][e] for e in ("seqf", "er")}   # quick to resolve
    params["report"]["overview"]["experiments"] = ["seqf", "err"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert main(["config", "resolve", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "configs"),
                 "--study", "report.overview.experiments"]) == 2
    assert "--study report.overview.experiments: unknown experiment 'err' (did you mean: er" in one_error(capsys)
    assert not (tmp_path / "configs").exists()


def test_an_unknown_recipe_suggests_recipes_and_methods():
    from vlcp.registry import method_names
    from vlcp.update.recipes import method_section

    with pytest.raises(ConfigError, match=r"^--recipe: unknown recipe 'lroa' \(did you mean: lora\?\); \d+ known "
                                          r"\(full, lora, locked-image, ema-merge, zs-merge, auto, or a vlcp method"):
        method_section("lroa", method_names())


def test_unknown_name_shows_few_names_whole():
    assert unknown_name("profile", "huge", ["tiny", "small"], "-") == "unknown profile 'huge'; known: tiny, small"
    assert unknown_name("x", 3, ["a"] * 20, "-") == "unknown x 3; known: a"
    assert unknown_name("x", "b", [f"n{i}" for i in range(9)], "see y") == "unknown x 'b'; 9 known (see y)"
