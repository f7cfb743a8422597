"""GPU diagnosis of training-gradient mismatches (BERT/GPT-2 with bf16 autocast): one variant per
process, gradients against eager. Usage: python -m benchmarks.triton.diag_training MODEL [BACKEND]
with JIT_* settings in the environment."""
import os
import sys

import torch
import transformers

import dynamo


def build(kind, hidden, layers, heads):
    if kind == "bert":
        config = transformers.BertConfig(hidden_size=hidden, num_hidden_layers=layers,
                                         num_attention_heads=heads, intermediate_size=4 * hidden,
                                         hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
        config._attn_implementation = os.environ.get("DIAG_ATTENTION", "sdpa")
        return transformers.BertForMaskedLM(config)
    config = transformers.GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config._attn_implementation = os.environ.get("DIAG_ATTENTION", "sdpa")
    return transformers.GPT2LMHeadModel(config)


def _cast_matches(rule, node, graph):
    source = node.args[0].meta.get("val")
    result = node.meta.get("val")
    backward = any("tangent" in placeholder.name for placeholder in graph.nodes
                   if placeholder.op == "placeholder")
    users_extern = any(user.op == "call_function" and "mm" in str(user.target) or
                       "attention" in str(user.target) for user in node.users)
    return {"to_bf16": result.dtype == torch.bfloat16,
            "to_f32": result.dtype == torch.float32,
            "input": node.args[0].op == "placeholder",
            "computed": node.args[0].op != "placeholder",
            "noncontiguous": not source.is_contiguous(),
            "contiguous": source.is_contiguous(),
            "forward": not backward, "backward": backward,
            "feeds_library": users_extern, "feeds_kernels": not users_extern}[rule]


def _fallback_some_casts(rules):
    import inductor.lower.graph as graph_module
    original = graph_module.GraphLowering.call_function

    def call_function(self, target, args, kwargs):
        node = self.current
        if target is torch.ops.aten._to_copy.default and all(
                _cast_matches(rule.lstrip("@^"), node, node.graph) for rule in rules.split("+")):
            if rules.startswith("@"):  # realize the cast's result instead of falling back
                result = original(self, target, args, kwargs)
                result.realize()
                return result
            if rules.startswith("^"):  # realize the cast's source
                args[0].realize()
                return original(self, target, args, kwargs)
            return self._extern(target, args, kwargs)
        return original(self, target, args, kwargs)
    graph_module.GraphLowering.call_function = call_function


def main():
    kind, backend, hidden, amp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "amp"
    torch.manual_seed(0)
    model = build(kind, hidden, 2, max(hidden // 64, 1)).cuda().train()
    ids = torch.randint(0, 1000, (16, 128), device="cuda")

    def step(module):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out = module(input_ids=ids, labels=ids)
        out.loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return out.loss.detach().float(), grads

    seen = set()
    if os.environ.get("DIAG_OPS"):
        import inductor.lower.graph as graph_module
        original = graph_module.GraphLowering.call_function

        def record(self, target, args, kwargs):
            seen.add(str(getattr(target, "overloadpacket", target)))
            return original(self, target, args, kwargs)
        graph_module.GraphLowering.call_function = record
    if os.environ.get("DIAG_TOCOPY"):
        _fallback_some_casts(os.environ["DIAG_TOCOPY"])
    loss0, g0 = step(model)
    compiled = dynamo.jit(model, backend=backend)
    for _ in range(2):
        loss1, g1 = step(compiled)
    bad = []
    for (name, _), a, b in zip(model.named_parameters(), g0, g1):
        error = (a.float() - b.float()).abs().max().item()
        scale = a.float().abs().max().item()
        if not error <= 0.05 * scale + 1e-3:
            bad.append(f"{name} err {error:.3g} scale {scale:.3g}")
    print(f"RESULT {kind} {backend} hidden={hidden} amp={amp} loss {loss0.item():.5f} "
          f"{loss1.item():.5f} bad {len(bad)}/{len(g0)}", flush=True)
    if seen:
        print("OPS " + ",".join(sorted(seen)), flush=True)
    for line in bad[::-1][:6]:
        print("   ", line)


if __name__ == "__main__":
    main()
