"""Training methods (DFA family and the private trainers) built on the opu_hal device contract."""
