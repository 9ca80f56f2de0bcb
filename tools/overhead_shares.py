"""Per-source accuracy and residual-overhead share of the training forecasts (in-sample).

For each public training row that parses: the error against the measurement and the share of
the forecast step that is the calibrated residual ("other (calibrated overhead)"), plus the
modelled host/launch share. Prints per source and per arch type (dense quality A/B, MoE) and
the worst rows. Exploration/report script, not part of the package.

    python tools/overhead_shares.py [--kernel-backend=NAME] [path/to/training.csv]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from perfcast.estimate.training import estimate_training
from perfcast.validate.compare import validate_training

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> None:
    backend = "analytical"
    paths = []
    for arg in argv:
        if arg.startswith("--kernel-backend="):
            backend = arg.split("=", 1)[1]
        else:
            paths.append(Path(arg))
    path = paths[0] if paths else ROOT.parent / "shared/ground_truth/training.csv"
    shares: dict[float, tuple[float, float]] = {}

    def estimator(*args, **kwargs):
        report = estimate_training(*args, kernel_backend=backend, **kwargs)
        b = report.breakdown
        host = getattr(b, "host_s", 0.0)
        shares[report.step_time_s] = (b.other_s / report.step_time_s, host / report.step_time_s)
        return report

    for label, qualities, arch in (("dense A/B", ("A", "B"), ("dense",)),
                                   ("moe (all qualities)", None, ("moe",))):
        rows = validate_training(path, estimator, qualities=qualities, arch_types=arch).rows
        by_source = defaultdict(list)
        for row in rows:
            by_source[row.source_id].append(row)
        errors = [abs(r.error) for r in rows]
        print(f"== {label}: rows {len(rows)} MAPE {statistics.mean(errors):.1%} median "
              f"{statistics.median(errors):.1%} within10 "
              f"{sum(e <= .1 for e in errors) / len(errors):.0%} within20 "
              f"{sum(e <= .2 for e in errors) / len(errors):.0%}")
        print(f"{'source':<28}{'n':>4}{'MAPE':>8}{'bias':>8}{'resid':>8}{'host':>8}")
        for source, group in sorted(by_source.items()):
            errs = [r.error for r in group]
            sh = [shares.get(r.predicted_step_time_s, (float('nan'),) * 2) for r in group]
            print(f"{source:<28}{len(group):>4}{statistics.mean(abs(e) for e in errs):>8.1%}"
                  f"{statistics.mean(errs):>+8.1%}{statistics.mean(s[0] for s in sh):>8.1%}"
                  f"{statistics.mean(s[1] for s in sh):>8.1%}")
        worst = sorted(rows, key=lambda r: -abs(r.error))[:8]
        print("worst: " + ", ".join(f"{r.row_id} {r.model} {r.gpu} {r.error:+.0%}" for r in worst))


if __name__ == "__main__":
    main(sys.argv[1:])
