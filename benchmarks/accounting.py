"""Accountant speed and agreement, against dp-accounting and Opacus in the same run.

    python -m benchmarks.accounting

A mixed run of 10^5 steps (add/remove adjacency): Poisson-subsampled Gaussian (DP-SGD-like),
an unsampled Gaussian every 100 steps, and DP-ULR's sampled-with-rejection Gaussian. Prints
epsilon and the median time of one ``get_epsilon`` call for this accountant; for the standard
part (the Poisson Gaussian steps alone) also dp-accounting's RDP and PLD and Opacus's RDP.
First, a table of epsilon for a few runs beside dp-accounting's RDP and PLD.
"""

from __future__ import annotations

import logging

import dp_accounting
from opacus.accountants import RDPAccountant as OpacusRDP

from benchmarks.timing import median_seconds
from opu_hal.privacy import (
    Accountant,
    GaussianEvent,
    PoissonGaussianEvent,
    SampledWithRejectionGaussianEvent,
)

STEPS = 100_000
DELTA = 1e-5
Q, Z = 256 / 60_000, 1.1


def mixed_accountant() -> Accountant:
    accountant = Accountant("add_remove")
    poisson, gaussian = PoissonGaussianEvent(Q, Z), GaussianEvent(50.0)
    srgm = SampledWithRejectionGaussianEvent(0.01, 4.0, 500, 60_000)
    for _ in range(STEPS // 100):  # interleaved, as a trainer would record them
        accountant.step(poisson, 90)
        accountant.step(srgm, 9)
        accountant.step(gaussian, 1)
    return accountant


TABLE_RUNS = [  # (dataset size, batch, noise multiplier, epochs)
    (60_000, 256, 1.1, 15),
    (60_000, 256, 0.8, 15),
    (60_000, 128, 1.0, 30),
    (60_000, 1024, 2.0, 50),
    (10_000, 100, 0.7, 5),
]


def print_epsilon_table() -> None:
    """Epsilon of a few DP-SGD-like runs: this accountant beside dp-accounting's RDP and PLD."""
    print(
        f"{'N':>6} {'m':>5} {'z':>4} {'epochs':>6} {'steps':>6} {'ours RDP':>9} "
        f"{'dp-acc RDP':>10} {'dp-acc PLD':>10}   (Poisson sampling, delta={DELTA:g})"
    )
    for n, m, z, epochs in TABLE_RUNS:
        steps = epochs * n // m
        ours = Accountant("add_remove")
        ours.step(PoissonGaussianEvent(m / n, z), steps)
        event = dp_accounting.PoissonSampledDpEvent(m / n, dp_accounting.GaussianDpEvent(z))
        library = dp_accounting.rdp.RdpAccountant()
        library.compose(event, steps)
        pld = dp_accounting.pld.PLDAccountant()
        pld.compose(event, steps)
        print(
            f"{n:>6} {m:>5} {z:>4} {epochs:>6} {steps:>6} {ours.get_epsilon(DELTA):>9.4f} "
            f"{library.get_epsilon(DELTA):>10.4f} {pld.get_epsilon(DELTA):>10.4f}"
        )


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)
    print_epsilon_table()
    build_s = median_seconds(mixed_accountant, repeats=3, warmup=1)
    mixed = mixed_accountant()
    print(f"mixed run, {mixed.steps} steps, {len(mixed.ledger)} ledger entries (built in {build_s:.2f} s)")
    print(
        f"  this accountant     epsilon {mixed.get_epsilon(DELTA):.6f}   "
        f"get_epsilon {median_seconds(lambda: mixed.get_epsilon(DELTA)) * 1e3:.3f} ms"
    )

    ours = Accountant("add_remove")
    ours.step(PoissonGaussianEvent(Q, Z), STEPS)
    library = dp_accounting.rdp.RdpAccountant()
    library.compose(dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(Z)), STEPS)
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(Z)), STEPS)
    opacus = OpacusRDP()
    opacus.history = [(Z, Q, STEPS)]
    rows = [
        ("this accountant", lambda: ours.get_epsilon(DELTA)),
        ("dp-accounting RDP", lambda: library.get_epsilon(DELTA)),
        ("dp-accounting PLD", lambda: pld.get_epsilon(DELTA)),
        ("opacus RDP", lambda: opacus.get_epsilon(DELTA)),
    ]
    print(f"standard part: Poisson Gaussian q={Q:.6f} z={Z}, {STEPS} steps, delta={DELTA:g}")
    base = median_seconds(rows[0][1])
    for name, get in rows:
        seconds = median_seconds(get, repeats=3 if "PLD" in name else 7, warmup=1)
        print(
            f"  {name:<20} epsilon {get():.6f}   get_epsilon {seconds * 1e3:9.3f} ms  "
            f"({seconds / base:6.2f}x this accountant)"
        )


if __name__ == "__main__":
    main()
