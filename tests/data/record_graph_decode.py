"""Record ``graph_decode.json.gz``: decode steps of a small decoder under
``torch.compile(mode="reduce-overhead")``, so each step replays one CUDA graph.

Issue 41 part 2: a replayed graph's kernels carry the ``cudaGraphLaunch``'s correlation and are
attributed exactly; the tests also remove them (or their link) to check that what a graph hides
is said, not read as idle. Needs a CUDA GPU; run from the repo root (or on the device machine):

    python tests/data/record_graph_decode.py [OUT_DIR]

Each of the 5 profiled steps is ``ProfilerStep#N`` with a serving engine's own step annotation
inside it, ``step[DECODE bs=8]`` (SGLang's format), around one graph replay.
"""
from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

B, D, HEADS, CTX, LAYERS, STEPS = 8, 256, 4, 128, 2, 5


class Layer(torch.nn.Module):
    """One pre-LN decoder layer attending over a fixed-size KV cache (static shapes for graphs)."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.up, self.down = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x, k_cache, v_cache):
        q, k, v = self.qkv(self.ln1(x)).split(D, -1)
        keys, vals = torch.cat([k_cache, k], 1), torch.cat([v_cache, v], 1)
        heads = lambda z: z.view(B, -1, HEADS, D // HEADS).transpose(1, 2)  # noqa: E731
        a = F.scaled_dot_product_attention(heads(q), heads(keys), heads(vals)).transpose(1, 2).reshape(B, 1, D)
        x = x + self.out(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))

    def forward(self, x, k_cache, v_cache):
        for layer in self.layers:
            x = layer(x, k_cache, v_cache)
        return x


def main(out_dir: Path) -> Path:
    torch.manual_seed(0)
    dev = "cuda"
    model = Decoder().to(dev, torch.bfloat16).eval()
    step = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(B, 1, D, device=dev, dtype=torch.bfloat16)
    kc, vc = (torch.randn(B, CTX, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        for _ in range(5):  # compile, record the graph, replay
            step(x, kc, vc)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(STEPS):
                with record_function(f"step[DECODE bs={B}]"):
                    y = step(x, kc, vc)
                    x = y.clone()
                torch.cuda.synchronize()
                prof.step()
    tmp = Path(tempfile.mkdtemp()) / "t.json"
    prof.export_chrome_trace(str(tmp))
    out = out_dir / "graph_decode.json.gz"
    with open(tmp, "rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    return out


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent))
