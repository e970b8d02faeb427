"""Picking a tuned run on the validation split (issue 19's searches)."""

from __future__ import annotations

from trainers.cli.best_by_validation import best_by_validation, markdown


def _record(val: float, test: float, **hyper: object) -> dict:
    hyperparameters = {"target_epsilon": 3.0, "hidden": [16, 32], "conv_strides": [], "head_hidden": [], **hyper}
    return {
        "method": "dp-sgd",
        "hyperparameters": hyperparameters,
        "final": {"validation_accuracy": val, "test_accuracy": test, "epsilon": 3.0},
    }


def test_the_pick_reads_validation_accuracy_never_test_accuracy():
    runs = [_record(0.88, 0.90, lr=1e-3), _record(0.89, 0.87, lr=2e-3)]
    assert [r["hyperparameters"]["lr"] for r in best_by_validation(runs)] == [2e-3]


def test_the_table_names_cnn_strides_and_head_only_when_set():
    plain, strided = _record(0.8, 0.8), _record(0.8, 0.8, conv_strides=[2, 1], head_hidden=[32])
    assert "conv_strides" not in markdown([plain], {("dp-sgd", 3.0): 1})
    assert "conv_strides [2, 1], head_hidden [32]" in markdown([strided], {("dp-sgd", 3.0): 1})


def test_equal_validation_accuracies_go_to_the_lower_validation_loss_whatever_the_order():
    worse, better = _record(0.985, 0.99, lr=8.0), _record(0.985, 0.98, lr=4.0)
    worse["epochs"], better["epochs"] = [{"validation_loss": 0.086}], [{"validation_loss": 0.081}]
    for runs in ([worse, better], [better, worse]):
        assert [r["hyperparameters"]["lr"] for r in best_by_validation(runs)] == [4.0]
