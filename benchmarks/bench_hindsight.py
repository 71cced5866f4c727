"""Decision benchmark (issues 26, 37): were the platform's decisions right, in hindsight?

Replays tenants offline, day by day (`hindsight_replay.py`), with the platform's own decision
functions and no platform: the policy's rule, the training `training_job` submits, the gate as
`beats_champion` decides (`models/gate_decision.py`: the rule, then the intervals' coverage,
which widens a first model's short intervals), the deploy-time check as
`challenger_beats_champion_now` decides (`models/deploy_gate.py`), and each canary through the
rollout machine's own table and transitions, timed and observed as the controller does
(`hindsight_canary.py`). A test (`retrain_assets_tests/benchmarks/`) fails when the benchmark's
path and the platform's part.

Each gate verdict, deploy-time check and canary outcome is then judged in hindsight
(`hindsight_score.py`): both models forecast every row of the tenant's next 28 days, and the
lower WAPE was the right choice. Only decisions whose models differ by more than 2 % count;
those within 2 % are excluded (and counted apart), never called right.

Without `--seeds`: the demo's three tenants, 218 demo days (issue 26's run), their demo policy.
With `--seeds`: each seeded scenario (`demo/scenarios.py`: `tuning`, `held-out` or a list such
as `1,2,5`) for `--days` demo days (default 60: most events fall in days 1 to 60), default
policy settings; per scenario and then min / median / max over the scenarios, printed as
Markdown (`hindsight_report.py`). Drift alerts wait for a person, as in the demo, unless
`--approve-drift`. `--rounds` trains fewer boosting rounds through `training_job`'s own
settings (its `num_boost_round`; everything else as it submits): the seeded sets use 50 to run
in minutes on 2 cores (BENCHMARKS.md, "Decisions on seeded scenarios"). `--refit` is an
experiment, not a platform setting: each decision also trains the spec on the whole window and
ships that refit, judged by the gate through its backtest (BENCHMARKS.md, "Backtest, then
refit").

    .venv/bin/python benchmarks/bench_hindsight.py
    .venv/bin/python benchmarks/bench_hindsight.py --seeds held-out --rounds 50 --quiet
    .venv/bin/python benchmarks/bench_hindsight.py --seeds 3,4 --days 20 --json /tmp/h.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hindsight_replay import Replay
from hindsight_report import ScenarioResult, result_of, summary, table
from hindsight_score import Judged

from retrain_assets.demo.scenarios import (
    DEMO_DAYS as SCENARIO_DAYS,
)
from retrain_assets.demo.scenarios import (
    HELD_OUT_SEEDS,
    TUNING_SEEDS,
    ScenarioEvent,
    describe_scenario,
    scenario_tenants,
)
from retrain_assets.demo.tenants import DEMO_TENANTS, TenantSpec
from retrain_assets.models.gate import GATE_RULE
from retrain_assets.runtime.demo_mode import DEMO_ENVIRONMENT

DEMO_DAYS = 218  # issue 26's run: `make up` on a fresh clone to the day after
NAMED_SEEDS = {"tuning": TUNING_SEEDS, "held-out": HELD_OUT_SEEDS}

Scenario = tuple[str, tuple[TenantSpec, ...], tuple[ScenarioEvent, ...]]


def seeds_of(text: str) -> tuple[int, ...]:
    """Return the seeds `--seeds` names: `tuning`, `held-out` or a comma-separated list."""
    if text in NAMED_SEEDS:
        return NAMED_SEEDS[text]
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds takes tuning, held-out or seeds like 1,2,5; not {text!r}"
        ) from None


def scenarios(seeds: Sequence[int] | None) -> list[Scenario]:
    """Return (label, tenants, events) of each scenario; None: the demo's three tenants."""
    if seeds is None:
        return [("demo tenants", DEMO_TENANTS, ())]
    return [(f"seed {s}", scenario_tenants(s), describe_scenario(s)) for s in seeds]


