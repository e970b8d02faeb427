"""Camera physics shared by the simulated backend and calibration (:mod:`.physics`)."""
