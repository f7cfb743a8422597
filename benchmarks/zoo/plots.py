"""Stage "report", the pictures: result rows -> PNG bar charts (matplotlib, headless).

Input: the latest row per (model, mode, compiler) of one results file. Output: PNG files:
speedup over eager per model (framejit next to torch.compile, log scale, 1x marked), cold
compile time per model (log scale) and outcomes per compiler (stacked statuses).
matplotlib is a benchmarks-only dependency, imported here and nowhere in the product.
"""
from __future__ import annotations

from pathlib import Path

COLORS = {"framejit": "#1f77b4", "framejit-eager": "#9ecae1", "torch.compile": "#ff7f0e",
          "torch.compile-eager": "#fdd0a2", "eager": "#7f7f7f"}
STATUS_COLORS = {"pass": "#2ca02c", "eager_fallback": "#bcbd22", "fail_accuracy": "#d62728",
                 "error": "#9467bd", "crash": "#8c564b", "timeout": "#e377c2"}

STATUS_LABELS = {"eager_fallback": "no graph", "fail_accuracy": "inaccurate"}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    return pyplot


def grouped_bars(path: Path, title: str, ylabel: str, models: list[str],
                 series: dict[str, list], log: bool = True, reference: float = None,
                 unit: str = "") -> Path:
    """One group of bars per model, one bar per series with any value (None: no bar), y
    ticks labelled with `unit`; saved to `path`."""
    pyplot = _pyplot()
    from matplotlib.ticker import FuncFormatter
    series = {name: values for name, values in series.items()
              if any(value is not None and value > 0 for value in values)}
    figure, axes = pyplot.subplots(figsize=(max(6.0, 0.55 * len(models) + 2), 4.2), dpi=110)
    count = max(1, len(series))
    width = 0.8 / count
    for index, (name, values) in enumerate(series.items()):
        positions = [slot + (index - (count - 1) / 2) * width for slot in range(len(models))]
        heights = [value if value is not None and value > 0 else 0 for value in values]
        axes.bar(positions, heights, width, label=name, color=COLORS.get(name))
    if reference is not None:
        axes.axhline(reference, color="black", linewidth=0.8, linestyle="--")
    if log and series:
        axes.set_yscale("log")
        positive = [value for values in series.values() for value in values
                    if value is not None and value > 0] + ([reference] if reference else [])
        narrow = max(positive) / min(positive) < 10  # under a decade: label every minor tick
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}{unit}"))
        axes.yaxis.set_minor_formatter(FuncFormatter(
            lambda value, _: f"{value:g}{unit}" if narrow or f"{value:.0e}"[0] in "25" else ""))
        axes.tick_params(axis="y", which="minor", labelsize=7)
    axes.set_xticks(range(len(models)))
    axes.set_xticklabels(models, rotation=60, ha="right", fontsize=8)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3, which="both")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)
    return path


def outcome_bars(path: Path, title: str, counts: dict[str, dict[str, int]]) -> Path:
    """Stacked horizontal bars: for each compiler, how many jobs ended in each status."""
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(figsize=(7, 0.5 * len(counts) + 1.6), dpi=110)
    names = list(counts)
    left = [0] * len(names)
    for status, color in STATUS_COLORS.items():
        widths = [counts[name].get(status, 0) for name in names]
        if any(widths):
            axes.barh(names, widths, left=left, color=color,
                      label=STATUS_LABELS.get(status, status))
            left = [a + b for a, b in zip(left, widths)]
    axes.set_xlabel("jobs")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8, ncol=3, loc="lower right")
    axes.invert_yaxis()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)
    return path
