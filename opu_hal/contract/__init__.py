"""The device contract: what every backend implements and every trainer relies on.

:class:`~.device.Device` (projection, privacy counts, raw frames, options, life cycle),
:class:`~.capabilities.Capabilities` (what a device accepts and returns, declared once),
:mod:`.noise` (what a projection returns), :mod:`.errors` (typed errors), :mod:`.profile_base`
(the keys of every profile) and :class:`~.backend_spec.BackendSpec` (what a plugin exports).
Nothing here imports any other part of opu_hal.
"""
