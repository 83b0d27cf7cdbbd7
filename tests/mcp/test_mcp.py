"""`tracetui mcp`: an SDK client (in-process, and over stdio against the installed command) lists
the tools, calls each one on a bundled trace and gets the numbers of the CLI's JSON."""
from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from tracetui.mcp import tools as mcp_tools  # noqa: E402
from tracetui.cli.main import main  # noqa: E402
from tracetui.mcp.server import build_server  # noqa: E402
from tracetui.report.tree import tree_rows  # noqa: E402

from tests.conftest import PEER, TRACES  # noqa: E402

A, B = str(TRACES / "mlp_eager.json.gz"), str(TRACES / "mlp_compile.json.gz")
ROOTS = [str(TRACES), str(PEER)]
"""What the servers under test may read: the bundled traces, and the peer recordings when present."""


def cli(capsys, *argv):
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out)


async def call(client, tool: str, **args):
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return json.loads(r.content[0].text)


async def all_pages(client, tool: str, key: str, **args) -> list:
    """Follow next_offset to the end: the continuation every list answer offers."""
    items, offset = [], 0
    while offset is not None:
        page = await call(client, tool, offset=offset, **args)
        assert page["offset"] == offset and page["count"] == len(page[key])
        items += page[key]
        offset = page["next_offset"]
    assert len(items) == page["total"]
    return items


def strip(rows: list[dict], *keys) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in keys} for r in rows]


