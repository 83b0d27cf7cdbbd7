"""The diff's result types: a row of the aligned list, a fusion (one kernel of B for several of
A) and its mirror, an unfusion (one kernel of A that B runs as several)."""
from __future__ import annotations

from dataclasses import dataclass, field

from tracetui.compare.items import Item


@dataclass
class Row:
    """One line of the aligned list. Every A item is ``a`` of exactly one row, every B item ``b``
    of exactly one row; ``replaces`` are the A items a B kernel took over (each also has its own
    row, claimed: ``fused_into`` set, delta 0); ``parts`` the B items that together replaced one
    A kernel (each with its own row, ``unfused_from`` set, delta 0)."""
    status: str              # same | changed | removed | added | fused | unfused | replaced (one for one)
    a: Item | None
    b: Item | None
    detail: str = ""
    fused_into: str | None = None
    replaces: list = field(default_factory=list)
    reason: str = ""         # added/removed: why there is no counterpart ("" = unexplained)
    how: str = ""            # fused: name | template | scope | position | work
    evidence: str = ""       # fused/unfused: what showed the kernel does the replaced kernels' work
    unfused_from: str | None = None
    parts: list = field(default_factory=list)
    refers: list = field(default_factory=list)   # the kernels (Items) the reason names
    rule: str = ""           # the key of the reason rule that matched (reasons.py)

    @property
    def name(self) -> str:
        return (self.b or self.a).name

    @property
    def claimed(self) -> bool:
        """A row whose kernel another row counts (fused into a B kernel, or part of an unfusion)."""
        return self.fused_into is not None or self.unfused_from is not None

    @property
    def delta_ns(self) -> float:
        """What this row adds to B's device time per step (claimed rows: 0, the row that claimed
        them counts them)."""
        if self.claimed:
            return 0.0
        a = (self.a.dur_ns if self.a else 0.0) + sum(x.dur_ns for x in self.replaces)
        return (self.b.dur_ns if self.b else 0.0) + sum(y.dur_ns for y in self.parts) - a

    @property
    def launches_saved(self) -> int:
        if self.claimed:
            return 0
        return int(self.a is not None) + len(self.replaces) - int(self.b is not None) - len(self.parts)

    @property
    def explained(self) -> bool:
        return self.status not in ("added", "removed") or bool(self.reason) or self.claimed


@dataclass
class Fusion:
    """A kernel and the kernels of the other trace whose work it does (``replaces``). In
    ``DiffResult.fusions`` the kernel is B's and ``replaces`` A's; in ``unfusions`` the kernel
    is A's and ``replaces`` B's."""
    kernel: Item
    replaces: list[Item]
    how: str                 # "name" (Inductor op list), "template", "scope", "position", "work"
    gemm: Item | None = None  # a template GEMM: the library GEMM it replaced
    evidence: str = ""

    @property
    def saved_ns(self) -> float:
        return sum(i.dur_ns for i in self.replaces) + (self.gemm.dur_ns if self.gemm else 0) - self.kernel.dur_ns

    @property
    def intermediate_bytes(self) -> float:
        """Bytes of the intermediates that no longer exist: every replaced output but the last.

        Each was written to HBM and read back, so the traffic saved is twice this. A wide ATen
        GEMM that took several GEMMs over writes all their outputs: none is saved.
        """
        if self.how == "work" and self.kernel.aten:
            return 0.0
        return float(sum(i.out_bytes or 0 for i in self.replaces[:-1]))
