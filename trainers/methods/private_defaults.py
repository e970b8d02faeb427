"""The CLI and ``TrainConfig.for_method`` defaults of the private methods: settings that learn.

The earlier defaults (paper 002, section 5: Adam 1e-3, 784-128-256-10 sigmoid, batches of 128)
end at chance (10.00 %) on FashionMNIST for dp-dfa and dp-sgd alike, already at the commit that
first landed them (2885e1c: dp-dfa at epsilon 8, one epoch on the 54 000 training images): sigmoid's
derivative (at most 1/4) shrinks the DFA signal, and batches of 128 leave the noise far above the
clipped signal. tanh, batches of 1024 and Adam (3e-3; 1e-2 for dp-dfa, whose device noise needs
the larger step), with dp-dfa's tau_e 0.05 and tau_h 5 of the repository's epsilon sweep, reach at
epsilon 3 in 3 epochs: dp-dfa 78.6 % (software noise) and 71.6 % (device noise, opu-sim-dp), dp-sgd
81.5 % (docs/trainers.md, "Defaults that learn").
"""

from __future__ import annotations

from typing import Any

#: What dp-dfa and dp-sgd share: the 784-128-256-10 tanh MLP on pixels in [0, 1], Adam.
COMMON: dict[str, Any] = {
    "inputs": "unit",
    "optimizer": "adam",
    "lr": 3e-3,
    "hidden": (128, 256),
    "activation": "tanh",
    "batch_size": 1024,
}

DP_SGD_DEFAULTS: dict[str, Any] = dict(COMMON)

#: dp-dfa also clips the error to tau_e and each layer input to tau_h (paper 002, Algorithm 1), and
#: takes a larger step: its device noise (Skellam, z 1.17 against the Gaussian's 0.98 at epsilon 3
#: in 3 epochs) ended at 61 % with Adam 3e-3 and at 71.8 % with 1e-2.
DP_DFA_DEFAULTS: dict[str, Any] = {**COMMON, "lr": 1e-2, "tau_e": 0.05, "tau_h": 5.0}
