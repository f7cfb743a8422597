"""Do compiled optimizer steps on CUDA params round as eager's kernels do, and where not, why?

Compiled steps run eagerly for CUDA params (`dynamo/variables/optimizers.py`
`_refuse_devices_not_checked`) since an H200 run found last-bit differences and a
`DeviceMismatch` (non-capturable Adam's CPU step counters in a CUDA graph). This script lifts
that refusal and, for every case of tests/training/test_compiled_optimizers.py:
- runs the jitted step against eager for a few steps and reports, per step, how many elements
  of each param and state tensor differ and by how many ulps at most, or the exception, and
  the fallbacks inductor counted;
- for the elementary forms the update rules use (`p.add_(g, alpha=s)`, `addcmul_`,
  `addcdiv_`, `lerp_`, `mul_`, `sqrt`, `div`), eager's single-tensor and foreach results
  against emulations of candidate roundings (one fused multiply-add, or separate roundings),
  on a million random elements: which form each eager kernel computes;
- prints the generated Triton kernels of the first failing cases.

    python -m benchmarks.experiments.diag_optimizer_rounding [--steps 3] [--sources 2]
"""
from __future__ import annotations

import argparse
import traceback

import torch


def _ulps(actual: torch.Tensor, expected: torch.Tensor) -> tuple[int, int]:
    """(differing elements, largest difference in ulps) of two float32 tensors."""
    if actual.dtype != torch.float32:
        differ = int((actual != expected).sum())
        return differ, differ and -1
    a = actual.detach().float().contiguous().view(torch.int32).long()
    b = expected.detach().float().contiguous().view(torch.int32).long()
    diff = (a - b).abs()
    return int((diff != 0).sum()), int(diff.max()) if diff.numel() else 0


def _compare(params, twins, optimizer, twin_optimizer) -> list[str]:
    rows = []
    for index, (actual, expected) in enumerate(zip(params, twins)):
        differ, ulps = _ulps(actual, expected)
        if differ:
            rows.append(f"param {index}: {differ}/{expected.numel()} differ, <= {ulps} ulp")
        state, twin_state = optimizer.state.get(actual, {}), twin_optimizer.state.get(expected, {})
        for name, value in twin_state.items():
            got = state.get(name)
            if not isinstance(value, torch.Tensor) or got is None:
                continue
            if got.device != value.device:
                rows.append(f"state {name} {index}: device {got.device} != {value.device}")
                continue
            differ, ulps = _ulps(got, value)
            if differ:
                rows.append(f"state {name} {index}: {differ}/{value.numel()} differ, <= {ulps} ulp")
    return rows


def run_cases(steps: int, sources: int) -> None:
    import dynamo
    import inductor
    from dynamo.variables import optimizers
    from tests.training import test_compiled_optimizers as cases

    optimizers.TracedOptimizer._refuse_devices_not_checked = lambda self: None
    inductor.config.fallback_on_error = True
    reports: list = []
    original = inductor.runtime.compiled_graph.CompiledGraph.__init__

    def keep(self, run, report):
        original(self, run, report)
        reports.append(report)
    inductor.runtime.compiled_graph.CompiledGraph.__init__ = keep
    printed = 0
    for cls, options in cases.CASES:
        name = cases._case_id((cls, options))
        dynamo.reset()
        reports.clear()
        before = dict(inductor.fallbacks())
        params, twins = cases.make_params(device="cuda"), cases.make_params(device="cuda")
        optimizer, twin_optimizer = cls(params, **options), cls(twins, **options)
        counting = cases.Counting("inductor")
        jitted = dynamo.jit(cases.step_once, backend=counting)
        lines = []
        try:
            for step in range(steps):
                cases.set_grads(params, twins, step)
                twin_optimizer.step()
                jitted(optimizer)
                torch.cuda.synchronize()
                rows = _compare(params, twins, optimizer, twin_optimizer)
                lines.append(f"  step {step}: " + ("equal" if not rows else "; ".join(rows)))
        except Exception as error:   # noqa: BLE001 - a diagnostic: report and go on
            lines.append("  raised " + "".join(traceback.format_exception_only(error)).strip())
        compiled = "_set_grad_enabled" in str(counting.ops())
        after = inductor.fallbacks()
        new = {key: value for key, value in after.items() if before.get(key) != value}
        print(f"{name}: graphs {len(counting.graphs)}, step compiled {compiled}, "
              f"new fallbacks {new or 'none'}")
        print("\n".join(lines))
        if printed < sources and any("differ" in line for line in lines):
            printed += 1
            for report in reports:
                text = report.source
                start = text.find("@triton.jit\ndef triton_")
                print(f"---- generated code of {name} ----")
                print(text[:text.find('\n\n\n')])
                print(text[start:] if start >= 0 else "(no triton kernel)")


