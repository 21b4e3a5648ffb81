"""`runwatch health-eval`: score the health rules on a labelled corpus of real logs.

Mount with `app.command("health-eval")(health_eval_command)`. Each run of the corpus is
replayed one logged step at a time through the live path (runs folder, indexer, health
hook), and the command prints, per pathology class and per split, precision, recall and
the delay from the labelled onset to the first finding (see docs/health.md, "Score").
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from runwatch.cli.output import Output, emit, fail, line, print_table
from runwatch.cli.runs import JqOpt, OutOpt, RawOpt
from runwatch.health.scoring import (
    load_corpus,
    pct,
    replay_all,
    run_rows,
    score,
    summary_line,
)

# The corpus of the checkout runwatch runs from (an editable install); a wheel has none.
DEFAULT_CORPUS = Path(__file__).resolve().parents[3] / "tests" / "data" / "real"


class Split(StrEnum):
    train = "train"
    holdout = "holdout"
    all = "all"


def health_eval_command(
    split: Annotated[Split, typer.Option(
        "--split", help="Which runs to score: train (used to tune the rules), holdout "
        "(kept out of tuning) or all (both, each reported on its own, and the total).")
    ] = Split.all,
    corpus: Annotated[Path, typer.Option(
        "--corpus", help="Folder of labelled runs with a labels.yaml (default: "
        "tests/data/real of the checkout runwatch runs from).")] = DEFAULT_CORPUS,
    only: Annotated[list[str] | None, typer.Option(
        "--run", help="Score only this run of the corpus (repeat for more).")] = None,
    round_: Annotated[int | None, typer.Option(
        "--round", help="Score only the held-back runs added in this round (labels.yaml's "
        "`round`; the corpus README says when each was added and which are spent, their "
        "runs in train; a round with no held-back run is refused, naming those that have "
        "some). Not with --split train.")] = None,
    output: OutOpt = Output.table,
    jq: JqOpt = None,
    raw: RawOpt = False,
) -> None:
    """Precision, recall and detection delay of the health rules on a labelled corpus."""
    if not (corpus / "labels.yaml").is_file():
        raise fail(f"{corpus} has no labels.yaml: pass --corpus with the labelled corpus "
                   "folder (tests/data/real in a checkout of runwatch)")
    runs = load_corpus(corpus)
    if only:
        unknown = sorted(set(only) - {r.name for r in runs})
        if unknown:
            raise fail(f"the corpus has no run {', '.join(unknown)}",
                       [f"runs: {', '.join(r.name for r in runs)}"])
        runs = [r for r in runs if r.name in only]
    if round_ is not None and split is Split.train:
        raise fail("--round scores one round of held-back runs, and --split train has none: "
                   "drop --split, or pass --split holdout")
    if split is not Split.all:
        runs = [r for r in runs if r.split == split.value]
    if round_ is not None:
        rounds = sorted({r.round for r in runs if r.round is not None})
        runs = [r for r in runs if r.round == round_]
        if not runs:
            raise fail(f"{corpus / 'labels.yaml'} has no held-back run of round {round_}",
                       [f"rounds: {', '.join(map(str, rounds)) or 'none'}"])
    results = replay_all(runs)
    splits = [split.value] if split is not Split.all else ["train", "holdout", "all"]
    if round_ is not None:  # one round's held-back runs: one score, named for the round
        splits = []
    scores = {sp: score(results, sp) for sp in splits}
    if round_ is not None:
        scores[f"holdout round {round_}"] = score(results, "holdout", round_)
    if round_ is None and "holdout" in splits:
        # The runs held back since the last re-split are reported on their own as well:
        # the earlier held-back runs have been scored before.
        for rnd in sorted({r.round for r in runs if r.round is not None}):
            scores[f"holdout round {rnd}"] = score(results, "holdout", rnd)
    data = {"scores": scores, "runs": run_rows(results)}
    emit(data, output, jq, lambda wide: _tables(data, wide), raw)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _tables(data: dict[str, Any], wide: bool) -> None:
    held = {r["name"] for r in data["runs"] if r["split"] != "train"}
    for sp, sc in data["scores"].items():
        rows = [[cls, c["runs"], c["detected"], pct(c["recall"]), len(c["false_positives"]),
                 pct(c["precision"]), _num(c["median_delay_points"]),
                 _num(c["median_delay_steps"]), _missed(c["missed"], held)]
                for cls, c in sc["classes"].items()]
        print_table(["class", "runs", "found", "recall", "false +", "precision",
                     "delay (points)", "delay (steps)", "missed"], rows,
                    title=f"{sp}: {sc['runs']} runs", wide=wide, drop=["missed"],
                    prose=["missed"])
        h = sc["healthy"]
        line(summary_line(sp, sc) + "".join(f"\n  {entry}" for entry in _named(
            h["with_warnings"], held)))
        if h["process_findings"]:
            line("  (not counted: " + "; ".join(_named(h["process_findings"], held)) + ")")


def _missed(names: list[str], held: set[str]) -> str:
    """The missed runs of a class for `-o wide`: train runs by name, held-back ones as a
    count (`_named`)."""
    shown = [name for name in names if name not in held]
    hidden = len(names) - len(shown)
    if hidden:
        shown.append(f"{hidden} held back")
    return ", ".join(shown) or "—"


def _named(by_run: dict[str, list[str]], held: set[str]) -> list[str]:
    """The rules of each train run by name, and those of the held-back runs as counts by
    rule: a held-back run's findings are not read run by run (docs/health.md, the
    protocol), and the table is what the lead reads when a new round is scored."""
    out = [f"{name}: {', '.join(rules)}" for name, rules in by_run.items()
           if name not in held]
    counts: dict[str, int] = {}
    for name, rules in by_run.items():
        if name in held:
            for rule in rules:
                counts[rule] = counts.get(rule, 0) + 1
    if counts:
        runs = sum(1 for name in by_run if name in held)
        out.append(f"held back, {runs} run{'s' if runs != 1 else ''} (by rule): "
                   + ", ".join(f"{rule} {n}" for rule, n in
                               sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))
    return out
