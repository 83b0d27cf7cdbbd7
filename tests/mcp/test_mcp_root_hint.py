"""Issue 43 item 7: the README's MCP example refused every trace outside the folder where the agent
started the server. The first registration example carries --root, and the refusal says which flag
(with its argument) lets the server read the path."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("mcp")
from tracetui.mcp import tools as mcp_tools  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_first_mcp_example_names_a_root():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Agents: `tracetui mcp`", 1)[1]
    registrations = re.findall(r"tracetui mcp[^`\n]*|\"args\": \[[^\]]*\]", section)
    assert registrations, "no registration example in the README's MCP section"
    first = registrations[0]
    assert "--root" in first, first
    assert all("--root" in r for r in registrations[:2]), registrations[:2]


def test_the_refusal_names_the_flag_and_its_argument(tmp_path):
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "t.json").write_text('{"traceEvents": []}')
    saved = list(mcp_tools.ROOTS)
    mcp_tools.set_roots([inside])
    try:
        with pytest.raises(mcp_tools.ToolInputError) as e:
            mcp_tools.confine(outside / "t.json")
    finally:
        mcp_tools.ROOTS[:] = saved
    msg = str(e.value)
    assert msg.startswith(f"{outside / 't.json'}: outside the folders this server may read"), msg
    assert "--root DIR" in msg, msg
    # the README quotes the refusal as the server writes it
    assert mcp_tools.OUTSIDE in README.read_text(encoding="utf-8").replace("\n", " ")
