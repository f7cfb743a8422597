"""guards/environment: typed settings from the environment (bool, int, float, str, path,
choice), one boolean parser, errors naming the variable or the option, and the product's
settings declared through it with their names, defaults and variables unchanged."""
import ast
import dataclasses
import os
import pathlib

import pytest

from guards import environment
from guards.environment import SettingError, Settings, setting


@dataclasses.dataclass
class Sample(Settings):
    OWNER = "sample.config"

    flag: bool = False
    count: int = 3
    ratio: float = 0.5
    name: str = "x"
    folder: str = setting("/tmp", kind="path")
    backend: str = setting("cpp", choices=("cpp", "triton"))
    compiler: str = setting("g++", env=("JIT_SAMPLE_CXX", "CXX"))


@pytest.mark.parametrize("text, value", [("1", True), ("true", True), (" Yes ", True),
                                         ("ON", True), ("0", False), ("false", False),
                                         ("No", False), (" off", False)])
def test_one_boolean_parser(text, value):
    assert environment.parse_bool(text) is value


def test_every_kind_parses_from_the_environment():
    environ = {"JIT_FLAG": "yes", "JIT_COUNT": "12", "JIT_RATIO": "0.25", "JIT_NAME": "y",
               "JIT_FOLDER": "~/cache", "JIT_BACKEND": "triton", "CXX": "clang++"}
    sample = Sample.from_environment(environ)
    assert (sample.flag, sample.count, sample.ratio, sample.name, sample.backend) == \
        (True, 12, 0.25, "y", "triton")
    assert sample.folder == os.path.join(os.path.expanduser("~"), "cache")
    assert sample.compiler == "clang++"


def test_defaults_without_variables_and_empty_values_count_as_unset():
    assert Sample.from_environment({}) == Sample()
    assert Sample.from_environment({"JIT_FLAG": "", "JIT_COUNT": "  "}) == Sample()


def test_the_first_variable_set_wins():
    both = {"JIT_SAMPLE_CXX": "g++-13", "CXX": "clang++"}
    assert Sample.from_environment(both).compiler == "g++-13"
    assert Sample.from_environment({"JIT_SAMPLE_CXX": "", "CXX": "clang++"}).compiler == \
        "clang++"


@pytest.mark.parametrize("variable, text, expected", [
    ("JIT_FLAG", "maybe", "a boolean"), ("JIT_COUNT", "many", "an integer"),
    ("JIT_COUNT", "1.5", "an integer"), ("JIT_RATIO", "half", "a number"),
    ("JIT_BACKEND", "cuda", "one of 'cpp', 'triton'")])
def test_a_bad_value_names_its_variable(variable, text, expected):
    with pytest.raises(SettingError) as raised:
        Sample.from_environment({variable: text})
    message = str(raised.value)
    assert message.startswith(f"{variable} in the environment: expected {expected}"), message
    assert message.endswith(f"got '{text}'"), message


def test_assignments_are_converted_or_name_the_option():
    sample = Sample()
    sample.flag, sample.count, sample.ratio = "on", "7", 2
    assert (sample.flag, sample.count, sample.ratio) == (True, 7, 2.0)
    sample.folder = pathlib.Path("/tmp/x")
    assert sample.folder == "/tmp/x"
    with pytest.raises(SettingError, match=r"sample.config.count: expected an integer"):
        sample.count = "many"
    with pytest.raises(ValueError, match=r"sample.config.backend: expected one of"):
        sample.backend = "cuda"
    with pytest.raises(AttributeError, match="sample.config has no option 'cuont'"):
        sample.cuont = 1
    with pytest.raises(ValueError, match="known options: backend, compiler, count"):
        sample.update(cuont=1)


def test_update_and_snapshot_round_trip():
    sample = Sample()
    saved = sample.snapshot()
    sample.update(count=9, name="z")
    assert (sample.count, sample.name) == (9, "z")
    sample.update(**saved)
    assert sample == Sample()


def test_read_parses_one_switch():
    assert environment.read("JIT_X", "bool", True, {}) is True
    assert environment.read("JIT_X", "bool", True, {"JIT_X": "0"}) is False
    assert environment.read("JIT_X", "int", 1, {"JIT_X": "4"}) == 4
    with pytest.raises(SettingError, match="JIT_X in the environment: expected a boolean"):
        environment.read("JIT_X", "bool", True, {"JIT_X": "sometimes"})


def test_a_field_of_an_unknown_kind_is_refused():
    @dataclasses.dataclass
    class Odd(Settings):
        items: list = dataclasses.field(default_factory=list)
    with pytest.raises(TypeError, match="annotate it bool, int, float or str"):
        Odd.options()


def test_product_settings_keep_their_variables_and_defaults():
    import dynamo
    import inductor
    from guards.native import build

    for config in (dynamo.config, inductor.config):
        options = type(config).options()
        assert all(option.variables == ("JIT_" + name.upper(),)
                   for name, option in options.items())
        assert type(config)() == type(config).from_environment({})
    assert type(dynamo.config)().recompile_limit == 8
    assert type(inductor.config).options()["cpu_backend"].choices == ("cpp", "triton")
    variables = {name: option.variables for name, option in build.NativeSettings.options().items()}
    assert variables == {"native_cache_dir": ("JIT_NATIVE_CACHE_DIR",),
                         "cache_dir": ("JIT_CACHE_DIR",), "cxx": ("JIT_CXX", "CXX")}


ALLOWED = {"guards/environment.py",                   # the one parser
           "inductor/runtime/triton_interpret.py",    # sets TRITON_INTERPRET for a launch
           "inductor/runtime/triton_build.py"}        # sets TRITON_CACHE_DIR for Triton


def test_only_the_environment_module_reads_the_environment():
    root = pathlib.Path(environment.__file__).parent.parent
    readers = []
    for package in ("dynamo", "guards", "inductor"):
        for path in (root / package).rglob("*.py"):
            relative = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                        isinstance(node.value, ast.Name) and node.value.id == "os" and \
                        relative not in ALLOWED:
                    readers.append(f"{relative}:{node.lineno}")
    assert readers == []
