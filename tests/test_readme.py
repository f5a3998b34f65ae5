"""The README and docs/: short README, the docs pages present, every relative link resolving to a
file in the repository, nothing pointing outside it (readers have only the repository), and the
dated notes in one page: the study pages and docs/architecture.md say what the code does today,
docs/log.md holds what happened when, newest first."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = ("README.md", "overview.md", "ctp.md", "incclip.md", "cllclip.md", "fomo.md",
         "leaderboard.md", "performance.md", "architecture.md", "log.md")
UNDATED = ("overview.md", "ctp.md", "incclip.md", "cllclip.md", "fomo.md", "leaderboard.md", "architecture.md",
           "README.md", "benchmark.md", "update.md")   # docs/: the study pages and the reference pages

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")   # [text](target "title")
REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)                          # [label]: target
PARENT_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.@+-][\w./@+-]*)")         # ../x/y in text or code
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.I)                     # http:, mailto:, //host, #anchor
ISO_DATE = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w])")                        # 2026-11-30
COMMIT = re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")  # 318f198: hex with a digit and a letter
GENERATED = re.compile(r"<!-- ([\w-]+):[^>]*-->.*?<!-- /\1 -->", re.S)            # a block a test regenerates
LINK_TARGET = re.compile(r"(\]\()[^)]*(\))")                                      # [text](target): drop the target
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def md_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def links(text: str) -> list[str]:
    return LINK.findall(text) + REF_DEF.findall(text)


def inside(path: Path) -> bool:
    try:
        path.resolve().relative_to(ROOT)
        return True
    except ValueError:
        return False


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; keep it to 150 and move detail to docs/"


@pytest.mark.parametrize("page", PAGES)
def test_docs_page_exists(page):
    assert (DOCS / page).is_file(), f"docs/{page} is missing"


@pytest.mark.parametrize("md", md_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_outside_the_repository(md):
    text = md.read_text(encoding="utf-8")
    for banned in ("/work/", "shared/notes", "../shared"):
        assert banned not in text, f"{md.relative_to(ROOT)} mentions {banned!r}, which readers cannot see"
    for ref in PARENT_PATH.findall(text) + [t for t in links(text) if not EXTERNAL.match(t)]:
        target = ref.split("#", 1)[0]
        if target.startswith("/"):
            pytest.fail(f"{md.relative_to(ROOT)}: absolute path {ref!r}; use a path relative to the file")
        assert inside(md.parent / target), f"{md.relative_to(ROOT)}: {ref!r} leaves the repository"


@pytest.mark.parametrize("md", md_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(md):
    text = md.read_text(encoding="utf-8")
    broken = []
    for ref in links(text):
        if EXTERNAL.match(ref):
            continue
        target = ref.split("#", 1)[0]
        if target and not (md.parent / target).exists():
            broken.append(ref)
    assert not broken, f"{md.relative_to(ROOT)}: links to missing files: {broken}"


@pytest.mark.parametrize("page", [p for p in PAGES if p != "README.md"])
def test_docs_page_links_back_to_readme(page):
    """Each page opens with one paragraph saying what it is, linking back to the README."""
    text = (DOCS / page).read_text(encoding="utf-8")
    body = text.split("\n\n")
    assert body[0].startswith("# "), f"docs/{page} should start with a title"
    assert "../README.md" in body[1], f"docs/{page}: its first paragraph should link back to ../README.md"


# docs/overview.md's and README's names of the budgets of params.yaml's report.performance.budgets
STUDY_NAMES = {"spine": "spine (overview)", "ctp": "CTP", "cllclip": "CLL-CLIP", "fomo": "FoMo-in-Flux",
               "incclip": "IncCLIP"}


def costs_markdown(costs, pipeline: dict) -> str:
    """`vlcp.report.performance.study_costs` as docs/overview.md's Markdown table, after the
    measurement's notes on its pace."""
    from vlcp.report.performance import resumed_attempts

    alone = "measured" in costs and (costs["measured"] != "the whole repro").any()
    attempts = resumed_attempts(pipeline)
    lines = [f"Measured by `benchmarks/pipeline.py` on {pipeline['date']} at {pipeline['commit']} "
             f"({pipeline['cpus']} CPUs); the reference pace divides by the machine's slowdown during the repro "
             + ("(its SeqF pace at the start and at the end, averaged)." if pipeline.get("seqf_seconds_per_step_end")
                else "(its SeqF pace at the start).")
             + (f" It was stopped and resumed ({len(attempts)} attempts): each study's stages are "
                "read at the pace of the attempt they ran in (SeqF at its start, and for the last also at its end)."
                if attempts else "")
             + "".join(f" {a['pace_note']}" for a in pipeline.get("attempts") or () if a.get("pace_note"))
             + (" A study re-timed alone since (`--targets`) reads that measurement, at its own day's pace; "
                "the total then adds separate measurements: an estimate, not a measurement of the whole."
                if alone else ""),
             "", "| study | runs | stages | measured min | at the reference pace, min | budget min | stages not timed |"
             + (" measured |" if alone else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if alone else "")]
    for study, r in costs.iterrows():
        lines.append(f"| {STUDY_NAMES.get(study, study)} | {r['runs']} | {r['stages']} | {r['measured min']:.1f} | "
                     f"{r['at reference pace min']:.1f} | {r['budget min']} | {r['not timed'] or '—'} |"
                     + (f" {r['measured']} |" if alone else ""))
    total = costs[["runs", "stages", "measured min", "at reference pace min", "budget min"]].sum()
    measured = "—" if alone else f"{total['measured min']:.1f}"   # minutes of different paces do not add
    lines.append(f"| **all** | {int(total['runs'])} | {int(total['stages'])} | {measured} | "
                 f"**{total['at reference pace min']:.1f}** | {int(total['budget min'])} | |" + (" |" if alone else ""))
    return "\n".join(lines) + "\n"


