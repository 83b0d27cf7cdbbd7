"""Issue 43 (the house): compare/items.py kept its own attention and GEMM patterns beside the
taxonomy's, so an attention or GEMM family added the documented way (a row in
``model/taxonomy.TABLE``) never reached the diff. The diff now asks the taxonomy."""
from __future__ import annotations

import re

import pytest

from tracetui.compare import items
from tracetui.model import taxonomy
from tracetui.model.taxonomy import Rule


@pytest.fixture
def with_rules(monkeypatch):
    """Add rules to the table the documented way (a Rule row, with its reason), ahead of the rest."""
    def add(*rules):
        compiled = tuple((r, taxonomy._compile(r)) for r in rules) + taxonomy._COMPILED
        monkeypatch.setattr(taxonomy, "_COMPILED", compiled)
        monkeypatch.setattr(taxonomy, "TABLE", tuple(r for r, _ in compiled))
        for f in (taxonomy.classify, taxonomy._hit, taxonomy.op_class):
            f.cache_clear()
    yield add
    monkeypatch.undo()
    for f in (taxonomy.classify, taxonomy._hit, taxonomy.op_class):
        f.cache_clear()


def test_an_attention_op_family_added_to_the_table_reaches_the_diff(with_rules):
    op = "mylib::paged_decode_attn"
    assert items._cpu_class(op) != "attention"
    with_rules(Rule("op", r"^mylib::paged_decode_attn$", "attention", None, "a test's paged attention op"))
    assert items._cpu_class(op) == "attention"          # a CPU-only unit of that op
    assert items.op_is(op, "attention")                   # a kernel whose launching chain holds it


def test_a_gemm_op_family_added_to_the_table_reaches_the_diff(with_rules):
    op = "mylib::block_scaled_mm"
    assert items._cpu_class(op) != "gemm"
    with_rules(Rule("op", r"^mylib::block_scaled_mm$", "gemm", None, "a test's GEMM op"))
    assert items._cpu_class(op) == "gemm"
    assert items.op_is(op, "gemm")


def test_the_diff_reads_what_the_taxonomy_says_of_every_known_op():
    """Every op the old private sets knew keeps its class, now from the taxonomy (short names as an
    Inductor kernel's name lists them, full names, in-place forms)."""
    for short in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation",
                  "_scaled_mm", "mkldnn_rnn_layer"):
        assert items.op_is(short, "gemm") and items.op_is(f"aten::{short}", "gemm"), short
        assert items._cpu_class(f"aten::{short}") == "gemm", short
    assert items._cpu_class("aten::addmm_") == "gemm"
    assert items._cpu_class("mkldnn::_linear_pointwise") == "gemm"
    for op in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
               "aten::_efficient_attention_forward", "aten::_cudnn_attention_backward", "flex_attention"):
        assert items._cpu_class(op) == "attention", op
    for op in ("aten::gelu", "aten::mul", "aten::copy_", "aten::sum"):
        assert items._cpu_class(op) not in ("gemm", "attention"), op
    # no private pattern is left to drift from the table
    src = open(items.__file__, encoding="utf-8").read()
    assert not re.search(r"^_(?:ATTN_NAME|ATTN_OP|GEMM_OPS)\s*=", src, re.M)
