"""Hostile inputs to the Python API (``trainers.api``): bad arguments of ``make_private``,
``make_private_with_epsilon``, ``attach_dfa``, ``calibrate`` and ``plan``; non-finite, mismatched
or unfit data; batches other than the one the private loader drew; engine calls out of order.

Each case is classified as in :mod:`hostile_inputs`: ``clear`` (an ``OpuHalError``), ``accepted``
(a valid input that trained or planned with finite results), ``traceback`` (any other exception),
``silent`` (accepted, but with non-finite weights or epsilon, or an input that must be refused).
Prints the counts and writes ``results/fuzz/api_corpus.json``.

    python scripts/fuzz/api_corpus.py
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from opu_hal import OpuHalError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_corpus_devices import attach_cases, calibrate_cases, plan_cases

ROOT = Path(__file__).resolve().parents[2]
NAN, INF = float("nan"), float("inf")
VALUES: list[Any] = [NAN, INF, -INF, -1, 0, 1e-300, 1e308, 2**64, 2.5, "1", None, True, [1], 0.5, 7]
Case = tuple[str, Callable[[], str]]


def classify(run: Callable[[], str]) -> str:
    try:
        return run()
    except OpuHalError:
        return "clear"
    except Exception as exc:  # noqa: BLE001 - the corpus counts exactly these
        return f"traceback: {type(exc).__name__}: {str(exc)[:100]}"


def positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def whole(v: Any, low: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


#: Which values of each argument a correct API may accept (anything else accepted is ``silent``).
VALID: dict[str, Callable[[Any], bool]] = {
    "noise_multiplier": lambda v: positive(v) and 1e-3 <= v <= 1e6,
    "max_grad_norm": lambda v: positive(v) and v <= 1e6,
    "tau_h": lambda v: positive(v) and v <= 1e6,
    "beta": lambda v: positive(v) and v <= 1e6,
    "batch_size": lambda v: whole(v),
    "public_dataset_size": lambda v: v is None or whole(v),
    "target_epsilon": lambda v: v is None or positive(v),
    "target_delta": lambda v: positive(v) and v < 1,
    "feedback_seed": lambda v: whole(v, 0),
    "lattice_resolution": lambda v: positive(v) and 0.5 <= v <= 1000,
    "loss_reduction": lambda v: v in ("mean", "sum"),
    "method": lambda v: v in ("dp-sgd", "dp-dfa"),
    "noise_source": lambda v: v in ("software", "device"),
    "rounding_analysis": lambda v: v in ("per-coordinate", "worst-case"),
    "device": lambda v: v is None or isinstance(v, str),
}
GENERIC = [k for k in VALID if k not in ("tau_h", "beta")]
DFA_ONLY = ["tau_h", "beta", "max_grad_norm", "feedback_seed", "noise_multiplier", "batch_size"]


def tiny(features: int = 5) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(features, 8), nn.Tanh(), nn.Linear(8, 3))


def data(n: int = 200, features: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, features, generator=g), torch.randint(0, 3, (n,), generator=g)


def private(method: str = "dp-sgd", model: nn.Module | None = None, **changes: Any) -> tuple[Any, ...]:
    from trainers.api import PrivacyEngine

    model = tiny() if model is None else model
    params = list(model.parameters()) if isinstance(model, nn.Module) else []
    args: dict[str, Any] = dict(
        module=model,
        optimizer=torch.optim.SGD(params or list(tiny().parameters()), lr=0.1),
        data_loader=data(),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=50,
        method=method,
    )
    args.update(changes)
    engine = PrivacyEngine()
    return (engine, *engine.make_private(**args))


def train_epoch(engine: Any, model: nn.Module, optimizer: Any, loader: Any, steps: int = 2) -> str:
    """``steps`` steps in the user's loop: ``accepted`` if weights and epsilon stay finite, else ``silent``."""
    for _, (xb, yb) in zip(range(steps), loader):
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    epsilon = engine.get_epsilon(1e-5) if engine.steps else 0.0
    return "accepted" if finite and math.isfinite(epsilon) else "silent"


