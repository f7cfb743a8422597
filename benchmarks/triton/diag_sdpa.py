"""GPU diagnosis: scaled-dot-product attention forward and backward in bf16 through
dynamo.jit against eager. Usage: python -m benchmarks.triton.diag_sdpa [causal]"""
import sys

import torch
import torch.nn.functional as F

import dynamo


def main():
    causal = len(sys.argv) > 1 and sys.argv[1] == "causal"
    torch.manual_seed(0)
    shape = (4, 2, 128, 64)
    leaves = [torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
              for _ in range(3)]

    def step(q, k, v):
        out = F.scaled_dot_product_attention(q * 1.0, k * 1.0, v * 1.0, is_causal=causal)
        return (out.float() ** 2).sum()

    def run(function):
        loss = function(*leaves)
        loss.backward()
        grads = [leaf.grad.clone() for leaf in leaves]
        for leaf in leaves:
            leaf.grad = None
        return loss.detach(), grads

    loss0, g0 = run(step)
    compiled = dynamo.jit(step)
    for _ in range(2):
        loss1, g1 = run(compiled)
    errors = [f"{(a.float() - b.float()).abs().max().item():.3g}/"
              f"{a.float().abs().max().item():.3g}" for a, b in zip(g0, g1)]
    print(f"RESULT sdpa causal={causal} loss {loss0.item():.4f} {loss1.item():.4f} "
          f"grad err/scale {errors}", flush=True)


if __name__ == "__main__":
    main()