def run_scenario(
    scenario: Scenario,
    days: int,
    approve_drift: bool,
    quiet: bool,
    rounds: int | None = None,
    refit: bool = False,
) -> tuple[ScenarioResult, list[Judged]]:
    """Replay one scenario in a temporary folder and judge its decisions."""
    label, tenants, events = scenario
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hindsight-") as folder:
        say = (lambda _: None) if quiet else print
        replay = Replay(Path(folder), tenants, days, approve_drift, say, rounds, refit)
        replay.run()
        return result_of(label, replay, events, time.perf_counter() - started)


def detail(judged: Sequence[Judged]) -> str:
    """Return one line per decision, oldest first: what was decided and what hindsight says."""
    lines = []
    for j in sorted(judged, key=lambda j: (j.day, j.tenant, j.kind)):
        verdict = "right" if j.right else "WRONG"
        lines.append(
            f"{j.day} {j.tenant:13} {j.kind:6} {'pass' if j.passed else 'fail':4} "
            f"{j.candidate:18} vs {j.replaced[:22]:22} next 28 d WAPE {j.candidate_wape:.4f} "
            f"vs {j.replaced_wape:.4f} ({j.relative:+.1%}) "
            f"{verdict if j.decisive else 'within 2 %'}"
            + (
                f" ({j.rule}, {j.rows_decided_on} rows, {j.canary_days} d)"
                if j.kind == "canary"
                else ""
            )
        )
    return "\n".join(lines)


def load() -> str:
    """Return the 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Return the command line's choices."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=seeds_of, help="tuning, held-out or a list like 1,2,5")
    parser.add_argument(
        "--days", type=int, help=f"demo days (default {DEMO_DAYS}; {SCENARIO_DAYS} with --seeds)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="boosting rounds a training runs, as training_job's num_boost_round (default: its)",
    )
    parser.add_argument("--approve-drift", action="store_true", help="approve drift alerts at once")
    parser.add_argument("--refit", action="store_true", help="ship a refit on the whole window")
    parser.add_argument(
        "--gate",
        choices=["margin", "evidence"],
        help=f"the gate's rule ({GATE_RULE}; default: the environment's, else margin)",
    )
    parser.add_argument(
        "--canary",
        choices=["wape", "evidence"],
        help="the canary's rule (RETRAIN_CANARY_RULE; default: the environment's, else wape)",
    )
    parser.add_argument("--json", type=Path, help="write every scenario and decision here")
    parser.add_argument("--quiet", action="store_true", help="no line per decision while replaying")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Replay each scenario and print the figures (and write them as JSON when asked)."""
    args = parse(argv)
    for name, value in DEMO_ENVIRONMENT.items():  # the demo's settings, unless set
        os.environ.setdefault(name, value)
    if args.gate:
        os.environ[GATE_RULE] = args.gate
    if args.canary:
        os.environ["RETRAIN_CANARY_RULE"] = args.canary
    days = args.days or (DEMO_DAYS if args.seeds is None else SCENARIO_DAYS)
    started, cpu = time.perf_counter(), time.process_time()
    print(f"load before: {load()} ({os.cpu_count()} CPUs); {days} demo days a scenario")
    results, decisions = [], {}
    for scenario in scenarios(args.seeds):
        result, judged = run_scenario(
            scenario, days, args.approve_drift, args.quiet, args.rounds, args.refit
        )
        results.append(result)
        decisions[result.label] = judged
        if not args.quiet:
            print(detail(judged))
        print(f"{result.label}: {result.right} of {result.decisions} right, {result.wall:.0f} s")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print()
    print(table(results))
    if len(results) > 1:
        print()
        print(summary(results))
    print(f"\nwall {wall:.1f} s, CPU {cpu:.1f} s; load after: {load()}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "days": days,
                    "wall_seconds": wall,
                    "scenarios": [dataclasses.asdict(r) for r in results],
                    "decisions": {
                        label: [
                            {**dataclasses.asdict(j), "day": j.day.isoformat(), "right": j.right}
                            for j in judged
                        ]
                        for label, judged in decisions.items()
                    },
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
