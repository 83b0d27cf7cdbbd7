"""Weight copies in a recorded ``mlp --train`` step, read straight from the raw trace JSON.

    python benchmarks/trace_weight_copies.py mlp_train_fused.json.gz [more traces...]

Counts, per trace: ``aten::copy_``/``aten::clone`` of a weight-shaped tensor ([H, D], [D, H],
[2H, D]) inside the ``nn.Module: GeGLU`` scope, and any copy inside an AccumulateGrad, with
their device kernels' µs. Standard library only (runs on the device image, which has no
tracetui dependencies). Exit 0 when the first trace has none, 1 otherwise, 2 on unreadable input.
"""
from __future__ import annotations

import gzip
import json
import sys


def load(path: str) -> dict:
    raw = open(path, "rb").read()
    return json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)


def copies(doc: dict) -> dict:
    sizes = doc.get("tracetui", {}).get("sizes", {})
    d, h = sizes.get("dim"), sizes.get("hidden")
    shapes = [[h, d], [d, h], [2 * h, d], [d, 2 * h]] if d and h else []
    ev = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]

    def inside(outer):
        end = outer["ts"] + outer["dur"]
        return [e for e in ops if e.get("tid") == outer.get("tid") and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]
    mods = [e for e in ev if e.get("name", "").startswith("nn.Module: GeGLU")]
    acc = [e for e in ops if e["name"] == "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
    copy = ("aten::copy_", "aten::clone")
    in_mod = [e for m in mods for e in inside(m) if e["name"] in copy
              and any(s in shapes for s in e.get("args", {}).get("Input Dims", []))]
    in_acc = [e for a in acc for e in inside(a) if e["name"] in copy]
    return {"module_scopes": len(mods), "accumulate_grads": len(acc), "weight_copies_in_module": len(in_mod),
            "copies_in_accumulate_grad": len(in_acc)}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    first = None
    for path in argv:
        try:
            c = copies(load(path))
        except (OSError, ValueError) as e:
            print(f"trace_weight_copies: {path}: {e}", file=sys.stderr)
            return 2
        print(f"{path}: {c}")
        first = c if first is None else first
    ok = first["module_scopes"] and not first["weight_copies_in_module"] and not first["copies_in_accumulate_grad"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
