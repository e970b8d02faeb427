"""Where and with what the process computes: torch device choice, host memory, output paths."""
