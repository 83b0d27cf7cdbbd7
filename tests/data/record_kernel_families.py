"""Record one short trace that launches the kernel families the taxonomy must name (run on a GPU).

    python3 tests/data/record_kernel_families.py tests/data/kernel_families_h200.json.gz

SDPA on each backend (flash, efficient, cuDNN, math), convolution, batch/layer/group/RMS norm,
softmax and cross-entropy, GEMMs (linear, bmm, _scaled_mm, _grouped_mm), optimizers, and
torch.compile'd blocks (Inductor pointwise/reduction/norm kernels, a Triton GEMM template, flex
attention), each forward and backward under a ``record_function`` label. A family the build
does not support is skipped with a note on stderr. The kernel names it yields are labelled by
hand in tests/data/kernel_corpus.tsv.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

dev, bf = "cuda", torch.bfloat16


def sdpa(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(2, 8, 256, 64, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
    with sdpa_kernel(getattr(SDPBackend, backend)):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()


def conv(dtype, channels_last):
    m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 32, 3, stride=2), torch.nn.AdaptiveAvgPool2d(1)).to(dev, dtype)
    x = torch.randn(8, 16, 32, 32, device=dev, dtype=dtype, requires_grad=True)
    if channels_last:
        m, x = m.to(memory_format=torch.channels_last), x.detach().to(memory_format=torch.channels_last).requires_grad_()
    m(x).sum().backward()


def norms():
    x = torch.randn(64, 512, device=dev, dtype=bf, requires_grad=True)
    w = torch.ones(512, device=dev, dtype=bf, requires_grad=True)
    (F.layer_norm(x, (512,), w) + F.rms_norm(x, (512,), w)).sum().backward()
    y = torch.randn(4, 32, 8, 8, device=dev, dtype=bf, requires_grad=True)
    F.group_norm(y, 8).sum().backward()


def softmaxes():
    x = torch.randn(64, 1000, device=dev, dtype=bf, requires_grad=True)
    t = torch.randint(0, 1000, (64,), device=dev)
    (F.softmax(x, -1).sum() + F.cross_entropy(x.float(), t)).backward()


def gemms():
    lin = torch.nn.Linear(512, 1024, device=dev, dtype=bf)
    x = torch.randn(8, 128, 512, device=dev, dtype=bf, requires_grad=True)
    lin(x).sum().backward()
    torch.bmm(torch.randn(16, 64, 128, device=dev, dtype=bf), torch.randn(16, 128, 64, device=dev, dtype=bf))


def scaled_mm():
    a = torch.randn(128, 256, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(128, 256, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=dev)
    torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=bf)


def grouped_mm():
    a = torch.randn(256, 128, device=dev, dtype=bf)
    b = torch.randn(4, 128, 64, device=dev, dtype=bf).transpose(-2, -1).contiguous().transpose(-2, -1)
    offs = torch.tensor([64, 128, 192, 256], device=dev, dtype=torch.int32)
    torch._grouped_mm(a, b, offs=offs)


def optim():
    p = [torch.nn.Parameter(torch.randn(256, 256, device=dev)) for _ in range(4)]
    for q in p:
        q.grad = torch.randn_like(q)
    torch.optim.AdamW(p, fused=True).step()
    torch.optim.AdamW(p, foreach=True).step()
    emb = torch.nn.Embedding(1000, 64, device=dev)
    F.dropout(emb(torch.randint(0, 1000, (32, 16), device=dev)), 0.1).sum().backward()


class Block(torch.nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.ln, self.qkv, self.out, self.mlp = (torch.nn.LayerNorm(d), torch.nn.Linear(d, 3 * d),
                                                 torch.nn.Linear(d, d), torch.nn.Linear(d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).view(b, t, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(a)
        return x + F.gelu(self.mlp(x))


COMPILED = {}


def compiled_block():
    if "block" not in COMPILED:
        COMPILED["block"] = (torch.compile(Block().to(dev, bf)),
                             torch.randn(4, 128, 256, device=dev, dtype=bf, requires_grad=True))
    m, x = COMPILED["block"]
    m(x).sum().backward()


def compiled_template_mm():
    if "mm" not in COMPILED:
        import torch._inductor.config as cfg
        cfg.max_autotune_gemm_backends = "TRITON"
        f = torch.compile(lambda a, b: torch.relu(a @ b), mode="max-autotune-no-cudagraphs")
        COMPILED["mm"] = (f, torch.randn(256, 256, device=dev, dtype=bf), torch.randn(256, 256, device=dev, dtype=bf))
    f, a, b = COMPILED["mm"]
    f(a, b)


def flex():
    if "flex" not in COMPILED:
        from torch.nn.attention.flex_attention import flex_attention
        COMPILED["flex"] = torch.compile(flex_attention)
    q, k, v = (torch.randn(2, 4, 256, 64, device=dev, dtype=bf) for _ in range(3))
    COMPILED["flex"](q, k, v)


def comms():
    import torch.distributed as dist
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)
    dist.all_gather_into_tensor(torch.empty(1 << 20, device=dev), t)


FAMILIES = {
    "sdpa_flash": lambda: sdpa("FLASH_ATTENTION"), "sdpa_efficient": lambda: sdpa("EFFICIENT_ATTENTION"),
    "sdpa_cudnn": lambda: sdpa("CUDNN_ATTENTION"), "sdpa_math": lambda: sdpa("MATH"),
    "conv_bf16": lambda: conv(bf, False), "conv_fp32": lambda: conv(torch.float32, False),
    "conv_bf16_nhwc": lambda: conv(bf, True), "norms": norms, "softmax": softmaxes, "gemms": gemms,
    "scaled_mm": scaled_mm, "grouped_mm": grouped_mm, "optim": optim, "compiled_block": compiled_block,
    "compiled_template_mm": compiled_template_mm, "flex_attention": flex, "comms": comms,
}


def main(out: str) -> None:
    ok = {}
    for name, fn in FAMILIES.items():  # warm up (compile, autotune, cuDNN plans) outside the recording
        try:
            fn(), fn()
            torch.cuda.synchronize()
            ok[name] = fn
        except Exception as e:  # noqa: BLE001 - a family this build lacks is reported, not fatal
            print(f"skip {name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for name, fn in ok.items():
            with record_function(name):
                fn()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "t.json")
        prof.export_chrome_trace(raw)
        with open(raw) as f:
            trace = json.load(f)
    trace["tracetui"] = {"workload": "kernel_families", "families": list(ok), "torch": torch.__version__,
                         "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(),
                         "command": "python3 tests/data/record_kernel_families.py"}
    with gzip.open(out, "wt") as f:
        json.dump(trace, f)
    print(f"recorded {len(ok)}/{len(FAMILIES)} families -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
