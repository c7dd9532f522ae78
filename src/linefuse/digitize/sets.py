"""The charts digitize is decided on and the charts it is reported on (params `digitize_sets`).

Each is the default data's recipe (data.charts) drawn with a seed of its own, so none holds a
chart the default run trains on or reports, nor one that decides a base. The dev sets leave out
the held-out libraries and families, so that no rule is decided on a look evaluate holds out;
their charts are the ones digitize's rules, thresholds and reader are compared on (a rule is
kept where it gains on both: one set's 120 charts alone are fitted by the rules decided on
them), and tests/digitize/fixtures are some of the first's. The report set is read once every
decision is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from linefuse.params.data import ChartParams

if TYPE_CHECKING:
    from linefuse.params.full import Params


def dev_chart_params(params: Params, seed: int | None = None) -> ChartParams:
    """The dev set's recipe: data.charts with digitize_sets.dev_seed (or `seed`) and .charts,
    without the held-out libraries (the rest keep their shares' proportions) and families."""
    charts, sets = params.data.charts, params.digitize_sets
    libraries = {n: s for n, s in charts.libraries.items() if n not in charts.held_out}
    total = sum(libraries.values())
    return charts.model_copy(
        update={
            "seed": sets.dev_seed if seed is None else seed,
            "count": sets.charts,
            "libraries": {name: share / total for name, share in libraries.items()},
            "families": {k: v for k, v in charts.families.items() if k not in charts.held_out},
            "held_out": [],
        }
    )


def report_chart_params(params: Params) -> ChartParams:
    """The report set's recipe: data.charts as it is, with digitize_sets.report_seed and
    .charts."""
    sets = params.digitize_sets
    return params.data.charts.model_copy(update={"seed": sets.report_seed, "count": sets.charts})


def dev2_chart_params(params: Params) -> ChartParams:
    """The second dev set's recipe: the dev set's with digitize_sets.dev2_seed."""
    return dev_chart_params(params, params.digitize_sets.dev2_seed)


CHART_SETS = {"dev": dev_chart_params, "dev2": dev2_chart_params, "report": report_chart_params}


def main(argv: list[str] | None = None) -> None:
    """python -m linefuse.digitize.sets {dev,report} FOLDER [INDEX ...]: writes those charts
    of the set (all of them when none is named) into FOLDER, as generate writes each."""
    import argparse
    from pathlib import Path

    from linefuse.data.charts import write_chart
    from linefuse.params.full import load_params

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("set", choices=sorted(CHART_SETS))
    parser.add_argument("folder", type=Path)
    parser.add_argument("indices", type=int, nargs="*")
    args = parser.parse_args(argv)
    charts = CHART_SETS[args.set](load_params())
    args.folder.mkdir(parents=True, exist_ok=True)
    for index in args.indices or range(charts.count):
        write_chart(charts, args.folder, index)
    print(f"wrote {len(args.indices) or charts.count} {args.set} charts to {args.folder}")


if __name__ == "__main__":
    main()
