"""Calibration from recorded frames (``opu-hal calibrate --frames-dir``): EMVA 1288 descriptor folders from
``emva1288``'s own simulator agree with ``emva1288``'s results; frames exported from our simulator
recover its hidden camera; a bad folder is refused naming the file, the key and the allowed range."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration import ground_truth as gt
from opu_hal.calibration.export_frames import export_frames
from opu_hal.calibration.recorded import calibrate_frames_dir
from opu_hal.calibration.schema import read_calibration
from opu_hal.cli import main
from opu_hal.contract.errors import CalibrationError

TOLERANCE = 0.02  # issue: within 2 % of emva1288's own results


def emva_dataset(bits: int, folder):
    """An emva1288-simulated exposure-variation dataset (descriptor + TIFF files) and emva1288's results
    at the largest temporal variance (:mod:`tests.test_calibration_emva1288` explains that choice)."""
    pytest.importorskip("emva1288")
    pytest.importorskip("lxml")
    from emva1288.camera.dataset_generator import DatasetGenerator
    from emva1288.process import Data1288, LoadImageData, ParseEmvaDescriptorFile, Results1288

    from benchmarks.emva_reference import CAMERAS  # also shims np.asfarray for emva1288 on numpy 2

    generator = DatasetGenerator(
        steps=100, L=4, image_format="tiff", bit_depth=bits, width=32, height=32, outdir=str(folder), **CAMERAS[bits]
    )
    parsed = ParseEmvaDescriptorFile(generator.descriptor_path, loglevel=logging.WARNING)
    loaded = LoadImageData(parsed.images, path=generator.outdir, loglevel=logging.WARNING)
    data = Data1288(loaded.data, loglevel=logging.WARNING).data
    index = int(np.argmax(data["temporal"]["s2_y"]))
    return generator.outdir, Results1288(data, index_u_ysat=index, loglevel=logging.WARNING)


@pytest.mark.parametrize("bits", [8, 10, 12])
def test_an_emva1288_descriptor_folder_agrees_with_emva1288_within_two_percent(bits, tmp_path):
    folder, reference = emva_dataset(bits, tmp_path / "emva")
    calibration = calibrate_frames_dir(folder, temperature_c=25.0, bootstrap=100)
    dark = calibration.dark_current[0].rate_all_pixels_e_per_s
    assert dark is not None and calibration.quantum_efficiency is not None
    for name, ours, theirs in (
        ("gain", calibration.gain_e_per_dn.value, 1 / reference.K),
        ("read noise", calibration.read_noise_e.value, reference.sigma_d),
        ("dark current", dark.value, reference.u_I_mean),
        ("QE", calibration.quantum_efficiency.value, reference.QE / 100),
    ):
        assert abs(ours / theirs - 1) < TOLERANCE, (bits, name, ours, theirs)


def test_frames_exported_from_a_hidden_simulated_camera_recover_it_within_the_intervals(tmp_path):
    truth = gt.draw_camera(3, pixels=256)
    export_frames(opu_hal.load_device(truth.profile), tmp_path, (20.0, 40.0), (400.0,), (100_000.0, 1e6), frames=4)
    calibration = calibrate_frames_dir(tmp_path, bootstrap=200)
    assert calibration.device.backend == "recorded" and calibration.temperatures_c == [20.0, 40.0]
    for name, estimate in {
        "gain_e_per_dn": calibration.gain_e_per_dn,
        "read_noise_e": calibration.read_noise_e,
        "quantum_efficiency": calibration.quantum_efficiency,
        "full_well_e": calibration.saturation_e,
    }.items():
        assert estimate is not None and estimate.lower <= truth.values[name] <= estimate.upper, (name, estimate)


def test_the_cli_calibrates_a_descriptor_folder_and_writes_a_file_that_reads_back(tmp_path, capsys):
    folder, reference = emva_dataset(8, tmp_path / "emva")
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--frames-dir", str(folder), "--temperature", "30", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"] == str(out)
    calibration = read_calibration(out)
    assert calibration.temperatures_c == [30.0]
    assert calibration.gain_e_per_dn.value == pytest.approx(1 / reference.K, rel=TOLERANCE)


def test_a_descriptor_without_a_temperature_is_refused_naming_what_to_pass(tmp_path):
    folder, _ = emva_dataset(8, tmp_path / "emva")
    with pytest.raises(CalibrationError, match="states no temperature.*--temperature"):
        calibrate_frames_dir(folder)


def write_manifest(folder, text: str, frames: list[np.ndarray]) -> None:
    (folder / "d").mkdir()
    for i, frame in enumerate(frames):
        np.save(folder / "d" / f"{i}.npy", frame)
    (folder / "manifest.toml").write_text(text)


def test_a_manifest_key_out_of_range_is_refused_naming_the_file_key_and_range(tmp_path):
    write_manifest(tmp_path, 'camera = "c"\nbit_depth = 20\n', [])
    with pytest.raises(CalibrationError, match=r"(?s)manifest\.toml.*key 'bit_depth'.*less than or equal to 16"):
        calibrate_frames_dir(tmp_path)


def test_a_frame_beyond_the_bit_depth_is_refused_naming_the_file_and_range(tmp_path):
    text = 'camera = "c"\nbit_depth = 8\n[[series]]\nkind = "dark"\nexposure_us = 10.0\ntemperature_c = 20.0\nfiles = "d/*.npy"\n'
    write_manifest(tmp_path, text, [np.full(16, 3, np.uint16), np.full(16, 300, np.uint16)])
    with pytest.raises(CalibrationError, match=r"1\.npy: values 300\.\.300 DN lie outside \[0, 255\] of bit_depth 8"):
        calibrate_frames_dir(tmp_path)


def test_flat_series_without_their_exposures_dark_are_refused_naming_the_series(tmp_path):
    text = (
        'camera = "c"\nbit_depth = 8\n[[series]]\nkind = "flat"\nexposure_us = 10.0\ntemperature_c = 20.0\n'
        'power = 1.0\nfiles = "d/*.npy"\n'
    )
    write_manifest(tmp_path, text, [np.full(16, 3, np.uint8), np.full(16, 4, np.uint8)])
    with pytest.raises(CalibrationError, match=r"flat series at \[10\.0\] us, 20 C: record a dark series"):
        calibrate_frames_dir(tmp_path)
