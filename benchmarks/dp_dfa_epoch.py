"""DP-DFA's epoch against a plain epoch, interleaved: the one row of :mod:`benchmarks.private_vs_opacus`
that its goal names (DP-DFA <= 1.2x plain), timed without the other rows between.

    python -m benchmarks.dp_dfa_epoch [--rounds 7] [--train 54000]

Each round times a plain epoch (a plain torch loop) then a DP-DFA epoch of the same MLP and data; the
median of the per-round ratios is printed with its spread.
"""

from __future__ import annotations

import statistics

from benchmarks.epoch_setup import epoch_parser, warmed_data
from benchmarks.private_vs_opacus import GOALS, ours, plain_epoch_seconds


def main() -> None:
    args = epoch_parser(__doc__, rounds=7).parse_args()
    data = warmed_data("dp-dfa", args)
    ratios, seconds = [], []
    for _ in range(args.rounds):
        plain = plain_epoch_seconds(data)
        dfa = ours("dp-dfa", data, 1, args.epsilon)[0]
        ratios.append(dfa / plain)
        seconds.append(dfa)
    goal = GOALS["dp-dfa x plain"]
    median = statistics.median(ratios)
    print(
        f"dp-dfa {statistics.median(seconds):.3f} s an epoch; x plain: median {median:.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"
    )
    print(f"  goal <= {goal}x: {'met' if median <= goal else 'NOT met'}")


if __name__ == "__main__":
    main()
