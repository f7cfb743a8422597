"""The zoo report renders tables and plots from a results file and keeps text outside its
markers."""
import json

import pytest

from benchmarks.zoo import report

pytest.importorskip("matplotlib")

ENV = {"cpu": "Test CPU", "cpu_cores": 2, "memory_gib": 4.0, "python": "3.11.7",
       "torch": "2.14.1", "triton": "3.8.0", "torchvision": "0.29.1",
       "transformers": "5.23.0", "framejit_commit": "abc1234", "torch_threads": 1}


def _row(model, compiler, status="pass", speedup=1.5, mode="inference", **extra):
    row = {"model": model, "mode": mode, "compiler": compiler, "device": "cpu",
           "dtype": "float32", "amp": None, "batch": 1, "compile_mode": None, "threads": 1,
           "status": status, "speedup": speedup, "eager_ms": 10.0, "compile_seconds": 2.0,
           "graphs": 1, "graph_breaks": 0, "peak_mb": 5.0, "eager_peak_mb": 6.0,
           "date": "2026-11-22T20:00:00+0000", "env": ENV, "note": "shared machine"}
    row.update(extra)
    return row


@pytest.fixture
def results(tmp_path):
    rows = [
        _row("resnet18", "eager", speedup=1.0, compile_seconds=None),
        _row("resnet18", "framejit", status="eager_fallback", speedup=1.01, graphs=0,
             fallbacks=["framejit: internal error while compiling forward"]),
        _row("resnet18", "torch.compile", speedup=1.7, compile_seconds=30.0,
             eager_trials_ms=[20.0, 10.0, 40.0], compiled_trials_ms=[10.0, 5.0, 10.0]),
        _row("bert", "framejit", status="error", speedup=None, error="RuntimeError: boom",
             step="compile"),
        _row("bert", "torch.compile", status="timeout", speedup=None, error="no result"),
        _row("bert", "torch.compile", speedup=1.25),  # a retry: the latest row wins
        _row("resnet18", "framejit", mode="training", speedup=0.9),
    ]
    path = tmp_path / "results" / "cpu.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_report_renders_tables_plots_and_failures(results, tmp_path):
    # resnet18/torch.compile's speedup comes from its trials: median of 2, 2, 4 is 2.00x.
    document = tmp_path / "docs" / "benchmarks.md"
    document.parent.mkdir()
    document.write_text("# Kernels\n\nkept above\n")
    text = report.write([results], document)
    assert text.startswith("# Kernels\n\nkept above\n")
    assert "Test CPU" in text and "torch 2.14.1" in text and "shared machine" in text
    assert "| resnet18 | 10.0 | 1.01x no graph | 2.00x | - / - | 2.00 / 30.0 |" in text
    assert "| bert | 10.0 | error | 1.25x | - / - |" in text
    assert "- bert / framejit: error - compile: RuntimeError: boom" in text
    assert "timeout" not in text.split("#### Training")[0].split("Jobs that did not pass")[1]
    assert "| torch.compile | 2 | 2 | 0 | 0 | 0 | 100% | 1.58x (2) | 16.0 |" in text
    assert "#### Training" in text
    assert "### CUDA\n\nNo results yet" in text and "### CPU\n\nNo results" not in text
    for name in ("inference-speedup", "inference-compile", "inference-outcomes",
                 "training-speedup"):
        image = results.parent / f"cpu-{name}.png"
        assert image.stat().st_size > 1000
        assert f"../results/cpu-{name}.png" in text
    # Rendering again replaces the zoo section instead of appending a second one.
    again = report.write([results], document)
    assert again.count(report.ZOO_BEGIN) == 1 and again == text


def test_report_shows_inductor_fallbacks(tmp_path):
    rows = [_row("gpt2", "eager", speedup=1.0, compile_seconds=None),
            _row("gpt2", "framejit", speedup=1.4, inductor_fallbacks=2,
                 inductor_fallback_reasons={"error: compilation failed: TypeError: x": 2})]
    path = tmp_path / "results" / "cpu.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    document = tmp_path / "benchmarks.md"
    text = report.write([path], document)
    assert "| gpt2 | 10.0 | 1.40x (2 fallbacks) |" in text
    assert "- gpt2 / framejit: 2 graph(s): 2 x error: compilation failed: TypeError: x" in text


@pytest.mark.expect_fallback("error", reason="records a planted fallback")
def test_worker_counts_inductor_fallbacks(monkeypatch):
    """A framejit job's row carries the graphs inductor gave up during that job."""
    from benchmarks.zoo import worker
    from inductor.runtime import fallbacks

    def measure(run):
        fallbacks.record("error", "compilation failed: TypeError: planted")
        run.row["status"] = "pass"
    monkeypatch.setattr(worker, "_measure", measure)
    row = worker.run_job(worker.Job("planted", compiler="framejit"))
    assert row["inductor_fallbacks"] == 1
    assert row["inductor_fallback_reasons"] == {
        "error: compilation failed: TypeError: planted": 1}
    assert "inductor_fallbacks" not in worker.run_job(worker.Job("planted", compiler="eager"))
