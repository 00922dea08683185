"""Decision quality: restarts, convergence, over-provisioning and backlog on load traces (a script).

Runs the daemon's real tick against the simulated lab (``decisions.py`` says how) on twelve load traces,
each under the reference autoscaler's profile and under our recommended one
(``autoscaler/settings/profiles.py``), and prints one table with both side by side and their ratio,
each run's cost and its regret against the best plan in hindsight (issue 38), then the issue 11
targets the recommended profile meets or misses. A full run (every trace, both
profiles) also writes the table to ``docs/performance.md`` with the command and the date.

The decisions do not depend on the evaluator: ``--evaluator spark`` gave the same outcome, target and
rates on every job and tick as the default plain-Python one (``--log`` files compared), at about five
times the wall time, so the default is Python.

Run: ``.venv/bin/python bench/bench_decisions.py`` (a few minutes); to tune a profile quickly,
``--trace step-down-4 --profile recommended`` or ``--quick`` (the long traces shortened to 30 min);
``--log ticks.jsonl`` writes what the daemon measured and decided for every job and tick.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from decisions import (
    CATCH_UP_TARGET_S,
    DEFAULT_COST,
    JITTER_MS,
    OPTIMUM_UTILIZATION,
    QUICK_TRACES,
    SEED,
    SETUP,
    SLOTS_PER_JOB,
    TRACES,
    JobRun,
    Quality,
    RunConfig,
    hindsight,
    run_sync,
    score,
)
from doc_section import write_section

from autoscaler.foresight.cost import CostModel
from autoscaler.foresight.hindsight import BestPlan
from autoscaler.logs import configure_logging
from autoscaler.settings import AutoscalerOptions
from autoscaler.settings.profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
SECTION = "## Decision quality"

DEFINITIONS = f"""\
- **restarts**: rescales the simulated cluster applied after the load change (the warm-up before it is
  steady and right-sized; a restart there would be listed apart).
- **to final p**: seconds from the load change until the job ran at its final parallelism (the end of
  the last restart; 0 if it never restarted); `-` for traces whose load never settles.
- **over-prov.**: slot-seconds above the optimum, in % of the optimum's slot-seconds. The optimum at
  each second is, per vertex, the smallest parallelism whose capacity x {OPTIMUM_UTILIZATION} (the
  reference's `utilization.target`, the same yardstick for both profiles) covers the offered rate, from
  the simulator's known capacity per subtask; a job holds as many slots as its widest vertex. Seconds
  below the optimum count 0 here: they show up as backlog.
- **backlog s**: seconds in which the backlog would not be drained within {CATCH_UP_TARGET_S / 60:g} min
  (the reference's `catch-up.duration`) at the job's capacity then: every second of a restart with
  records waiting, every second the job runs slower than its input with records waiting.
- **reversals**: consecutive restarts in opposite directions (up then down, or down then up).
- **final slots (opt)**: slots at the end of the trace, and the optimum for the load then.
- **cost**: the run priced from the same readings (`autoscaler/foresight/cost.py`), in thousands of
  slot-seconds, at the prices of the profile's options (`job.autoscaler.cost.*`, both profiles at the
  defaults): each second's slots (a restart's pause included) x {DEFAULT_COST.slot_second:g}, each restart
  x {DEFAULT_COST.restart:g}, each second above the lag target x {DEFAULT_COST.lag_second:g}. With
  `lag.target` unset, as in both, those are the seconds of "backlog s" (the catch-up bound).
- **regret**: cost / the best plan's in hindsight. That plan knows the whole load of the scored part and
  picks the parallelism at each second, 1 to {SLOTS_PER_JOB} slots of 1250 rec/s, a restart pausing as the
  lab's does, from where the profiles start with nothing waiting, priced by the same function: dynamic
  programming over seconds and slots that keeps every (cost, backlog) pair no other beats on both, exact
  (`autoscaler/foresight/hindsight.py`). It may run a slot at 100 % busy: it knows the load. It restarts
  on whole seconds only, so a run could come out a hair below it (regret just under 1).
