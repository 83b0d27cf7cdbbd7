"""Serving engines' step annotations: which engine marked a forward pass, and what it says.

SGLang, vLLM and AMD's ATOM wrap each forward pass in a ``record_function`` whose name carries the
batch: its phase (prefill, decode or both), its size and, in newer versions, its token counts.
``ENGINE_RULES`` is the table of those formats (each with where it comes from); ``label_of``
reads one name. Every pattern is anchored and has no nested repetition, so a 100,000-character
name is matched in linear time (names come from untrusted files).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class StepLabel:
    """What a step's annotation says. Counts are None where the annotation does not carry them."""
    engine: str
    phase: str                          # "prefill" | "decode" | "mixed" | "idle" | an engine's other mode
    batch: int | None = None            # requests in the batch
    prefill_reqs: int | None = None
    decode_reqs: int | None = None
    prefill_tokens: int | None = None
    decode_tokens: int | None = None

    @property
    def text(self) -> str:
        """``decode bs=32``, ``mixed bs=66 prefill 2 req/2048 tok, decode 64 req/64 tok``."""
        out = [self.phase] + ([f"bs={self.batch}"] if self.batch is not None else [])
        for side, reqs, toks in (("prefill", self.prefill_reqs, self.prefill_tokens),
                                 ("decode", self.decode_reqs, self.decode_tokens)):
            bits = [f"{reqs} req"] if reqs is not None and self.phase == "mixed" else []
            bits += [f"{toks} tok"] if toks is not None else []
            if bits:
                out.append(f"{side} {'/'.join(bits)}")
        return " ".join(out)

    def as_dict(self) -> dict:
        return {"engine": self.engine, "phase": self.phase, "batch": self.batch,
                "prefill_reqs": self.prefill_reqs, "decode_reqs": self.decode_reqs,
                "prefill_tokens": self.prefill_tokens, "decode_tokens": self.decode_tokens}


def _phase(prefill: int | None, decode: int | None) -> str:
    """The phase of a batch from its prefill and decode request counts."""
    if prefill and decode:
        return "mixed"
    if prefill:
        return "prefill"
    return "decode" if decode else "idle"


SGLANG_MODES = {"extend": "prefill", "prefill": "prefill", "split_prefill": "prefill", "decode": "decode",
                "mixed": "mixed", "idle": "idle"}
"""SGLang's ForwardMode names -> phase. EXTEND is its prefill (a prompt, or a prompt's new part
after a cache hit); other modes (TARGET_VERIFY, DRAFT_EXTEND, ...) keep their own name."""

def _fields(text: str) -> dict[str, int]:
    """The ``key=123`` fields inside SGLang's and ATOM's brackets (split, not a regex search: linear)."""
    out = {}
    for tok in text.split():
        key, eq, value = tok.partition("=")
        if eq and value.isdigit() and value.isascii():
            out[key] = int(value)
    return out


def _sglang(m: re.Match) -> StepLabel:
    mode, f = m["mode"].lower(), _fields(m["fields"])
    phase = SGLANG_MODES.get(mode, mode)
    pre_tok = f.get("toks") if phase == "prefill" else f.get("ext")
    return StepLabel("SGLang", phase, f.get("bs"), prefill_reqs=f.get("c"), decode_reqs=f.get("g"),
                     prefill_tokens=f.get("c_sq", pre_tok), decode_tokens=f.get("g_sq", f.get("dec")))


def _vllm_detailed(m: re.Match) -> StepLabel:
    c, g = int(m["c"]), int(m["g"])
    return StepLabel("vLLM", _phase(c, g), int(m["n"]), prefill_reqs=c, decode_reqs=g,
                     prefill_tokens=int(m["c_sq"]), decode_tokens=int(m["g_sq"]))


def _vllm_new_cached(m: re.Match) -> StepLabel:
    new, cached = int(m["new"]), int(m["cached"])
    return StepLabel("vLLM", _phase(new, cached), new + cached, prefill_reqs=new, decode_reqs=cached)


def _atom(m: re.Match) -> StepLabel:
    f = _fields(m["fields"])
    phase = m["mode"]
    tok = f.get("tok")
    return StepLabel("ATOM", phase, f.get("bs"), prefill_tokens=tok if phase == "prefill" else None,
                     decode_tokens=tok if phase == "decode" else None)


_SQSK = r"sq(?P<{p}_sq>\d+)sk\d+sqsq\d+sqsk\d+"


@dataclass(frozen=True)
class EngineRule:
    """One engine's step annotation: the name it writes, how to read it, and where it comes from."""
    engine: str
    form: str                           # the format, for people: "step[MODE bs=N …]"
    rx: re.Pattern
    read: Callable[[re.Match], StepLabel]
    reason: str


ENGINE_RULES: tuple[EngineRule, ...] = (
    EngineRule("SGLang", "step[MODE bs=N …]",
               re.compile(r"^step\[(?P<mode>[A-Za-z_]+)(?P<fields>(?:\s[^\]]*)?)\]$"), _sglang,
               "SGLang's ModelRunner wraps each forward in step[MODE …] (sglang#23419: step[decode bs=N], "
               "step[prefill bs=N toks=T], step[mixed bs=N ext=T dec=D], step[idle]; older builds write the "
               "ForwardMode name, step[DECODE bs=32]; roofline_annotations add c=/g=/c_sq=/g_sq= fields)"),
    EngineRule("vLLM", "execute_N_context_C(…)_generation_G(…)",
               re.compile(r"^execute_(?P<n>\d+)_context_(?P<c>\d+)\(" + _SQSK.format(p="c") +
                          r"\)_generation_(?P<g>\d+)\(" + _SQSK.format(p="g") + r"\)$"), _vllm_detailed,
               "vLLM's detailed trace annotation (vllm#37524): N requests, C in context (prefill) and G in "
               "generation (decode), each with sq = its query tokens"),
    EngineRule("vLLM", "execute_new_N_cached_M",
               re.compile(r"^execute_new_(?P<new>\d+)_cached_(?P<cached>\d+)$"), _vllm_new_cached,
               "vLLM's worker annotation (gpu_worker.annotate_profile, vllm#22496): N new requests (their "
               "prefill) and M cached ones (running: decode, or a later chunk of a chunked prefill)"),
    EngineRule("ATOM", "prefill[bs=N tok=T …] / decode[bs=N …]",
               re.compile(r"^(?P<mode>prefill|decode)\[(?P<fields>[^\]]*)\]$"), _atom,
               "AMD ATOM's run_model label (ROCm/ATOM#477): prefill[bs= tok= ctx= …], decode[bs= tok= d= …]"),
)
"""Engine step annotations, tried in order; the first rule whose pattern a name matches reads it."""


PREFIXES = ("step[", "execute_", "prefill[", "decode[")
"""What every ``ENGINE_RULES`` name starts with: a cheap test before the patterns (a trace of
250,000 ``ProfilerStep#N`` names is checked once per name)."""


def rule_of(name: str) -> EngineRule | None:
    """The engine rule whose pattern matches ``name`` (None: not an engine step annotation)."""
    if not name.startswith(PREFIXES):
        return None
    for rule in ENGINE_RULES:
        if rule.rx.match(name):
            return rule
    return None


def label_of(name: str) -> StepLabel | None:
    """What an engine's step annotation says, or None where ``name`` is not one."""
    if not name.startswith(PREFIXES):
        return None
    for rule in ENGINE_RULES:
        m = rule.rx.match(name)
        if m:
            return rule.read(m)
    return None
