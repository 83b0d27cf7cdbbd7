"""Fusion opportunities on kernels a CUDA graph replays: the op around ``cudaGraphLaunch`` (a
compiled region, ``CompiledFunction``/``CompiledFunctionBackward``) recorded the region's inputs,
not the kernels', so those kernels' bytes are unknown and no saving is projected from them.

HTA's ``trace_diff_test_test`` showed it: a chain of three add kernels replayed by a graph under
``CompiledFunctionBackward`` was given 8 bytes of intermediates (the region's one scalar input), a
fused kernel of 0.0 µs, and so a saving of its whole 2,764 µs per step. References from the JSON
written here (which kernels a graph launch replays, what each op recorded)."""
from __future__ import annotations

import gzip
import json

import pytest

from tracetui.model import load_trace
from tracetui.model.opportunities import opportunities

from tests.conftest import PEER

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)"
N = 1 << 22  # elements of each eager op's tensors


def _trace(path) -> dict:
    """Two steps alike: eager ``aten::mul`` → ``aten::add`` → ``aten::mul`` on float tensors of N
    elements (one launch each), then a compiled region whose one ``cudaGraphLaunch`` replays three
    pointwise kernels on another stream; the region recorded one scalar input."""
    ev, corr = [], iter(range(1, 10**6))

    def x(cat, name, ts, dur, pid=1, tid=1, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    for s in range(2):
        t0 = 1000 + s * 20000
        x("user_annotation", f"ProfilerStep#{s}", t0, 19000)
        for j, (op, kn) in enumerate((("aten::mul", MUL), ("aten::add", ADD), ("aten::mul", MUL))):
            c, ts = next(corr), t0 + 100 + 100 * j
            x("cpu_op", op, ts, 50, **{"External id": c, "Input Dims": [[N], [N]], "Input type": ["float", "float"]})
            x("cuda_runtime", "cudaLaunchKernel", ts + 10, 20, correlation=c, **{"External id": c})
            x("kernel", kn, t0 + 1000 + 50 * j, 40, pid=0, tid=7, device=0, stream=7, correlation=c, **{"External id": c})
        c, ts = next(corr), t0 + 3000
        x("cpu_op", "CompiledFunction", ts, 200, **{"External id": c, "Input Dims": [[]], "Input type": ["float"]})
        x("cuda_runtime", "cudaGraphLaunch", ts + 20, 30, correlation=c, **{"External id": c})
        for j, kn in enumerate((ADD, MUL, ADD)):
            x("kernel", kn, t0 + 4000 + 1000 * j, 900, pid=0, tid=8, device=0, stream=8, correlation=c, **{"External id": c})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return doc


def _replayed(doc: dict) -> set:
    """Names of the ops whose launches are graph launches: per ``cudaGraphLaunch`` of the raw JSON,
    the innermost ``cpu_op`` of its thread that encloses it."""
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ops: dict = {}
    for e in ev:
        if e.get("cat") == "cpu_op":
            ops.setdefault((e["pid"], e["tid"]), []).append(e)
    out = set()
    for g in (e for e in ev if e.get("name") == "cudaGraphLaunch"):
        around = [o for o in ops.get((g["pid"], g["tid"]), [])
                  if o["ts"] <= g["ts"] and g["ts"] + g["dur"] <= o["ts"] + o["dur"]]
        if around:
            out.add(max(around, key=lambda o: (o["ts"], -o["dur"]))["name"])
    return out


def test_graph_replayed_chain_claims_no_bytes_nor_saving(tmp_path):
    doc = _trace(tmp_path / "t.json")
    region = _replayed(doc)
    assert region == {"CompiledFunction"}
    out = opportunities(load_trace(tmp_path / "t.json", cache=False))
    chains = {tuple(c["ops"]): c for c in out["chains"]}
    replayed = [c for ops, c in chains.items() if set(ops) <= region]
    eager = [c for ops, c in chains.items() if not set(ops) & region]
    assert len(replayed) == 1 and len(eager) == 1, list(chains)
    r = replayed[0]
    assert r["intermediate_bytes"] is None and r["projected_saving_us"] is None, r
    # the eager chain keeps its bytes: two intermediates of N float elements, from the ops' Input Dims
    assert eager[0]["intermediate_bytes"] == 2 * N * 4
    assert out["projected_us_per_step"] == pytest.approx(eager[0]["projected_saving_us"])


@pytest.mark.skipif(not (PEER / "trace_diff_test_test.json.gz").is_file(), reason="../shared/peer-traces absent")
def test_hta_graph_replays_project_nothing():
    path = PEER / "trace_diff_test_test.json.gz"
    region = _replayed(json.load(gzip.open(path)))
    assert {"CompiledFunction", "CompiledFunctionBackward"} <= region
    out = opportunities(load_trace(path, cache=False))
    only = [c for c in out["chains"] if set(c["ops"]) <= region]
    assert only
    assert all(c["projected_saving_us"] is None for c in only), \
        [(c["ops"][:2], c["projected_saving_us"]) for c in only if c["projected_saving_us"] is not None][:3]
    # a chain that mixes eager kernels with replayed ones claims no more than its known intermediates' traffic
    mixed = [c for c in out["chains"] if set(c["ops"]) & region and not set(c["ops"]) <= region]
    for c in mixed:
        assert c["projected_saving_us"] is None or c["projected_saving_us"] <= c["traffic_saving_us"] + 1e-9, c
