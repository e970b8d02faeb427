"""Randomness: the secure generator behind all privacy noise (:mod:`.secure_random`), and the
reproducible seeds and counter streams of everything that is not privacy noise."""
