"""The Python API's hostile corpus (``scripts/fuzz/api_corpus.py``): every case is a clear error or a
correct, finite result; none is a traceback or a silent wrong result."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

FUZZ = Path(__file__).resolve().parents[1] / "scripts/fuzz"


def test_api_corpus_gives_no_traceback_and_no_silent_result(tmp_path):
    sys.path.insert(0, str(FUZZ))
    spec = importlib.util.spec_from_file_location("api_corpus", FUZZ / "api_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # hundreds of tiny models: threads only contend
    try:
        outcomes = corpus.run_corpus(tmp_path)
    finally:
        torch.set_num_threads(threads)
        sys.path.remove(str(FUZZ))
    assert len(outcomes) >= 300
    bad = {label: o for label, o in outcomes.items() if o.startswith(("traceback", "silent"))}
    assert not bad
    assert sum(o == "accepted" for o in outcomes.values()) >= 40  # valid inputs still train and plan
