"""One training run: config, loop, run setup and state, journal and checkpoints, result record,
public surface, noise planning for a privacy target."""
