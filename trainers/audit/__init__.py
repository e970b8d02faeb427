"""Empirical lower bounds on epsilon: the one-run audit of Steinke, Nasr and Jagielski, "Privacy
Auditing with One (1) Training Run" (NeurIPS 2023), white-box, for every method whose noisy
release is one call ``method.release_update(u)`` on the flattened update ``u`` whose claimed L2
sensitivity is ``method.sensitivity`` (dp-dfa with software or device noise, dp-sgd); a Gaussian-DP
estimate after Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini and Terzis, "Tight Auditing of
Differentially Private Machine Learning" (USENIX Security 2023); and a black-box audit.

**Bound** (Steinke et al. 2023, Theorem 3.3 with the delta term of Appendix D). ``m`` canaries each
get a secret fair coin; the auditor guesses ``r`` of the coins and gets ``v`` right. If the training
run is (epsilon, delta)-DP in each canary, then

    P[v' >= v] <= P[Binomial(r, e^eps / (1 + e^eps)) >= v]
                  + 2 m delta max_{i = 1..v} P[v > Binomial(r, e^eps / (1 + e^eps)) >= v - i] / i,

so the largest epsilon whose p-value is below ``1 - confidence`` is a lower bound on the run's true
epsilon at that confidence (:func:`epsilon_lower_bound`), with no assumption on the mechanism. Every
(score kind, guess count) pair tried shares the confidence by a Bonferroni split. With ``m``
canaries this bound is capped (about 5 for 1,000), so the audit also reports
:func:`gdp_epsilon_estimate` (Nasr et al. 2023), whose ceiling grows with the canaries but which
ASSUMES the run's trade-off curve is Gaussian.

**Sensitivity, measured** (:func:`measure_sensitivity`): before training, the largest change one
example makes to the pre-noise update is measured through the method's own code (its
``compute_gradients`` with the release replaced by a capture) on adversarial neighbouring batches
(real inputs with every label, inputs scaled up so the clips bind, random inputs). The canaries are
sized from this MEASURED value, not from the claimed ``method.sensitivity``, so a clip bug makes
them larger and a sensitivity bug leaves them their true size against smaller noise; a measured
value above the claimed one is reported as a finding by itself.

**Canaries** (white-box, the threat model the DP proofs cover: an example may contribute any update
of norm up to the sensitivity): canary ``i`` owns one coordinate ``j_i`` of the flattened update.
At each step ``t`` it joins with the batch's sampling rate; when it does it adds
``s_t c_i a e_{j_i}`` before the noise, with ``c_i = +-1`` its coin, ``s_t = (-1)^t`` a public
alternating pattern and ``a`` half the measured sensitivity (the two coins' updates differ by the
measured sensitivity: neighbours under replace-one; under add/remove the pair ``{+Delta/2, -Delta/2}``
gives the auditor exactly the evidence of ``{present with +Delta, absent}``). Two scores per canary,
from what the auditor sees of the release ``r_t``: ``sum`` = ``sum_t s_t r_t[j_i]`` (the matched
filter for fresh Gaussian noise) and ``difference`` = ``sum_{t >= 1} s_t (r_t - r_{t-1})[j_i]``, in
which noise repeated from step to step cancels while the canary's ``2 s_t c_i a`` adds up.

**What the auditor knows.** At sampling rate 1 the batch is the whole training set, so the rest
of the update ``u_t`` (a function of the data and of the model, which the earlier releases
determine) is known to the white-box adversary of the DP definition, and the scores are taken on
``r_t - u_t``: the canary plus the noise. Below rate 1 ``u_t`` depends on the secret batch and is not
subtracted.

**Canary modes.** The one-run audit's default, ``pipeline`` (:mod:`.pipeline`), makes each canary
one ROW of the training set (add/remove: present if heads, absent if tails, Steinke et al. 2023,
Algorithm 1 and Theorem 3.3; replace-one: itself or its twin), placed before sampling and centring:
the run's own sampler decides when it is in a batch (where it then contributes the Dirac above
instead of its own gradient), the run's own centring release sums its feature Dirac, and the public
size becomes ``n + m`` so the run's shape does not depend on the coins. It adds two scores: the
log-likelihood ratio under the ACCOUNTED law (:mod:`.likelihood`: the subsampled Gaussian's mixture
at every step plus the centring release's Gaussian) and the centring release's own evidence. The
``update`` mode, below, plants the canaries in the update by their own coin at the claimed rate,
after the sampler and after centring, so sampler and centring bugs cannot reach them.

**Soundness: inclusion is secret.** Every step is scored, whether or not the canary joined it
(the auditor never uses the batch inclusion, which the subsampled claim keeps secret). At sampling
rate 1 (batch size = training-set size) every canary joins every step and the claim has no
amplification; below rate 1 the canaries' inclusion is drawn independently per step at the batch's
rate (a Poisson stand-in for the without-replacement draw of a real example), a simplification
stated with every result.

Modules: :mod:`.bounds` (the statistics), :mod:`.sensitivity` (the measured sensitivity),
:mod:`.white_box` (the white-box audit, one run or many), :mod:`.dirac` (its Dirac canaries),
:mod:`.pipeline` (canaries as training rows), :mod:`.likelihood` (likelihood-ratio scores),
:mod:`.black_box` (input canaries), :mod:`.plot` (the scores' picture), :mod:`.inspector` (the
mechanism inspector: each mechanism's measured noise law, rate and sensitivity against what the
ledger charges; :mod:`.noise_probes`, :mod:`.noise_checks`, :mod:`.sampler_check`,
:mod:`.release_checks`).
"""

from __future__ import annotations

from opu_hal.runtime.lazy import lazy_exports

# Imported on first use (PEP 562), so that registering ``opu-hal audit`` loads no torch.
_EXPORTS = {
    "audit_black_box": ".black_box",
    "input_canaries": ".black_box",
    "neighboring_of": ".black_box",
    "best_lower_bound": ".bounds",
    "clopper_pearson_upper": ".bounds",
    "epsilon_lower_bound": ".bounds",
    "gdp_epsilon": ".bounds",
    "gdp_epsilon_estimate": ".bounds",
    "gdp_mu_lower_bound": ".bounds",
    "multi_run_lower_bound": ".bounds",
    "p_value": ".bounds",
    "plot_audit": ".plot",
    "measure_sensitivity": ".sensitivity",
    "white_box_methods": ".white_box",
    "DiracCanaries": ".dirac",
    "audit_multi_run": ".white_box",
    "audit_white_box": ".white_box",
    "CANARY_MODES": ".white_box",
    "PipelineCanaries": ".pipeline",
    "CanaryTrainer": ".pipeline",
    "step_llr": ".likelihood",
    "inspect": ".inspector",
    "InspectionReport": ".inspector",
    "InspectionRow": ".inspector",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
