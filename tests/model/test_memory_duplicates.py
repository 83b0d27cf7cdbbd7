"""The memory per-op table and torch's duplicate-node rule. A multiply by a Python scalar records
``aten::mul`` inside ``aten::mul`` (the scalar is wrapped, re-dispatched); torch's
``EventList._remove_dup_nodes`` merges such an only same-name child into its parent, and the
TensorBoard plugin's operator tree does the same (its ``remove_dup_nodes``, "follow the same
pattern in torch/autograd/profiler.py"), so its memory statistics and ``key_averages()`` count
the pair as one call with its bytes once. tracetui's table, which says it uses the plugin's
definitions, counted 9 calls and 72 KiB for ``aten::mul`` on a real CPU run where
``key_averages()`` gave 6 and 48 KiB (and ``tracetui summary`` 6 calls)."""
from __future__ import annotations

import json

from tracetui.cli.main import main

PID = TID = 77
KB8 = 8192


def _trace(path) -> list[dict]:
    """Per step: a scalar multiply (outer ``aten::mul`` > inner ``aten::mul`` > ``aten::to`` with
    a 4-byte temporary, then the 8 KiB result), a tensor multiply (one ``aten::mul``, 8 KiB) and a
    ``aten::add`` holding two same-name children (not an only child: no merge)."""
    ev = [{"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "python"}}]
    addr = iter(range(1 << 20, 1 << 30, 1 << 14))

    def x(name, ts, dur, cat="cpu_op"):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": float(ts), "dur": float(dur),
                   "args": {"External id": len(ev)}})

    total = [0]

    def mem(ts, nbytes, a=None):
        a = a if a is not None else next(addr)
        total[0] += nbytes
        ev.append({"ph": "i", "s": "t", "name": "[memory]", "pid": PID, "tid": TID, "ts": float(ts),
                   "args": {"Total Reserved": 0, "Total Allocated": total[0], "Bytes": nbytes, "Addr": a,
                            "Device Id": -1, "Device Type": 0}})
        return a

    for k in range(3):
        t = 1000.0 + 1000 * k
        x(f"ProfilerStep#{k}", t, 900, cat="user_annotation")
        x("aten::mul", t + 10, 40)          # outer: the scalar multiply
        x("aten::mul", t + 15, 30)          # inner, its only child: merged
        x("aten::to", t + 17, 6)
        tmp = mem(t + 18, 4)
        mem(t + 24, -4, tmp)
        mem(t + 30, KB8)                    # the result, in the inner mul
        x("aten::mul", t + 100, 20)         # a tensor multiply
        mem(t + 105, KB8)
        x("aten::add", t + 200, 60)
        x("aten::add", t + 205, 20)         # two same-name children: no merge
        mem(t + 210, 1024)
        x("aten::add", t + 230, 20)
        mem(t + 235, 2048)
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": ev}))
    return ev


def _reference(ev: list[dict]) -> dict:
    """name -> (calls, size increase, self size increase) from the raw events, by torch's rule: an
    op whose innermost enclosing op has its name and no other op child is merged into it."""
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    parent = {}
    for i, o in enumerate(ops):
        enc = [p for p in ops[:i] if p["ts"] <= o["ts"] and o["ts"] + o["dur"] <= p["ts"] + p["dur"]]
        parent[i] = ops.index(enc[-1]) if enc else None
    kids = {i: [j for j, p in parent.items() if p == i] for i in range(len(ops))}
    merged = {i for i, p in parent.items() if p is not None and ops[p]["name"] == ops[i]["name"] and len(kids[p]) == 1}
    out: dict = {}
    for i, o in enumerate(ops):
        if i in merged:
            continue
        inside = [m["args"]["Bytes"] for m in ev if m.get("name") == "[memory]"
                  and o["ts"] <= m["ts"] < o["ts"] + o["dur"]]
        own = [m["args"]["Bytes"] for m in ev if m.get("name") == "[memory]" and o["ts"] <= m["ts"] < o["ts"] + o["dur"]
               and not any(ops[j]["ts"] <= m["ts"] < ops[j]["ts"] + ops[j]["dur"]
                           for j in kids[i] if j not in merged)
               and not any(ops[g]["ts"] <= m["ts"] < ops[g]["ts"] + ops[g]["dur"]
                           for j in kids[i] if j in merged for g in kids[j])]
        c, inc, s = out.get(o["name"], (0, 0, 0))
        out[o["name"]] = (c + 1, inc + sum(inside), s + sum(own))
    return out


def test_per_op_memory_merges_an_only_same_name_child_as_torch_and_tensorboard_do(tmp_path, capsys):
    p = tmp_path / "scalar_mul.json"
    ref = _reference(_trace(p))
    # 3 merged pairs + 3 tensor multiplies; the temporary's free falls after aten::to ends: -4 self
    assert ref["aten::mul"] == (6, 6 * KB8, 6 * KB8 - 3 * 4)
    # outer adds hold 2 children each: none merged, so both levels count (3 KiB a step, twice)
    assert ref["aten::add"] == (9, 2 * 3 * 3072, 3 * 3072)
    assert main(["memory", str(p), "--json", "--top", "0"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["ops"]}
    for name, (calls, inc, self_inc) in ref.items():
        if not inc and not self_inc:
            continue
        r = rows[name]
        assert (r["calls"], r["size_increase_bytes"], r["self_size_increase_bytes"]) == (calls, inc, self_inc), name
    # the summary's op table counts the same calls
    assert main(["summary", str(p), "--json", "--top", "0"]) == 0
    ops = {o["name"]: o for o in json.loads(capsys.readouterr().out)["ops"]}
    assert ops["aten::mul"]["count"] == rows["aten::mul"]["calls"] == 6