async def check_every_tool(client, capsys) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == {t.name for t in mcp_tools.TOOLS}
    # --python: the MCP tools list every op row (frames and modules too), as the CLI does with it
    s = cli(capsys, "summary", A, "--json", "--top", "0", "--python")
    s5 = cli(capsys, "summary", A, "--json", "--top", "5", "--python")

    o = await call(client, "open_trace", path=A)
    for k in ("file", "device", "steps", "events", "kernel_classes", "step_marker", "self_time_rule"):
        assert o[k] == s[k], k
    assert o["step_names"]["names"] == [p["name"] for p in s["per_step"]]

    m = await call(client, "summary", path=A, top=5)
    for k, v in s5.items():
        if k not in ("per_step", "first_step_kernels"):
            assert m[k] == v, k
    assert m["per_step"]["count"] == len(s5["per_step"])

    assert strip(await all_pages(client, "kernels", "kernels", path=A, limit=2), "ids") == s["kernels"]
    assert strip(await all_pages(client, "ops", "ops", path=A, limit=7), "ids") == s["ops"]
    gemm = await call(client, "kernels", path=A, name="NVJET")  # case-insensitive substring
    assert [k["name"] for k in gemm["kernels"]] == [k["name"] for k in s["kernels"] if "nvjet" in k["name"].lower()]
    assert strip((await call(client, "ops", path=A, kind="module"))["ops"], "ids") == \
        [r for r in s["ops"] if r["kind"] == "module"]

    steps = await all_pages(client, "step_breakdown", "steps", path=A, limit=1)
    assert strip(steps, "id") == s["per_step"]
    one = await call(client, "step_breakdown", path=A, step=s["per_step"][1]["name"])
    assert strip(one["steps"], "id") == [s["per_step"][1]]

    tree = cli(capsys, "tree", A, "--json", "--depth", "4")
    rows = await all_pages(client, "tree", "rows", path=A, depth=4, limit=7)
    assert rows == tree_rows(tree)
    gemms = await all_pages(client, "tree", "rows", path=A, depth=1000, filter="NVJET", limit=10)
    assert gemms == tree_rows(cli(capsys, "tree", A, "--json", "--filter", "nvjet"))
    kernel_row = next(r for r in gemms if r["kind"] == "kernel")
    sub = await call(client, "tree", path=A, node=kernel_row["parent"], depth=1)
    assert sub["rows"][0]["id"] == kernel_row["parent"] and kernel_row in [
        {**r, "parent": kernel_row["parent"], "depth": kernel_row["depth"]} for r in sub["rows"][1:]]
    full = cli(capsys, "tree", A, "--json")
    by_id = {r["id"]: r for r in tree_rows(full)}
    k_id = next(r["id"] for r in tree_rows(full) if r["kind"] == "kernel")
    n = await call(client, "node", path=A, id=k_id)
    for key in ("name", "kind", "device_us", "dur_us", "start_us"):
        assert n[key] == by_id[k_id][key], key
    assert [p["id"] for p in n["path_to_node"]][-1] == k_id and n["path_to_node"][0]["id"] == 0
    first = next(f for f in s["first_step_kernels"] if f["name"] == n["name"])
    assert n["ops"] == first["ops"] and n["module"] == first["module"] and n["class"] == first["class"]

    d = cli(capsys, "diff", A, B, "--json")
    for section in ("kernels", "fused", "removed_ops", "added_ops", "chains"):
        got = await all_pages(client, "diff", section, a=A, b=B, section=section, limit=3)
        assert got == d[section], section
    head = await call(client, "diff", a=A, b=B)
    assert head["a"] == d["a"] and head["b"] == d["b"]

    mem_path = str(TRACES / "transformer_eager_memory.json.gz")
    mj = cli(capsys, "memory", mem_path, "--json", "--top", "0")
    for section in ("devices", "steps", "ops"):
        assert await all_pages(client, "memory", section, path=mem_path, section=section, limit=5) == mj[section]
    if PEER.is_dir():
        rank_paths = [str(PEER / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
        rj = cli(capsys, "ranks", *rank_paths, "--json")
        for section in ("per_rank", "collectives"):
            assert await all_pages(client, "ranks", section, paths=rank_paths, section=section, limit=4) == rj[section]

    for tool, args, says in (("summary", {"path": str(TRACES / "nonexistent" / "x.json")}, "no such file"),
                             ("node", {"path": A, "id": 10 ** 9}, "no node"),
                             ("diff", {"a": A, "b": B, "section": "nope"}, "section"),
                             ("step_breakdown", {"path": A, "step": "ProfilerStep#99"}, "no step")):
        r = await client.call_tool(tool, args)
        assert r.is_error and says in r.content[0].text, (tool, r.content[0].text)


def test_in_process_client_gets_the_cli_numbers(capsys):
    async def run():
        async with Client(build_server(roots=ROOTS)) as client:
            await check_every_tool(client, capsys)
    asyncio.run(run())


def test_answers_are_bounded_and_continue(capsys, monkeypatch):
    """With a small bound every answer fits it, and the pages still add up to the whole list."""
    monkeypatch.setattr(mcp_tools, "MAX_CHARS", 2500)
    s = cli(capsys, "summary", A, "--json", "--top", "0", "--python")  # every op row, as the MCP lists them

    async def run():
        async with Client(build_server(roots=ROOTS)) as client:
            for tool, args in (("open_trace", {"path": A}), ("summary", {"path": A, "top": 100}),
                               ("node", {"path": A, "id": 5}), ("tree", {"path": A, "depth": 50, "limit": 500}),
                               ("ops", {"path": A, "limit": 500}), ("step_breakdown", {"path": A, "limit": 50})):
                r = await client.call_tool(tool, args)
                assert not r.is_error and len(r.content[0].text) <= 2500, (tool, len(r.content[0].text))
            ops = await all_pages(client, "ops", "ops", path=A, limit=500)
            assert strip(ops, "ids") == s["ops"]
    asyncio.run(run())


def _installed() -> str | None:
    return shutil.which("tracetui") or (str(Path(sys.executable).with_name("tracetui"))
                                        if Path(sys.executable).with_name("tracetui").exists() else None)


@pytest.mark.skipif(_installed() is None, reason="the tracetui command is not installed")
def test_stdio_against_the_installed_command(capsys):
    async def run():
        params = StdioServerParameters(command=_installed(), args=["mcp", "--root", str(TRACES)]
                                       + ([str(PEER)] if PEER.is_dir() else []))
        async with Client(params) as client:
            await check_every_tool(client, capsys)
    asyncio.run(run())
