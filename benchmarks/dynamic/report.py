"""Stage "report": the dynamic-shapes result -> issue 23's criteria, a markdown page, a plot.

Input: the JSON-ready result of one `python -m benchmarks.dynamic` run (`env`, `sweep`,
`decode`, `bert`). Output: `criteria(result)` (each done-when criterion of issue 23: met or
not, and the numbers behind it), `markdown(result)` (the criteria, then one table per
part) and `plot(result, path)` (per-call time against size, one panel per subject;
matplotlib, skipped with a notice when it is missing).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

DYNAMIC_FRAMEJIT = ("framejit-auto", "framejit-dynamic")
COLORS = {"eager": "#7f7f7f", "framejit-static": "#9ecae1", "framejit-auto": "#1f77b4",
          "framejit-dynamic": "#08306b", "torch.compile-static": "#fdd0a2",
          "torch.compile-auto": "#ff7f0e", "torch.compile-dynamic": "#a63603"}
RATIO_LIMIT = 1.10


def _measured(parts: list) -> list:
    return [part for part in parts if "skipped" not in part]


def _criterion(met: Optional[bool], detail: str) -> dict:
    return {"met": met, "detail": detail}


def code_compiles(row: dict) -> tuple[int, int]:
    """(static variants inductor compiled per size inside symbolic entries, graphs it ran
    through eager kernels): an entry counted once can still compile code per size, or give
    sizes up; either way it is not one compile serving every size."""
    per_size = sum(count for reason, count in row.get("fallbacks", {}).items()
                   if reason.startswith("per_size"))
    return per_size, sum(row.get("fallbacks", {}).values()) - per_size


def _entries(row: dict, limit: int) -> tuple[bool, str]:
    """Whether `row` compiled at most `limit` entries, none of them per size or falling back,
    and the numbers."""
    per_size, given_up = code_compiles(row)
    count = row.get("compiles")
    repeated = row.get("second_call_compiles", 0) + row.get("compiles_while_timing", 0)
    met = (count is not None and count <= limit and per_size == 0 and given_up == 0
           and repeated == 0)
    detail = f"{count}"
    if per_size or given_up:
        detail += f" (+{per_size} per-size code variants, {given_up} fallbacks)"
    if repeated:
        detail += f" (+{repeated} on repeated calls)"
    return met, detail


def _sweep_criteria(sweep: list) -> dict:
    compiles, ratio_details, matched, ratio_met = [], [], [], []
    for part in sweep:
        for name in DYNAMIC_FRAMEJIT:
            row = part["variants"].get(name)
            if row is None:
                continue
            compiles.append((f"{part['subject']} {name}", *_entries(row, 2)))
            ratio = part["ratios"].get(name, {}).get("vs_static")
            best = part["ratios"].get(name, {}).get("vs_static_best")
            if ratio:
                ratio_met.append(ratio["geomean"] <= RATIO_LIMIT)
                ratio_details.append(f"{part['subject']} {name} {ratio['geomean']:.2f} "
                                     f"(worst {ratio['worst']:.2f}"
                                     + (f"; best trials {best['geomean']:.2f})" if best else ")"))
        matched += [(f"{part['subject']} {name}", row["matched_eager"])
                    for name, row in part["variants"].items()]
    return {
        "sweep: at most 2 compiles, no per-size code (framejit dynamic=None/True)": _criterion(
            all(met for _, met, _ in compiles) if compiles else None,
            ", ".join(f"{label}: {detail}" for label, _, detail in compiles)),
        "sweep: every call matches eager": _criterion(
            all(ok for _, ok in matched) if matched else None,
            ", ".join(label for label, ok in matched if not ok)
            or ("all variants" if matched else "")),
        "sweep: dynamic per-call within 10% of static (geomean over sizes)": _criterion(
            all(ratio_met) if ratio_met else None, ", ".join(ratio_details)),
    }


def _decode_criteria(decode: list) -> dict:
    compiles, speed, matched = [], [], []
    for part in decode:
        rows = part["variants"]
        ours, theirs = rows.get("framejit-auto", {}), rows.get("torch.compile-auto", {})
        if "compiles" in ours:
            compiles.append((part["decoder"], *_entries(ours, 3), part["new_tokens"]))
        if "tokens_per_second" in ours and "tokens_per_second" in theirs:
            speed.append((part["decoder"], ours["tokens_per_second"],
                          theirs["tokens_per_second"]))
        matched += [(f"{part['decoder']} {name}", row.get("tokens_match", False))
                    for name, row in rows.items()]
    return {
        "decode: at most 3 compiles, no per-size code (framejit)": _criterion(
            all(met for _, met, _, _ in compiles) if compiles else None,
            ", ".join(f"{name}: {detail} for {tokens} tokens"
                      for name, _, detail, tokens in compiles)),
        "decode: framejit tokens/s >= torch.compile's": _criterion(
            all(ours >= theirs for _, ours, theirs in speed) if speed else None,
            ", ".join(f"{name}: {ours:.1f} vs {theirs:.1f}" for name, ours, theirs in speed)),
        "decode: token ids equal eager's": _criterion(
            all(ok for _, ok in matched) if matched else None,
            ", ".join(label for label, ok in matched if not ok)
            or ("all variants" if matched else "")),
    }


def criteria(result: dict) -> dict:
    """{criterion: {met: True/False/None (not measured), detail}}."""
    found = {}
    found.update(_sweep_criteria(_measured(result.get("sweep", []))))
    found.update(_decode_criteria(_measured(result.get("decode", []))))
    bert = result.get("bert")
    if bert and "skipped" not in bert:
        rows = bert["variants"]
        found["bert: every call matches eager"] = _criterion(
            all(row["matched_eager"] for row in rows.values()),
            ", ".join(f"{name}: {row.get('compiles')} compiles" for name, row in rows.items()))
    return found


def _ms(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _sizes_table(part: dict) -> list:
    sizes = [str(size) for size in part["sizes"]]
    shown = sorted({sizes[0], sizes[len(sizes) // 2], sizes[-1]}, key=int)
    lines = ["| variant | compiles | graphs | compile s | "
             + " | ".join(f"ms @{size}" for size in shown)
             + " | / static | / static, best trials | / eager | matches eager "
             "| fallbacks, warnings |",
             "|---|---:|---:|---:|" + "---:|" * len(shown) + "---:|---:|---:|---|---|"]
    for name, row in part["variants"].items():
        ratio = part["ratios"].get(name, {})
        static, best = ratio.get("vs_static"), ratio.get("vs_static_best")
        eager = ratio.get("vs_eager")
        notes = [f"{count}x {reason[:90]}" for reason, count in
                 list(row.get("fallbacks", {}).items()) + list(row.get("warnings", {}).items())]
        if row.get("error"):
            notes.insert(0, "error: " + row["error"][:160])
        if row.get("compiles_while_timing") or row.get("second_call_compiles"):
            notes.insert(0, f"{row.get('second_call_compiles', 0)} compiles on a second call "
                         f"of a size, {row['compiles_while_timing']} while timing")
        cells = [name, str(row.get("compiles", "-")), str(row.get("graphs", "-")),
                 f"{row['compile_seconds']:.1f}"]
        cells += [_ms(row["per_call_ms"].get(size)) for size in shown]
        cells += [f"{static['geomean']:.2f} (worst {static['worst']:.2f})" if static else "-",
                  f"{best['geomean']:.2f}" if best else "-",
                  f"{eager['geomean']:.2f}" if eager else "-",
                  "yes" if row["matched_eager"] else "**no** " + "; ".join(row["mismatches"])[:200],
                  "<br>".join(note.replace("|", "/") for note in notes) or ""]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _decode_table(part: dict) -> list:
    lines = ["| variant | compiles | cold s | tokens/s | x eager | tokens equal eager's | "
             "fallbacks, warnings |", "|---|---:|---:|---:|---:|---|---|"]
    eager = part["variants"].get("eager", {}).get("tokens_per_second")
    for name, row in part["variants"].items():
        if "error" in row:
            lines.append(f"| {name} | - | - | - | - | no | error: {row['error'][:160]} |")
            continue
        speed = row["tokens_per_second"]
        match = "yes" if row["tokens_match"] else (
            f"**no**: step {row.get('first_divergence')}, eager margin "
            f"{row.get('eager_margin_there')}")
        notes = [f"{count}x {reason[:90]}" for reason, count in
                 list(row.get("fallbacks", {}).items()) + list(row.get("warnings", {}).items())]
        if row.get("compiles_while_timing"):
            notes.insert(0, f"{row['compiles_while_timing']} compiles/fallbacks in warm runs")
        over_eager = f"{speed / eager:.2f}" if eager else "-"
        lines.append(f"| {name} | {row['compiles']} | {row['cold_seconds']:.1f} | {speed:.1f} | "
                     f"{over_eager} | {match} | "
                     + "<br>".join(note.replace("|", "/") for note in notes) + " |")
    return lines


def markdown(result: dict) -> str:
    """The run as a markdown page: environment, criteria, then one table per part."""
    env = result["env"]
    lines = [f"# Dynamic shapes, {result['device']}{' (quick)' if result['quick'] else ''}", "",
             f"`python -m benchmarks.dynamic {' '.join(result['arguments'])}` at "
             f"`{env.get('framejit_commit')}`, {result['date']}: {env.get('gpu') or env['cpu']}, "
             f"{env['torch_threads']} thread(s), torch {env['torch']}, Python {env['python']}, "
             f"transformers {env.get('transformers')}; product tree: "
             f"{result.get('product_tree', '-')}; compilers warmed up on a tiny function "
             f"first ({result.get('warm_up_seconds')} s); {result['seconds']:.0f} s in all.",
             "",
             "| criterion (issue 23) | met | detail |", "|---|---|---|"]
    for name, found in criteria(result).items():
        met = {True: "yes", False: "**no**", None: "not measured"}[found["met"]]
        lines.append(f"| {name} | {met} | {found['detail'] or '-'} |")
    for part in result.get("sweep", []):
        lines += ["", f"## Sweep: {part['subject']}", ""]
        if "skipped" in part:
            lines.append(f"skipped: {part['skipped']}")
            continue
        lines += [f"{part['description']}; batch sizes {part['sizes']}; {part['seconds']} s.",
                  ""] + _sizes_table(part)
    for part in result.get("decode", []):
        lines += ["", f"## Decode: {part['decoder']}", ""]
        if "skipped" in part:
            lines.append(f"skipped: {part['skipped']}")
            continue
        lines += [f"{part['description']}; prompt {part['prompt_tokens']} tokens, "
                  f"{part['new_tokens']} new tokens; {part['seconds']} s.", ""]
        lines += _decode_table(part)
    bert = result.get("bert")
    if bert:
        lines += ["", f"## BERT: {bert['subject']}", ""]
        if "skipped" in bert:
            lines.append(f"skipped: {bert['skipped']}")
        else:
            lines += [f"{bert['description']}; sequence lengths {bert['sizes']}; "
                      f"{bert['seconds']} s.", ""] + _sizes_table(bert)
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> Optional[Path]:
    """Per-call ms against size, one panel per subject (log-log); None without matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        print("plot skipped: matplotlib is not installed")
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    parts = [part for part in result.get("sweep", []) + [result.get("bert") or {}]
             if part.get("variants")]
    if not parts:
        return None
    figure, axes = pyplot.subplots(1, len(parts), figsize=(4.2 * len(parts), 3.6), dpi=100,
                                   squeeze=False)
    for axis, part in zip(axes[0], parts):
        for name, row in part["variants"].items():
            sizes = [int(size) for size in row["per_call_ms"]]
            if sizes:
                axis.plot(sizes, list(row["per_call_ms"].values()), marker=".", label=name,
                          color=COLORS.get(name))
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_title(part["subject"], fontsize=9)
        axis.set_xlabel("sequence length" if part is result.get("bert") else "batch size")
        axis.set_ylabel("ms per call")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    return path
