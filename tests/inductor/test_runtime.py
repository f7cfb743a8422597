"""Build and run time: the on-disk cache (hits, keys, atomic files), compiler errors, the
report, logging of generated code, and fallbacks for whole graphs."""
import logging
import os

import pytest
import torch

import inductor
from inductor.runtime import build
from tests.inductor.conftest import check_same, compile_function


def _libraries(directory) -> set:
    found = set()
    for root, _dirs, files in os.walk(os.path.join(directory, "cpp")):
        found |= {os.path.join(root, name) for name in files if name.endswith(".so")}
    return found


@pytest.fixture
def private_cache(tmp_path):
    saved = inductor.config.snapshot()
    inductor.config.cache_dir = str(tmp_path)
    build._loaded.clear()
    yield tmp_path
    inductor.config.update(**saved)


def test_second_compile_hits_the_disk_cache(private_cache, monkeypatch):
    def function(x):
        return (x * 3).cos().sum(0)
    x = torch.randn(33, 17)
    compile_function(function, x)
    first = _libraries(private_cache)
    assert first, "nothing was built"
    build._loaded.clear()  # a new process would start with nothing loaded

    def refuse(*_arguments, **_keywords):
        raise AssertionError("the compiler ran although the cache holds the library")
    monkeypatch.setattr(build, "_start_build", refuse)
    compiled = compile_function(function, x)
    torch.testing.assert_close(compiled(x), function(x))
    assert _libraries(private_cache) == first


def test_cache_key_covers_source_flags_and_compiler(monkeypatch):
    source = "int f() { return 1; }"
    saved = inductor.config.snapshot()
    try:
        key = build.cache_key(source)
        assert build.cache_key(source + " ") != key
        inductor.config.cxx_flags = inductor.config.cxx_flags + " -O2"
        assert build.cache_key(source) != key
    finally:
        inductor.config.update(**saved)
    assert build.cache_key(source) == key
    monkeypatch.setattr(build, "compiler_version", lambda cxx: "g++ (other) 99.0")
    assert build.cache_key(source) != key


def test_no_temporary_files_are_left_behind(private_cache):
    compile_function(lambda x: x.exp() + 1, torch.randn(5))
    leftovers = [name for root, dirs, files in os.walk(private_cache)
                 for name in dirs + files if name.startswith("build-")]
    assert leftovers == []


def test_compiler_errors_name_the_kept_source(private_cache):
    class Unit:
        source = "this is not C++"
        entries = [("jit_entry_0", 0)]
    with pytest.raises(build.BuildError, match="source kept at") as info:
        build.build([Unit()])
    kept = str(info.value).split("source kept at ")[1].split(")")[0]
    assert os.path.exists(kept)


@pytest.mark.expect_fallback("error", reason="a simulated build failure")
def test_compiler_failure_falls_back_to_eager_when_allowed(private_cache, monkeypatch):
    def broken(*_arguments, **_keywords):
        raise build.BuildError("simulated")
    monkeypatch.setattr(build, "build", broken)
    saved = inductor.config.snapshot()
    inductor.config.fallback_on_error = True
    try:
        compiled = check_same(lambda x: x.sin() * 2, torch.randn(4))
    finally:
        inductor.config.update(**saved)
    assert "simulated" in compiled.report.reason
    assert compiled.kernel_count == 0


def test_fallback_only_runs_every_op_eagerly(private_cache):
    saved = inductor.config.snapshot()
    inductor.config.fallback_only = True
    try:
        compiled = check_same(lambda x: (x * 2).softmax(-1), torch.randn(3, 4))
    finally:
        inductor.config.update(**saved)
    assert compiled.kernel_count == 0 and compiled.report.reason
    assert "aten.mul" in compiled.fallback_ops


def test_forced_fallback_op_still_fuses_around_it(private_cache):
    saved = inductor.config.snapshot()
    inductor.config.fallback_ops = "aten.exp"
    try:
        compiled = check_same(lambda x: ((x * 2 + 1).exp() - 3).relu(), torch.randn(6, 7))
    finally:
        inductor.config.update(**saved)
    assert compiled.fallback_ops == {"aten.exp": 1}
    assert compiled.kernel_count == 2  # (x*2+1) before the eager exp, (-3, relu) after


def test_output_code_is_logged(private_cache, caplog):
    with caplog.at_level(logging.DEBUG, logger="framejit.output_code"):
        compile_function(lambda x: x.tanh() * 5, torch.randn(8))
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "def call(" in text and "tanhf" in text   # jit_vml_tanhf_block(...)


def test_report_summary_names_kernels_library_calls_and_fallbacks(private_cache):
    def function(x, w):
        return torch.i0(torch.relu(x @ w))     # i0: an eager fallback (cumsum has a lowering)
    compiled = compile_function(function, torch.randn(4, 5), torch.randn(5, 6))
    summary = compiled.report.summary()
    assert "1 kernel(s)" in summary and "aten.mm x1" in summary and "aten.i0 x1" in summary
    assert compiled.report.compile_seconds > 0
    assert "def call(" in compiled.report.source


@pytest.mark.expect_fallback("unsupported", reason="meta tensors have no code generator")
def test_non_cpu_inputs_run_through_eager_kernels():
    meta = torch.empty(3, device="meta")
    compiled = inductor.compile_aten(torch.fx.symbolic_trace(lambda x: x + 1), [meta])
    assert compiled.kernel_count == 0 and "meta" in compiled.report.reason


def test_threads_setting_reaches_the_kernels(private_cache):
    saved = inductor.config.snapshot()
    inductor.config.threads = 3
    inductor.config.parallel_threshold = 1
    try:
        compiled = check_same(lambda x: x * 2 + 1, torch.randn(1000))
    finally:
        inductor.config.update(**saved)
    assert "num_threads(3)" in compiled.report.source


def test_unpinned_kernels_follow_torch_set_num_threads(private_cache):
    """Without `threads`, teams take the OpenMP maximum at run time (torch's setting)."""
    saved = inductor.config.snapshot()
    inductor.config.threads = 0
    inductor.config.parallel_threshold = 1
    previous = torch.get_num_threads()
    try:
        compiled = compile_function(lambda x: x.sum(), torch.randn(100000))
        assert "num_threads(jit_teams)" in compiled.report.source
        assert "jit_teams = omp_get_max_threads()" in compiled.report.source
        torch.set_num_threads(1)
        x = torch.randn(100000, dtype=torch.float64).float()
        torch.testing.assert_close(compiled(x), x.sum(), atol=1e-3, rtol=1e-5)
    finally:
        torch.set_num_threads(previous)
        inductor.config.update(**saved)
