"""A CPU training loop recorded with profile_memory=True, with a planted leak: the memory tests'
input (torch emits [memory] instants for CPU tensors too)."""
from __future__ import annotations

from pathlib import Path

LEAK_ELEMS = 1000
"""Elements of the float32 tensor the ``Leaky`` module keeps alive per call (4000 bytes)."""


def record_memory_trace(out: Path, steps: int = 3, width: int = 64) -> Path:
    """Record ``steps`` training steps (forward with nn.Module scopes, backward, SGD) of a small
    MLP whose ``Leaky`` layer appends a fresh tensor to a list every call, never freed."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    kept: list = []

    class Leaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(width, width)

        def forward(self, x):
            kept.append(torch.full((LEAK_ELEMS,), 1.0))  # the planted leak
            return torch.relu(self.fc(x))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, width), nn.ReLU(), Leaky(), nn.Linear(width, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 32)
    out = Path(out)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True, with_modules=True, schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out))) as prof:
        for _ in range(steps + 1):
            opt.zero_grad(set_to_none=True)
            model(x).sum().backward()
            opt.step()
            prof.step()
    return out
