"""The uncalibrated speckle device plans its pixel selection once per anchor state, not once per draw."""

from __future__ import annotations

import opu_hal
from opu_hal.backends.simulated import speckle_privacy


def test_repeated_draws_reuse_the_pixel_selection_until_the_anchor_means_change(monkeypatch):
    plans = []
    real = speckle_privacy.select_pixels
    monkeypatch.setattr(speckle_privacy, "select_pixels", lambda *a, **k: plans.append(a[1]) or real(*a, **k))
    device = opu_hal.load_device("opu-sim-dp")
    first = device.draw_privacy_counts(1000, 3e5)
    second = device.draw_privacy_counts(1000, 3e5)
    assert plans == [3e5]  # one plan for two draws at the same mean on the same anchor
    assert first.distribution.poisson_mean_lower == second.distribution.poisson_mean_lower
    device.set_options(temperature_c=device.temperature_c + 10.0)  # more dark current: new means
    device.draw_privacy_counts(1000, 3e5)
    assert plans == [3e5, 3e5]


def test_repeated_draws_reuse_the_count_means_until_the_anchor_means_change(monkeypatch):
    from opu_hal.contract.anchor_map import PixelSelection

    computed = []
    real = PixelSelection.count_means
    monkeypatch.setattr(PixelSelection, "count_means", lambda self, m, n: computed.append(n) or real(self, m, n))
    device = opu_hal.load_device("opu-sim-dp")
    device.draw_privacy_counts(1000, 3e5)
    device.draw_privacy_counts(1000, 3e5)
    assert computed == [1000]  # the same selection, means and size: computed once
    means = device.anchor_means_e()
    assert means is device.anchor_means_e() and not means.flags.writeable  # one read-only array
    device.draw_privacy_counts(500, 3e5)
    assert computed == [1000, 500]
    device.set_options(temperature_c=device.temperature_c + 10.0)  # more dark current: new means
    device.draw_privacy_counts(500, 3e5)
    assert computed == [1000, 500, 500] and device.anchor_means_e() is not means