def make_private_case(method: str, key: str, value: Any) -> Callable[[], str]:
    def run() -> str:
        engine, model, optimizer, loader = private(**{"method": method, key: value})
        outcome = train_epoch(engine, model, optimizer, loader)
        return outcome if VALID[key](value) else "silent"

    return run


def argument_cases() -> list[Case]:
    cases = [(f"make_private dp-sgd {k}={v!r}", make_private_case("dp-sgd", k, v)) for k in GENERIC for v in VALUES]
    cases += [(f"make_private dp-dfa {k}={v!r}", make_private_case("dp-dfa", k, v)) for k in DFA_ONLY for v in VALUES]
    return cases


def with_bad(x: torch.Tensor, index: int, value: float) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[index] = value
    return x


#: Data read lazily (a Dataset, a DataLoader): checked at the loader, as each batch is drawn.
LAZY = ("Subset with nan", "DataLoader with nan")


def data_cases() -> list[Case]:
    x, y = data()
    loaders: dict[str, Any] = {
        f"{name} at {where}": (with_bad(x, where, bad), y)
        for name, bad in (("nan", NAN), ("inf", INF), ("-inf", -INF))
        for where in (0, 517, x.numel() - 1)
    }
    dataset = torch.utils.data.TensorDataset(with_bad(x, 3, NAN), y)
    loaders |= {
        "y shorter": (x, y[:150]),
        "x empty": (x[:0], y[:0]),
        "x 3-d": (x.view(200, 5, 1), y),
        "x integer": (x.long(), y),
        "x 6 features": (torch.randn(200, 6), y),
        "list of lists": [[1.0] * 5] * 10,
        "None": None,
        "string": "data.csv",
        "Subset with nan": torch.utils.data.Subset(dataset, range(200)),
        "DataLoader with nan": torch.utils.data.DataLoader(dataset, batch_size=50),
        "DataLoader of 3 at batch 50": torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x[:3], y[:3]), batch_size=2
        ),
        "complex x": (x.to(torch.complex64), y),
        "half x": (x.half(), y),
    }

    def case(method: str, label: str, loader: Any) -> Callable[[], str]:
        def run() -> str:
            engine, model, optimizer, wrapped = private(method, data_loader=loader)
            outcome = train_epoch(engine, model, optimizer, wrapped, steps=len(wrapped))
            # A lazily read dataset is checked batch by batch: accepted while its drawn batches are finite.
            return outcome if label in LAZY else "silent"

        return run

    return [(f"data {m} {label}", case(m, label, d)) for m in ("dp-sgd", "dp-dfa") for label, d in loaders.items()]


