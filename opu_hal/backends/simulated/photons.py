"""Photons and photo-electrons per camera pixel from optical power, exposure and wavelength."""

from __future__ import annotations

from .profile import SimulatedProfile

PLANCK_J_S = 6.62607015e-34
LIGHT_SPEED_M_S = 299_792_458.0


def photons_per_pixel(power_uw: float, profile: SimulatedProfile, exposure_us: float) -> float:
    """Mean photons per pixel per exposure for ``power_uw`` spread over the sensor."""
    photon_energy_j = PLANCK_J_S * LIGHT_SPEED_M_S / (profile.wavelength_nm * 1e-9)
    return power_uw * 1e-6 * exposure_us * 1e-6 / photon_energy_j / profile.sensor_pixels


def electrons_per_pixel(power_uw: float, profile: SimulatedProfile, exposure_us: float) -> float:
    """Mean photo-electrons per pixel per exposure for ``power_uw`` spread over the sensor."""
    return profile.quantum_efficiency * photons_per_pixel(power_uw, profile, exposure_us)