def test_stage_costs_match_the_pipeline_measurement():
    """docs/overview.md's stage-cost table is what
    `vlcp.report.performance.study_costs` computes from the committed pipeline measurement (and the
    studies re-timed alone since, `pipeline-*.json`), params.yaml and dvc.yaml: a new measurement or a
    study that gains runs shows up as a failure here, which gives the text to paste."""
    import json

    import yaml

    from vlcp.report.performance import retimed, study_costs, study_slowdowns

    results = ROOT / "benchmarks" / "results"
    pipeline = json.loads((results / "pipeline.json").read_text())
    spine = json.loads((results / "spine_cost.json").read_text())
    parts = retimed({p.stem: json.loads(p.read_text()) for p in results.glob("pipeline-*.json")}, spine)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    costs = study_costs(pipeline, params, yaml.safe_load((ROOT / "dvc.yaml").read_text()),
                        study_slowdowns(pipeline, spine, params["report"]["performance"]["budgets"]), parts)
    docs = (DOCS / "overview.md").read_text(encoding="utf-8")
    block, table = re.search(r"<!-- stage-costs[^>]*-->\n(.*?)<!-- /stage-costs -->", docs, re.S), costs_markdown(costs, pipeline)
    assert block and block.group(1) == table, f"regenerate docs/overview.md's stage costs:\n{table}"


def visible(text: str) -> str:
    """A page's text as a reader reads it: without link targets and the generated blocks (the stage-cost
    table's measurement line names its own date and commit, regenerated by the test above)."""
    return LINK_TARGET.sub(r"\1\2", GENERATED.sub("", text))


@pytest.mark.parametrize("page", UNDATED)
def test_study_pages_hold_no_dated_log(page):
    """The study pages and docs/architecture.md describe the code as it is: a date or a commit is a log
    entry, and it belongs in docs/log.md (a link into it is fine)."""
    text = visible((DOCS / page).read_text(encoding="utf-8"))
    found = ISO_DATE.findall(text) + COMMIT.findall(text)
    assert not found, f"docs/{page} holds dated notes {sorted(set(found))}; move them to docs/log.md"


def test_visible_text_rules():
    assert ISO_DATE.findall(visible("on 2026-11-30 at [x](log.md#2026-12-02-a)")) == ["2026-11-30"]
    assert not ISO_DATE.findall(visible("see [the log](log.md#2026-12-02-a), 1,420 steps"))
    assert COMMIT.findall("at 318f198 and 3c3ba46") == ["318f198", "3c3ba46"]
    assert not COMMIT.findall("effaced 1234567 decade faded01x ab12-cd34 vlcp-tiny-rn")


def log_sections() -> list[str]:
    text = FENCE.sub("", (DOCS / "log.md").read_text(encoding="utf-8"))
    return re.findall(r"^## (.*)$", text, re.M)


def test_log_sections_are_dated_newest_first():
    """docs/log.md: one section per entry, its date first in the heading, newest first."""
    heads = log_sections()
    assert heads, "docs/log.md has no sections"
    undated = [h for h in heads if not re.match(r"\d{4}-\d{2}-\d{2}: ", h)]
    assert not undated, f"docs/log.md sections without a leading 'YYYY-MM-DD: ': {undated}"
    dates = [h[:10] for h in heads]
    assert dates == sorted(dates, reverse=True), "docs/log.md's sections should run newest first"
    assert len(set(heads)) == len(heads), "docs/log.md: two sections share a heading (and so an anchor)"


def test_log_is_one_page():
    assert not (DOCS / "log").exists(), "the dated notes live in docs/log.md, one page"


MINUTES = re.compile(r"\b\d+(?:\.\d+)?\s*(?:min|minutes|h|hours)\b")
VERDICT_COUNT = re.compile(r"\b\d+\s+(?:confirmed|refuted|underpowered|inconclusive|not testable)\b")
README_TERMS = ("headroom", "σ_d", "MDE", "H/σ_d", "confirmed", "refuted", "underpowered", "not expressible here",
                "inconclusive", "not testable", "profile", "SeqF", "JointT")


def test_readme_states_no_date_measured_time_or_verdict_count():
    """The README is for users: what changes with each run (dates, minutes, verdict counts) lives in the
    pages it links (reports/index.html, docs/performance.md, docs/log.md)."""
    text = visible(README.read_text(encoding="utf-8"))
    found = ISO_DATE.findall(text) + COMMIT.findall(text) + MINUTES.findall(text) + VERDICT_COUNT.findall(text)
    assert not found, f"README.md states {sorted(set(found))}; link the page that holds it instead"


def test_readme_defines_the_terms_it_uses():
    """Each term of the reports is defined where the README first uses it (bold, then its meaning)."""
    text = README.read_text(encoding="utf-8")
    for term in README_TERMS:
        first = text.find(term)
        assert first >= 0, f"README.md no longer uses {term!r}: drop it from README_TERMS"
        around = text[max(0, first - 200):first + 300]
        t = re.escape(term)
        assert re.search(rf"\*\*{t}\*\*|\({t}\)|{t} \(|{t}[^.\n]*:", around), f"README.md uses {term!r} before defining it"