def misuse_cases() -> list[Case]:
    """Batches other than the loader's, and engine calls out of order: each must be refused."""
    from trainers.api import PrivacyEngine

    x, y = data()

    def step_on(method: str, batch: Callable[[tuple[torch.Tensor, torch.Tensor]], tuple[torch.Tensor, ...]]):
        def run() -> str:
            _, model, optimizer, loader = private(method)
            xb, yb = batch(next(iter(loader)))
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            return "silent"

        return run

    def twice(method: str) -> Callable[[], str]:
        def run() -> str:
            _, model, optimizer, loader = private(method)
            xb, yb = next(iter(loader))
            for _ in range(2):
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
            return "silent"

        return run

    def nan_weights(method: str) -> Callable[[], str]:
        def run() -> str:
            engine, model, optimizer, loader = private(method)
            with torch.no_grad():
                model[0].weight.fill_(NAN)
            return train_epoch(engine, model, optimizer, loader)

        return run

    cases: list[Case] = []
    for m in ("dp-sgd", "dp-dfa"):
        cases += [
            (f"misuse {m} whole dataset", step_on(m, lambda b: (x, y))),
            (f"misuse {m} another batch", step_on(m, lambda b: (b[0] + 1, b[1]))),
            (f"misuse {m} half the batch", step_on(m, lambda b: (b[0][:10], b[1][:10]))),
            (f"misuse {m} two steps on one batch", twice(m)),
            (f"misuse {m} nan weights", nan_weights(m)),
        ]
    refused = {
        "state_dict before make_private": lambda: PrivacyEngine().state_dict(),
        "load_state_dict before make_private": lambda: PrivacyEngine().load_state_dict({}),
        "load_state_dict garbage": lambda: private()[0].load_state_dict("garbage"),
        "get_epsilon before make_private": lambda: PrivacyEngine().get_epsilon(1e-5),
        "accountant 'x'": lambda: PrivacyEngine("x"),
        "accountant None": lambda: PrivacyEngine(None),  # type: ignore[arg-type]
        "step without backward": lambda: private()[2].step(),
        "module is a list": lambda: private(model=[nn.Linear(5, 3)]),  # type: ignore[arg-type]
        "no Linear layer": lambda: private(model=nn.Sequential(nn.Tanh())),
    }
    cases += [(f"engine {label}", (lambda f=f: (f(), "silent")[1])) for label, f in refused.items()]
    cases += [(f"engine get_epsilon({d!r})", epsilon_case(d)) for d in (NAN, 0, 1, 2, -1, "x", None, 1e-300, 1e-5)]
    for key, value in [("target_epsilon", NAN), ("target_epsilon", -1), ("target_delta", 0), ("epochs", 0)]:
        cases.append((f"make_private_with_epsilon {key}={value!r}", with_epsilon_case(key, value)))
    cases += [(f"make_private_with_epsilon epochs={v!r}", with_epsilon_case("epochs", v)) for v in (2.5, NAN, -1)]
    return cases


def epsilon_case(delta: Any) -> Callable[[], str]:
    """``get_epsilon(delta)`` after one step: a delta in (0, 1) gives a finite epsilon, any other is refused."""

    def run() -> str:
        engine, model, optimizer, loader = private()
        train_epoch(engine, model, optimizer, loader, steps=1)
        epsilon = engine.get_epsilon(delta)
        valid = VALID["target_delta"](delta)
        return "accepted" if valid and math.isfinite(epsilon) else "silent"

    return run


def with_epsilon_case(key: str, value: Any) -> Callable[[], str]:
    from trainers.api import PrivacyEngine

    def run() -> str:
        model = tiny()
        args: dict[str, Any] = dict(target_epsilon=3.0, target_delta=1e-5, epochs=1, max_grad_norm=1.0)
        PrivacyEngine().make_private_with_epsilon(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=data(),
            batch_size=50,
            **{**args, key: value},
        )
        return "silent"

    return run


def all_cases(folder: Path) -> list[Case]:
    return (
        argument_cases() + data_cases() + misuse_cases() + attach_cases() + calibrate_cases(folder) + plan_cases(folder)
    )


def run_corpus(folder: Path) -> dict[str, str]:
    return {label: classify(case) for label, case in all_cases(folder)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "results/fuzz/api_corpus.json"))
    args = parser.parse_args()
    outcomes = run_corpus(Path(tempfile.mkdtemp(prefix="opu-hal-api-fuzz-")))
    for label, outcome in outcomes.items():
        if outcome.startswith(("traceback", "hang", "silent")):
            print(f"{outcome:>12}  {label}", flush=True)
    counts = Counter(o.split(":")[0] for o in outcomes.values())
    summary = {"inputs": len(outcomes), **{k: counts.get(k, 0) for k in ("clear", "accepted", "traceback", "silent")}}
    print(json.dumps(summary))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "outcomes": outcomes}, indent=1) + "\n")
    return 0 if summary["traceback"] == summary["silent"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
