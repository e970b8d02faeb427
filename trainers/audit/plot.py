"""The audit's picture: the canaries' scores, heads against tails."""

from __future__ import annotations

from typing import Any


def plot_audit(result: dict[str, Any], path: str) -> None:
    """Histograms of the heads and tails canaries' scores, with the bound in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    bins = 40
    axis.hist(result["scores"]["heads"], bins=bins, alpha=0.6, label="canary included (+)")
    axis.hist(result["scores"]["tails"], bins=bins, alpha=0.6, label="canary left out or relabelled (-)")
    black_box = result["threat_model"].startswith("black-box")
    axis.set_xlabel(
        "score: minus the final model's loss on the canary"
        if black_box
        else f"score ({result.get('score_kind', 'sum')}): released values at the canary's coordinate"
    )
    axis.set_ylabel("canaries")
    gdp = result.get("gdp_epsilon_estimate")
    axis.set_title(
        f"{result['method']} ({result['noise_source']}): claimed eps {result['claimed_epsilon']:.3g}, "
        f"audit >= {result['epsilon_lower_bound']:.3g} at {result['confidence']:.0%}"
        + ("" if gdp is None else f", GDP est. {gdp:.3g}"),
        fontsize=9,
    )
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
