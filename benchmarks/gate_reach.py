"""What the held-out benchmark's candidates can reach of issue #44's bars, chosen in sample
(:mod:`cloudlab.reach`: the bars, and why these figures are no evidence for a default).

Printed: how many candidates meet each bar and the three together; per site, on its own, how
many meet its prediction bar, its fidelity bar and both, with its best figure under the other
bar; for every site and with each site and each pair of sites set aside, how many meet both
bars and, under each bound on the largest prediction ratio, the least largest fidelity (the
frontier); and the row of the candidate the run chose for the pipeline (its ``default.json``;
on the benchmark of record, the pipeline's default). Only the candidates scored on
every site count (the later stages' variants of the chosen steps are scored on every site too).

Usage::

    python -m cloudlab heldout --out runs/heldout            # about 20 min
    python benchmarks/gate_reach.py --heldout runs/heldout   # a few seconds
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from cloudlab.heldout import FIDELITY_LIMIT
from cloudlab.reach import RATIO_LIMIT, bars, candidate_table, frontier, markdown, per_site


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heldout", type=Path, required=True, help="a held-out run's folder")
    args = parser.parse_args()
    path = args.heldout / "scores.csv"
    if not path.exists():
        raise SystemExit(
            f"{path}: not found; run `python -m cloudlab heldout --out {args.heldout}` first"
        )
    table, oracle = candidate_table(pd.read_csv(path))
    met = bars(table, oracle)
    count = len(met)
    print(f"{count} candidates scored on every site (in sample, cloudy date dropped)\n")
    print("| bar | candidates meeting it |\n|---|---|")
    print(
        f"| prediction ≤ {RATIO_LIMIT} × the median on every site | {int(met.prediction.sum())} |"
    )
    print(f"| fidelity ≤ {FIDELITY_LIMIT} on every site | {int(met.fidelity.sum())} |")
    print(
        f"| mean r ≤ the nearest-clear oracle's ({oracle.mean():.3f}) | {int(met['mean'].sum())} |"
    )
    both = met.prediction & met.fidelity
    print(f"| prediction and fidelity | {int(both.sum())} |")
    print(f"| all three | {int((both & met['mean']).sum())} |\n")
    print("Each site on its own\n")
    print(markdown(per_site(table)) + "\n")
    print("The least largest fidelity under each bound on the largest prediction ratio\n")
    print(markdown(frontier(table)) + "\n")
    default_file = args.heldout / "default.json"
    if default_file.exists():
        solve, step = json.loads(default_file.read_text())["pipeline_default"].split(" | ")
        default = f"{solve} · {step}"
        if default in met.index:
            row = table[table.candidate == default].set_index("site")[["pred", "ratio", "fid"]]
            print(f"The run's choice for the pipeline (default.json), {default} (in sample)\n")
            print(markdown(row.reset_index()))


if __name__ == "__main__":
    main()
