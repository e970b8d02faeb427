"""Per-example gradients of the layers DP-SGD clips (Abadi et al. 2016), from what a forward hook
records (the layer's input ``a``) and what the backward pass leaves at its output (``g``, the
per-example loss gradient), without a second backward pass ("book-keeping", Bu et al. 2022).

Each rule gives, per trainable parameter, every example's squared gradient norm and the clipped
sum ``sum_i c_i grad_i``: :mod:`.linear` by the ghost-clipping identity on ``(n, features)``
inputs; :mod:`.linear` on sequences and convolutions (:mod:`trainers.core.conv_per_example`, which the
loop's DP-SGD and DP-DFA share) by per-example gradients formed once by a batched product and kept, or
ghost norms (Gram matrices) where those would not fit (:mod:`trainers.core.formed`); :mod:`.norms` (GroupNorm, LayerNorm, InstanceNorm) and :mod:`.embedding` in
closed form. :mod:`.rules` maps layer types to rules.
"""

from .rules import RULES, Rule, rule_for, trainable_params

__all__ = ["RULES", "Rule", "rule_for", "trainable_params"]