- **best (restarts)**: the best plan's cost, and its restarts.
- Cells read `reference / recommended (recommended / reference)`."""


# ---------------------------------------------------------------------------------------------- table
def _fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(ref: float | None, rec: float | None) -> str:
    if ref is None or rec is None:
        return ""
    if ref == rec:
        return " (=)"
    if ref == 0:
        return " (inf)"
    return f" ({rec / ref:.2f}x)"


def _cell(values: Mapping[str, float | None], digits: int = 0) -> str:
    if set(values) == {"reference", "recommended"}:
        ref, rec = values["reference"], values["recommended"]
        return f"{_fmt(ref, digits)} / {_fmt(rec, digits)}{_ratio(ref, rec)}"
    return " / ".join(_fmt(v, digits) for v in values.values())


def table(results: Mapping[str, Mapping[str, Quality]], loads: Mapping[str, str]) -> str:
    """One markdown row per trace, then the totals over the set."""
    head = (
        "| trace | load | restarts | to final p (s) | over-prov. % | backlog s | reversals "
        "| final slots (opt) | cost (k slot-s) | regret | best (restarts) |"
    )
    lines = [head, "|" + "---|" * 11]

    def best(by: Mapping[str, Quality]) -> str:
        plans = {(q.best.cost.total, q.best.cost.restarts) for q in by.values() if q.best is not None}
        return " / ".join(f"{total / 1000:.1f} ({n})" for total, n in sorted(plans)) or "-"

    def row(name: str, load: str, by: Mapping[str, Quality]) -> str:
        finals = " / ".join(f"{q.final_slots} ({q.final_optimum})" for q in by.values())
        cells = [
            _cell({p: q.restarts for p, q in by.items()}),
            _cell({p: q.converge_s for p, q in by.items()}),
            _cell({p: q.overprovision_pct for p, q in by.items()}, 1),
            _cell({p: q.backlog_s for p, q in by.items()}),
            _cell({p: q.reversals for p, q in by.items()}),
            finals,
            _cell({p: q.cost.total / 1000 for p, q in by.items()}, 1),
            _cell({p: q.regret for p, q in by.items()}, 2),
            best(by),
        ]
        return f"| {name} | {load} | " + " | ".join(cells) + " |"

    for name, by in results.items():
        lines.append(row(name, loads[name], by))
    profiles = next(iter(results.values())).keys()
    totals = {
        p: {
            "restarts": sum(by[p].restarts for by in results.values()),
            "over": 100.0
            * sum(by[p].slot_s_above for by in results.values())
            / max(1.0, sum(by[p].slot_s_needed for by in results.values())),
            "backlog": sum(by[p].backlog_s for by in results.values()),
            "reversals": sum(by[p].reversals for by in results.values()),
            "cost": sum(by[p].cost.total for by in results.values()),
            "best": sum(by[p].best.cost.total for by in results.values() if by[p].best is not None),
            "best restarts": sum(
                by[p].best.cost.restarts for by in results.values() if by[p].best is not None
            ),
        }
        for p in profiles
    }
    bests = {(t["best"], t["best restarts"]) for t in totals.values()}
    cells = [
        _cell({p: t["restarts"] for p, t in totals.items()}),
        "",
        _cell({p: t["over"] for p, t in totals.items()}, 1),
        _cell({p: t["backlog"] for p, t in totals.items()}),
        _cell({p: t["reversals"] for p, t in totals.items()}),
        "",
        _cell({p: t["cost"] / 1000 for p, t in totals.items()}, 1),
        _cell({p: t["cost"] / t["best"] if t["best"] > 0 else None for p, t in totals.items()}, 2),
        " / ".join(f"{total / 1000:.1f} ({n})" for total, n in sorted(bests)),
    ]
    lines.append("| **all traces** | | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _warm_ups(results: Mapping[str, Mapping[str, Quality]]) -> str:
    """The steady warm-ups should cost nothing: say so, or name the restarts they did cost."""
    warm = [
        f"{trace} ({profile}): {q.warm_up_restarts}"
        for trace, by in results.items()
        for profile, q in by.items()
        if q.warm_up_restarts
    ]
    return (
        "Restarts during the warm-up, not scored: " + ", ".join(warm)
        if warm
        else "No restart in any warm-up."
    )


def _exact(bests: Iterable[BestPlan]) -> str:
    """Whether every best plan is the true optimum (no Pareto front cut), and the widest front kept."""
    plans = list(bests)
    cut = sum(1 for b in plans if not b.exact)
    widest = max((b.widest_front for b in plans), default=0)
    if cut:
        return f"{cut} of {len(plans)} best plans are approximations (a Pareto front was cut)."
    return f"Every best plan is exact (the widest Pareto front kept {widest} paths)."


# ---------------------------------------------------------------------------------------------- targets
def _verdicts(out: list[str]) -> Callable[[bool, str], None]:
    """What both target lists print a target with: ``MET`` or ``MISSED``, then its figures."""

    def verdict(ok: bool, text: str) -> None:
        out.append(f"- {'MET   ' if ok else 'MISSED'} {text}")

    return verdict


def targets(results: Mapping[str, Mapping[str, Quality]], steps: Mapping[str, int]) -> list[str]:
    """Issue 11 item 2, for the recommended profile: each target met or missed, and by how much."""
    rec = {t: by["recommended"] for t, by in results.items() if "recommended" in by}
    ref = {t: by["reference"] for t, by in results.items() if "reference" in by}
    out: list[str] = []
    verdict = _verdicts(out)

    stepped = {t: q for t, q in rec.items() if steps[t] > 0}
    if stepped:
        over = {t: q.restarts - steps[t] for t, q in stepped.items() if q.restarts > steps[t]}
        detail = ", ".join(f"{t}: {stepped[t].restarts} restarts ({n} too many)" for t, n in over.items())
        verdict(not over, f"at most 1 restart per step change{': ' + detail if detail else ''}")
    if "noise" in rec:
        n = rec["noise"].restarts
        verdict(n == 0, f"0 restarts under stationary +-15 % noise: {n}")
    if rec:
        fat = {t: q.overprovision_pct for t, q in rec.items() if q.overprovision_pct > 15.0}
        detail = ", ".join(f"{t} {v:.1f} %" for t, v in fat.items())
        verdict(not fat, f"over-provisioning <= 15 % on every trace{': ' + detail if detail else ''}")
    if rec and ref.keys() == rec.keys():
        r_ref, r_rec = sum(q.restarts for q in ref.values()), sum(q.restarts for q in rec.values())
        change = 100.0 * abs(1 - r_rec / r_ref) if r_ref else 0.0
        verdict(
            r_ref > 0 and r_rec <= 0.5 * r_ref,
            f">= 50 % fewer restarts than the reference: {r_rec} vs {r_ref} ({change:.0f} % "
            f"{'fewer' if r_rec <= r_ref else 'more'}; <= {int(0.5 * r_ref)} needed)",
        )
        b_ref, b_rec = sum(q.backlog_s for q in ref.values()), sum(q.backlog_s for q in rec.values())
        verdict(b_rec <= b_ref, f"no more seconds of backlog above target: {b_rec:.0f} vs {b_ref:.0f}")
    return out


PREDICTABLE = ("ramp", "sine", "daily-noisy", "weekly", "ramp-noisy")
"""Issue 38 item 4's predictable traces (a ramp, cycles): regret at most 1.15."""
STEPS_AND_BURSTS = ("step-up-x2", "step-up-x4", "step-down-4", "short-bursts", "bursts", "flash-crowd")
"""... and its steps and bursts: regret at most 1.4."""
CONVERGE_BEFORE_S = {"step-up-x2": 40.0, "step-up-x4": 40.0, "step-down-4": 85.0}
"""Each step's time to its final parallelism under the recommended profile when issue 38 was filed
(docs/performance.md then): "no slower than today" (within a second: the ticks are jittered)."""


