"""The zoo builds real models; the runner writes valid rows, resumes, and records failures."""
import json

import pytest
import torch

from benchmarks.zoo import catalog, runner
from benchmarks.zoo.worker import Job, row_key, run_job

pytest.importorskip("torchvision")
pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["squeezenet1_1", "bert", "whisper",
                                  "lraspp_mobilenet_v3_large"])
def test_zoo_builds_a_model_that_runs_and_trains(name):
    workload = catalog.build_workload(name, batch=2, training=True)
    assert workload.model.training
    output = workload.model(*workload.args, **workload.kwargs)
    loss = workload.loss(output, workload.targets)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert any(p.grad is not None for p in workload.model.parameters())
    evaluation = catalog.build_workload(name, batch=2, dtype=torch.bfloat16)
    assert not evaluation.model.training
    assert next(evaluation.model.parameters()).dtype == torch.bfloat16


def test_the_detection_entry_takes_images_of_different_sizes():
    workload = catalog.build_workload("fasterrcnn_mobilenet_v3_large_320_fpn", batch=3)
    [images] = workload.args
    assert len({tuple(image.shape) for image in images}) == 3
    with torch.no_grad():
        detections = workload.model(images)
    assert len(detections) == 3 and {"boxes", "labels", "scores"} <= set(detections[0])
    with pytest.raises(ValueError, match="inference only"):
        catalog.build_workload("fasterrcnn_mobilenet_v3_large_320_fpn", training=True)


def test_every_suite_names_registered_models():
    for suite in catalog.SUITES:
        pairs = catalog.suite(suite)
        assert pairs and all(catalog.spec(model) and mode in ("inference", "training")
                             for model, mode in pairs)
    # 13 torchvision classifiers, a segmentation and a detection model, 14 small transformers
    # configs (deberta-v2 joined in f1d48b9, whisper with the other two)
    assert len([m for m, mode in catalog.suite("cpu") if mode == "inference"]) == 29
    assert {"deberta-v2", "mistral", "bart"} <= {m for m, _ in catalog.suite("gpu")}
    complete = catalog.suite("gpu-zoo")
    assert {m for m, mode in complete if mode == "inference"} == set(catalog.names())
    assert ("fasterrcnn_mobilenet_v3_large_320_fpn", "training") not in complete
    assert ("whisper", "training") in complete and ("t5-small", "training") in complete


def test_runner_writes_a_valid_eager_row_in_a_subprocess(tmp_path):
    output = tmp_path / "rows.jsonl"
    job = Job("squeezenet1_1", trials=2, warmup=0, trial_seconds=0.01, threads=1)
    outcome = runner.run_jobs([job], output, timeout=240, progress=lambda line: None)
    assert outcome.written == 1 and outcome.left == 0
    [row] = [json.loads(line) for line in output.read_text().splitlines()]
    assert row["status"] == "pass", row.get("error")
    assert row_key(row) == job.key()
    assert row["accuracy"]["passed"] and row["accuracy"]["cosine"] > 0.999
    assert row["eager_ms"] > 0 and row["speedup"] == 1.0 and len(row["eager_trials_ms"]) == 2
    assert row["env"]["torch"] == torch.__version__
    assert row["wall_seconds"] > 0
    # Resuming: the same job is skipped; a retried status runs again.
    assert runner.run_jobs([job], output, timeout=240, progress=lambda line: None).skipped == 1
    assert runner.pending([job], output, retry=["pass"])[0] == [job]


def test_a_timeout_is_a_row_not_a_crash(tmp_path):
    row = runner.run_one(Job("resnet50", trials=1, warmup=0), timeout=0.5)
    assert row["status"] == "timeout" and row["error"].startswith("no result within")
    assert row["model"] == "resnet50"


def test_a_failing_model_is_an_error_row():
    row = run_job(Job("no-such-model", trials=1))
    assert row["status"] == "error" and "no-such-model" in row["error"]
    assert row["step"] == "build" and row["env"]["python"]


def test_jobs_start_with_empty_kernel_caches_and_shared_native_libraries(tmp_path, monkeypatch):
    """Both compilers' kernel caches are fresh per job (cold compile times): framejit's
    JIT_CACHE_DIR lies in the job's scratch folder; only the native libraries, built once
    per torch version like an installed extension, are shared."""
    monkeypatch.setenv("JIT_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.delenv("JIT_NATIVE_CACHE_DIR", raising=False)
    job = Job(model="resnet18", mode="inference", compiler="framejit")
    environment = runner._environment(job, tmp_path / "scratch")
    for name in ("JIT_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert environment[name].startswith(str(tmp_path / "scratch")), name
    assert environment["JIT_NATIVE_CACHE_DIR"] == str(tmp_path / "user-cache")


@pytest.mark.parametrize("suite", ["gpu", "gpu-zoo"])
def test_gpu_suites_run_on_cuda_in_bfloat16(suite):
    """A GPU suite's jobs default to CUDA, bf16, batch 16 (gpu-zoo once ran on the CPU)."""
    from benchmarks.zoo.__main__ import _apply_defaults, _parser, build_jobs
    options = _parser().parse_args(["run", "--suite", suite, "--models", "resnet50"])
    _apply_defaults(options)
    jobs = build_jobs(options)
    assert jobs and all(job.device == "cuda" and job.batch == 16 for job in jobs)
    assert all(job.dtype == "bfloat16" for job in jobs if job.mode == "inference")
    assert all(job.amp == "bfloat16" for job in jobs if job.mode == "training")
    assert options.output.name == "gpu.jsonl"


def test_a_model_that_cannot_be_cast_runs_under_autocast_on_the_gpu():
    """The detection model's nms has no bfloat16 kernel (both compilers and eager failed on
    the H200 when the model was cast): GPU suites keep its weights in float32 under autocast;
    the CPU suite runs it in float32 without autocast."""
    from benchmarks.zoo.__main__ import _apply_defaults, _parser, build_jobs
    name = "fasterrcnn_mobilenet_v3_large_320_fpn"
    for suite, dtype, amp in (("gpu-zoo", "float32", "bfloat16"), ("cpu", "float32", None)):
        options = _parser().parse_args(["run", "--suite", suite, "--models", name])
        _apply_defaults(options)
        jobs = build_jobs(options)
        assert jobs and all((job.dtype, job.amp) == (dtype, amp) for job in jobs), suite