def _f32(value):
    """A tensor rounded to float32, or a Python float rounded to float32 (as a float)."""
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.float32).double().item()
    return value.to(torch.float32)


def probe_forms(device: str = "cuda", count: int = 1 << 20) -> None:
    """Which rounding each eager kernel's elementary form has on this GPU."""
    generator = torch.Generator(device=device).manual_seed(0)
    p, a, b = (torch.randn(count, device=device, generator=generator) for _ in range(3))
    b = b.abs() + 0.1
    s = -0.0123456789
    s32 = _f32(s)
    d = {name: value.double() for name, value in (("p", p), ("a", a), ("b", b))}
    forms = {
        "add_(a, alpha=s)": (lambda t: t.add_(a, alpha=s),
                             lambda t: torch._foreach_add_([t], [a], alpha=s), {
                                 "fma(a,s,p)": _f32(d["p"] + d["a"] * s32),
                                 "p+round(a*s)": p + _f32(d["a"] * s32)}),
        "addcmul_(a, b, value=s)": (lambda t: t.addcmul_(a, b, value=s),
                                    lambda t: torch._foreach_addcmul_([t], [a], [b], value=s), {
                                        "fma(s*a, b, p)": _f32(d["p"] + _f32(s32 * d["a"]).double()
                                                               * d["b"]),
                                        "fma(s, a*b, p)": _f32(d["p"] + s32 * _f32(d["a"] * d["b"])
                                                               .double()),
                                        "p+round(s*a*b)": p + _f32(_f32(s32 * d["a"]).double() * d["b"])}),
        "addcdiv_(a, b, value=s)": (lambda t: t.addcdiv_(a, b, value=s),
                                    lambda t: torch._foreach_addcdiv_([t], [a], [b], value=s), {
                                        "fma(s, a/b, p)": _f32(d["p"] + s32 * _f32(d["a"] / d["b"])
                                                               .double()),
                                        "fma(s*a, 1/b...)p+round(s*a/b)":
                                            p + _f32(_f32(s32 * d["a"]).double() / d["b"]),
                                        "p+round(s*round(a/b))": p + _f32(s32 * _f32(d["a"] / d["b"])
                                                                          .double())}),
        "lerp_(a, w)": (lambda t: t.lerp_(a, 0.1), lambda t: torch._foreach_lerp_([t], [a], 0.1), {
            "fma(w, a-p, p)": _f32(d["p"] + _f32(0.1) * _f32(d["a"] - d["p"]).double()),
            "p+round(w*(a-p))": p + _f32(_f32(0.1) * _f32(d["a"] - d["p"]).double())}),
        "mul_(a) then addcmul_(a,a,1-b2)": (
            lambda t: t.mul_(0.999).addcmul_(a, a, value=0.001),
            lambda t: (torch._foreach_mul_([t], 0.999), torch._foreach_addcmul_([t], [a], [a],
                                                                                 value=0.001)), {
                "fma(0.001*a, a, round(p*0.999))": _f32(_f32(d["p"] * _f32(0.999)).double() + _f32(
                    _f32(0.001) * d["a"]).double() * d["a"]),
                "fma(0.001, round(a*a), ...)": _f32(_f32(d["p"] * _f32(0.999)).double() + _f32(
                    0.001) * _f32(d["a"] * d["a"]).double())}),
    }
    for name, (single, foreach, candidates) in forms.items():
        for kind, run in (("single", single), ("foreach", foreach)):
            target = p.clone()
            run(target)
            matches = {label: int((target != value).sum()) for label, value in candidates.items()}
            print(f"{name} [{kind}]: mismatches per candidate {matches}")
    quotient = torch.sqrt(b)
    print("sqrt: eager vs float64-rounded", int((quotient != _f32(d['b'].sqrt())).sum()))
    print("div: eager vs float64-rounded", int(((a / b) != _f32(d['a'] / d['b'])).sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sources", type=int, default=2, help="cases whose kernels to print")
    parser.add_argument("--forms-only-on", default=None, help="probe the forms on this device "
                        "(cpu: a check of the script) and stop")
    args = parser.parse_args()
    if args.forms_only_on:
        probe_forms(args.forms_only_on)
        return
    print(torch.__version__, torch.cuda.get_device_name())
    probe_forms()
    run_cases(args.steps, args.sources)


if __name__ == "__main__":
    main()
