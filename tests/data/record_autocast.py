"""Record ``cpu_autocast_train.json.gz`` and its key_averages() sidecar (torch's own numbers).

Under ``torch.autocast`` an op re-dispatches and is recorded twice, the second its only child:
``aten::scaled_dot_product_attention`` and ``aten::cross_entropy_loss`` here, as on GPT-2
training traces. key_averages() merges such a pair (``EventList._remove_dup_nodes``); the
tests check our op table does the same. Run from the repo root:

    python tests/data/record_autocast.py
"""
from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

from tracetui.workloads.record import key_averages_path, key_averages_rows

OUT = Path(__file__).with_name("cpu_autocast_train.json.gz")


class Block(torch.nn.Module):
    """A pre-LN decoder block: attention through SDPA, a GELU MLP."""

    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def main() -> None:
    torch.manual_seed(0)
    vocab = 256
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 64), Block(), Block(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, vocab))
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randint(0, vocab, (2, 32)), torch.randint(0, vocab, (2, 32))
    got = {}

    def ready(prof) -> None:  # the active steps' events, before the profiler clears them
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "t.json"
            prof.export_chrome_trace(str(raw))
            got["doc"] = json.loads(raw.read_text())
        got["rows"] = key_averages_rows(prof)

    with profile(activities=[ProfilerActivity.CPU], with_stack=True, on_trace_ready=ready,
                 schedule=schedule(wait=0, warmup=1, active=2)) as prof:
        for _ in range(3):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).float().view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    doc = got["doc"]
    doc["tracetui"] = {"workload": "tests/data/record_autocast.py", "torch": torch.__version__,
                       "device_type": "cpu", "with_stack": True, "autocast": "bfloat16"}
    OUT.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    key_averages_path(OUT).write_text(json.dumps({"torch": torch.__version__, "rows": got["rows"]},
                                                 indent=0))


if __name__ == "__main__":
    main()