def foresight_targets(
    results: Mapping[str, Mapping[str, Quality]], runs: Sequence[JobRun], profile: str = "recommended"
) -> list[str]:
    """Issue 38 item 4, for ``profile``: each target met or missed, with the figure."""
    mine = {t: by[profile] for t, by in results.items() if profile in by}
    ref = {t: by["reference"] for t, by in results.items() if "reference" in by}
    out: list[str] = []
    verdict = _verdicts(out)

    if mine and ref.keys() == mine.keys():
        r_ref, r_mine = sum(q.restarts for q in ref.values()), sum(q.restarts for q in mine.values())
        b_ref, b_mine = sum(q.backlog_s for q in ref.values()), sum(q.backlog_s for q in mine.values())
        verdict(
            r_mine <= 0.5 * r_ref and b_mine <= b_ref,
            f"restarts <= 50 % of the reference's with no more seconds above the lag target: {r_mine} "
            f"vs {r_ref} (<= {int(0.5 * r_ref)} needed), {b_mine:.0f} vs {b_ref:.0f} s",
        )
    for names, bound, what in (
        (PREDICTABLE, 1.15, "predictable traces"),
        (STEPS_AND_BURSTS, 1.4, "steps and bursts"),
    ):
        regrets = {t: mine[t].regret for t in names if t in mine and mine[t].regret is not None}
        if regrets:
            over = {t: r for t, r in regrets.items() if r is not None and r > bound}
            figures = ", ".join(f"{t} {r:.2f}" for t, r in regrets.items() if r is not None)
            verdict(not over, f"regret <= {bound} on the {what}: {figures}")
    by_name = {(r.trace.name, r.profile): r for r in runs}
    for name in ("daily-noisy", "weekly"):
        run = by_name.get((name, profile))
        if run is None or run.trace.day_s is None:
            continue
        day = run.trace.day_s
        days = int(run.trace.duration_s // day)
        counts = [
            sum(1 for x in run.rescales if k * day <= x.t_s < (k + 1) * day) for k in range(1, days + 1)
        ]
        verdict(
            max(counts, default=0) <= 2,
            f"a repeating pattern ({name}): at most 2 restarts per day after the first: {counts}",
        )
    noise = by_name.get(("noise", profile))
    if noise is not None and "noise" in mine:
        ahead = sum(1 for n in noise.notes if n.outcome == "Scaling" and "sized ahead" in n.detail)
        verdict(
            mine["noise"].restarts == 0 and ahead == 0,
            f"stationary noise: 0 restarts and 0 forecast-driven scale-ups: {mine['noise'].restarts} "
            f"and {ahead}",
        )
    steps = {t: mine[t] for t in CONVERGE_BEFORE_S if t in mine}
    if steps:
        slower = {
            t: q.converge_s
            for t, q in steps.items()
            if q.converge_s is None or q.converge_s > CONVERGE_BEFORE_S[t] + 1.0 or q.restarts > 1
        }
        figures = ", ".join(
            f"{t} {q.restarts} restart(s), {f'{q.converge_s:.0f}' if q.converge_s is not None else '-'} s "
            f"(before: {CONVERGE_BEFORE_S[t]:g} s)"
            for t, q in steps.items()
        )
        verdict(not slower, f"steps: <= 1 restart each and no slower than before: {figures}")
    return out


# ---------------------------------------------------------------------------------------------- the doc
def write_doc(section: str, path: Path = DOC) -> None:
    """Replace (or add) the "Decision quality" section of ``path``; other sections stay as they are."""
    write_section(path, SECTION, section)


def _log(runs: Sequence[JobRun], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for run in runs:
            for note in run.notes:
                f.write(json.dumps({"job": run.name, **dataclasses.asdict(note)}) + "\n")


# ---------------------------------------------------------------------------------------------- main
def _prices(profile: Mapping[str, str]) -> CostModel:
    """The prices and lag target a job of ``profile`` has: its ``job.autoscaler.cost.*``, ``lag.target``
    and ``catch-up.duration``, over the lab's set-up (a job's own keys win, as in the run)."""
    return CostModel.of(AutoscalerOptions.from_flink_conf({**SETUP, **profile}))


def _evaluator(kind: str, master: str) -> tuple[Any, Any]:
    """The evaluator and what stops it. Decisions are the same on both (the Spark tests hold them equal)."""
    if kind == "python":
        from autoscaler.evaluate.oracle.evaluator import PythonEvaluator

        return PythonEvaluator(), None
    from autoscaler.evaluate.spark.evaluator import SparkEvaluator, create_spark_session
    from autoscaler.settings import SparkSettings

    spark = create_spark_session(SparkSettings(master=master, app_name="bench-decisions"))
    evaluator = SparkEvaluator(spark)
    evaluator.warm_up()
    return evaluator, spark


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", action="append", choices=sorted(TRACES), help="run only these (repeatable)")
    ap.add_argument("--profile", action="append", choices=sorted(PROFILES), help="only these (repeatable)")
    ap.add_argument(
        "--try",
        dest="tries",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="one more profile: recommended with these options (repeatable), e.g. "
        "cost:job.autoscaler.cost.enabled=true; never written to the doc",
    )
    ap.add_argument(
        "--quick", action="store_true", help="score the sine and noise traces over 30 min, not 2 h"
    )
    ap.add_argument("--evaluator", choices=("python", "spark"), default="python")
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument("--in-process", action="store_true", help="the simulator's REST handlers without HTTP")
    ap.add_argument("--jitter-ms", type=int, default=JITTER_MS, help="tick-instant jitter")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--log", type=Path, help="write every job's tick notes here (JSON lines)")
    ap.add_argument("--no-doc", action="store_true", help="do not write docs/performance.md")
    args = ap.parse_args(argv)
    configure_logging("console", "ERROR")

    catalogue = QUICK_TRACES if args.quick else TRACES
    traces = [catalogue[n] for n in (args.trace or catalogue)]
    profiles = {n: PROFILES[n] for n in (args.profile or PROFILES)}
    for spec in args.tries:
        name, _, pairs = spec.partition(":")
        extra = dict(pair.split("=", 1) for pair in pairs.split(",") if pair)
        profiles[name] = {**PROFILES["recommended"], **extra}
    models = {name: _prices(options) for name, options in profiles.items()}  # an invalid --try fails here
    config = RunConfig(jitter_ms=args.jitter_ms, seed=args.seed, http=not args.in_process)
    evaluator, spark = _evaluator(args.evaluator, args.spark_master)
    started = time.perf_counter()

    def progress(t_s: float, end_s: float) -> None:
        print(f"\r  simulated {t_s / 60:5.0f} / {end_s / 60:.0f} min", end="", file=sys.stderr, flush=True)

    try:
        runs = run_sync(traces, profiles, evaluator, config, progress if sys.stderr.isatty() else None)
    finally:
        if spark is not None:
            spark.stop()
    wall_s = time.perf_counter() - started
    print(file=sys.stderr)

    started_best = time.perf_counter()
    bests = {(t.name, m): hindsight(t, m, config) for t in traces for m in set(models.values())}
    best_s = time.perf_counter() - started_best
    results: dict[str, dict[str, Quality]] = {}
    for run in runs:
        model = models[run.profile]
        results.setdefault(run.trace.name, {})[run.profile] = score(run, model, bests[run.trace.name, model])
    loads = {t.name: t.description for t in traces}
    stale = sum(q.stale_ticks for by in results.values() for q in by.values())
    ticks = sum(q.ticks for by in results.values() for q in by.values())
    command = ".venv/bin/python bench/bench_decisions.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    setup = ", ".join(
        f"`{k.removeprefix('job.autoscaler.')}` {v}" for k, v in SETUP.items() if "enabled" not in k
    )
    body = "\n".join(
        [
            SECTION,
            "",
            f"Produced by `{command.strip()}` on {datetime.date.today().isoformat()}: "
            f"{wall_s:.0f} s of wall time ({args.evaluator} evaluator, simulator over "
            f"{'HTTP' if config.http else 'in-process REST'}), and {best_s:.0f} s for the best plans in "
            "hindsight. Profiles: `autoscaler/settings/profiles.py`.",
            "",
            f"The simulated lab: control loop {config.tick_s:g} s (tick instants jittered by up to "
            f"{config.jitter_ms} ms), Flink's lazy metric fetch every {config.fetch_s:g} s, "
            f"a restart pauses processing for {config.restart_pause_s:g} s, Flink's rescale cooldown 30 s; "
            f"{setup}; one `work_job` per trace and profile (Work: 1250 rec/s per subtask), all in one "
            "cluster and one daemon; 5 steady minutes before each change. "
            f"{stale} of {ticks} scored samples were stale (no metric fetch landed in their tick).",
            "",
            DEFINITIONS,
            "",
            table(results, loads),
            "",
            _warm_ups(results) + " " + _exact(bests.values()),
            "",
            "Targets of issue 11 item 2, recommended profile:",
            "",
            *targets(results, {t.name: t.step_changes for t in traces}),
            "",
            "Targets of issue 38 item 4, recommended profile:",
            "",
            *foresight_targets(results, runs),
            "",
        ]
    )
    print(body)
    if args.log is not None:
        _log(runs, args.log)
    full = not args.quick and not args.trace and not args.profile and not args.tries
    if full and not args.no_doc:
        write_doc(body)
        print(f"written to {DOC.relative_to(ROOT)}")
    elif not args.no_doc:
        print(f"{DOC.relative_to(ROOT)} not written: only a full run (every trace, both profiles) is")


if __name__ == "__main__":
    main()
