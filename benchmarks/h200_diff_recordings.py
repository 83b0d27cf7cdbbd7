"""The H200 recordings behind tests/data/diff_h200_*.json.gz (the diff's tests on real GPU work).

    OUT=DIR python3 benchmarks/h200_diff_recordings.py mlp tfm_eager tfm_compile tfm_max

Plain torch, no tracetui import (it runs on the lent machine's image). Recorded 2026-12-04 on one
H200 with torch 2.11.0+cu130, bf16: a 4-layer GPT-style decoder (vocab 8192, seq 256, dim 512,
8 heads, batch 8) as a train step (forward, cross-entropy, backward on the autograd thread, AdamW)
eager, torch.compile and max-autotune-no-cudagraphs; and the GeGLU MLP (64 x 128 x 768, hidden
3072) forward with max-autotune-no-cudagraphs. Profiler: CPU+CUDA, record_shapes, with_modules,
with_stack, schedule wait 1 / warmup 1 / active 2 after 3 warm-up steps. Files are written as
``OUT/<name>.json.gz``; the tests' copies are renamed ``diff_h200_<...>``.
"""
import gzip, os, shutil, sys, time
import torch
from torch import nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, schedule
OUT = os.environ["OUT"]

class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.qkv, self.proj = h, nn.Linear(d, 3 * d), nn.Linear(d, d)
    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        return self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c))

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), Attention(d, h), nn.LayerNorm(d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

class Decoder(nn.Module):
    def __init__(self, vocab=8192, seq=256, d=512, h=8, layers=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return F.cross_entropy(self.head(self.ln_f(x)).flatten(0, 1), targets.flatten())

class GeGLU(nn.Module):
    def __init__(self, dim=768, hidden=3072):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))

def rec(name, step, n_warm=3):
    t = time.time()
    for _ in range(n_warm):
        step()
    torch.cuda.synchronize()
    print(name, "warm", time.time() - t, flush=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 record_shapes=True, with_modules=True, with_stack=True) as prof:
        for _ in range(4):
            step()
            prof.step()
    p = f"/tmp/{name}.json"
    prof.export_chrome_trace(p)
    with open(p, "rb") as f, gzip.open(f"{OUT}/{name}.json.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    print(name, "done", time.time() - t, os.path.getsize(f"{OUT}/{name}.json.gz"), flush=True)

which = sys.argv[1:]
dev = "cuda"
if "mlp" in which:
    torch.manual_seed(0)
    m = GeGLU().to(dev, torch.bfloat16).eval()
    x = torch.randn(64, 128, 768, device=dev, dtype=torch.bfloat16)
    c = torch.compile(m, mode="max-autotune-no-cudagraphs")
    with torch.no_grad():
        rec("mlp_max_autotune", lambda: c(x))
for mode in [w for w in which if w.startswith("tfm_")]:
    torch.manual_seed(0)
    model = Decoder().to(dev, torch.bfloat16)
    run = model if mode == "tfm_eager" else torch.compile(model, mode=None if mode == "tfm_compile" else "max-autotune-no-cudagraphs")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tok = torch.randint(0, 8192, (8, 257), device=dev)
    idx, tgt = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    def step():
        run(idx, tgt).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    rec(mode, step)
