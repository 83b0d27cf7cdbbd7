"""The ladder's modules: nn.Linear, the GeGLU MLP in eager / compile / triton / fused forms, and a
small decoder-only transformer run as a training step (forward, loss, backward, AdamW step)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

IMPLS = ("eager", "compile", "triton", "fused", "fused-compile", "fused-graphs")
"""Implementations a workload can run as; not every workload has every one (see WORKLOADS).
``fused-compile``: the fused module (its ``tracetui::geglu_mlp`` op) inside ``torch.compile``;
``fused-graphs``: the fused step captured as CUDA graphs (``torch.cuda.make_graphed_callables``
for a training step, one ``torch.cuda.CUDAGraph`` for a forward). CUDA only, like ``fused``."""
COMPILED = ("compile", "fused-compile")
"""Impls built through ``torch.compile`` (they take ``--mode``)."""


def module_act(impl: str) -> str:
    """The GeGLU activation form an impl builds: fused for every fused rung, else as named."""
    return "fused" if impl.startswith("fused") else impl if impl == "triton" else "eager"


class GeGLU(nn.Module):
    """GeGLU feed-forward block: ``down(gelu_tanh(gate(x)) * up(x))``, no biases.

    ``act="fused"``: gate and up are one interleaved parameter (``gate_up_proj``,
    ``tracetui.kernels.gate_up.GateUpProj``) read in place by the fused kernels, so a training
    step copies no weights; the state dict still shows ``gate_proj.weight`` / ``up_proj.weight``
    (views), so checkpoints load into either form."""

    def __init__(self, dim: int, hidden: int, act: str = "eager"):
        super().__init__()
        self.act = act
        if act == "fused":
            from tracetui.kernels.gate_up import GateUpProj, join_state, split_state
            self.gate_up_proj = GateUpProj(dim, hidden)
            names = ("gate_up_proj", "gate_proj", "up_proj")
            self._register_state_dict_hook(lambda mod, state, prefix, meta: split_state(state, prefix, *names))
            self._register_load_state_dict_pre_hook(
                lambda state, prefix, *rest: join_state(state, prefix, *names))
        else:
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act == "triton":
            from tracetui.kernels.fused import geglu_autograd
            return self.down_proj(geglu_autograd(self.gate_proj(x), self.up_proj(x)))
        if self.act == "fused":
            return self.down_proj(self.gate_up_proj(x))
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``F.scaled_dot_product_attention`` (fused kernels)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    """GPT-2's feed-forward block: ``proj(gelu_tanh(fc(x)))``, hidden = 4 x dim."""

    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm decoder block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Decoder(nn.Module):
    """GPT-style language model: token + learned position embeddings, ``layers`` blocks, final
    LayerNorm, LM head (untied); ``forward(idx, targets)`` returns the cross-entropy loss."""

    def __init__(self, vocab: int, seq: int, dim: int, heads: int, layers: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _backward(loss: torch.Tensor) -> int:
    loss.backward()
    return 0


def _backward_forked(loss: torch.Tensor) -> torch.jit.Future[int]:
    return torch.jit.fork(_backward, loss)


_BACKWARD_ON_THREAD = []


def backward_on_thread(loss: torch.Tensor) -> None:
    """``loss.backward()`` on one of torch's inter-op threads, with the caller's thread-local state.

    On CUDA, autograd runs backward on its own device thread (``pt_autograd_0``) and propagates
    the profiler to it. On the CPU it runs on the calling thread, so CPU recordings would not have
    the thread layout of GPU training. ``torch.jit.fork`` inside TorchScript is the one public path
    that runs work on a torch-owned thread *and* carries the profiler's thread-local state there
    (ops on a plain Python thread are not recorded). The inter-op pool is set to one thread if it
    has not started yet. It adds a few small events per step:
    ``_backward_forked`` and ``defaults`` on the caller, ``<forked function>`` on the worker.
    """
    if not _BACKWARD_ON_THREAD:
        import warnings
        try:  # one inter-op thread: every backward lands on the same thread, like pt_autograd_0
            torch.set_num_interop_threads(1)
        except RuntimeError:  # the pool already started in this process; any of its threads will do
            pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation notice
            _BACKWARD_ON_THREAD.append(torch.jit.script(_backward_forked))
    # wait in Python, not in TorchScript: a TorchScript wait resumes the script on the worker, and
    # its scope's end is then stamped after the caller's next Python frame has begun
    _BACKWARD_ON_THREAD[0](loss).wait()


@dataclass
class Workload:
    """A runnable rung: its module factory, input shape, the impls it supports, and whether a step
    is a training step (forward, loss, backward, optimizer) or one inference forward."""
    name: str
    sizes: dict
    impls: tuple
    label: str = field(default="")
    train: bool = False

    def build(self, impl: str, device: str, dtype: torch.dtype,
              mode: str | None = None) -> tuple[nn.Module, tuple]:
        """The module (compiled with ``mode`` for ``impl == "compile"``) and its inputs."""
        s = self.sizes
        if self.name == "linear":
            model: nn.Module = nn.Linear(s["in_features"], s["out_features"], bias=True)
            inputs: tuple = (torch.randn(s["batch"], s["in_features"]),)
        elif self.name == "transformer":
            model = Decoder(s["vocab"], s["seq"], s["dim"], s["heads"], s["layers"])
            tokens = torch.randint(0, s["vocab"], (s["batch"], s["seq"] + 1))
            inputs = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())  # next-token targets
        else:
            model = GeGLU(s["dim"], s["hidden"], act=module_act(impl))
            inputs = (torch.randn(s["batch"], s["seq"], s["dim"]),)
        model = model.to(device=device, dtype=dtype)
        model = model.train() if self.train else model.eval()
        inputs = tuple(x.to(device=device, dtype=dtype if x.is_floating_point() else None) for x in inputs)
        if impl in COMPILED:
            model = torch.compile(model, mode=mode)
        return model, inputs

    def stepper(self, impl: str, device: str, dtype: torch.dtype, mode: str | None = None,
                backward_thread: bool = False) -> Callable[[], None]:
        """One step as a callable: a forward (the caller holds ``torch.no_grad()`` for inference
        rungs), or forward + loss + backward + AdamW step."""
        model, inputs = self.build(impl, device, dtype, mode)
        if impl == "fused-graphs":
            model = graphed(model, inputs, self.train)
        if not self.train:
            return lambda: model(*inputs)
        if self.name == "mlp":  # the MLP returns activations: a scalar loss to train on
            net, loss_of = model, (lambda *a: net(*a).float().square().mean())
        else:
            loss_of = model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
        backward = backward_on_thread if backward_thread else (lambda loss: loss.backward())

        def train_step() -> None:
            loss = loss_of(*inputs)
            backward(loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return train_step


def graphed(model: nn.Module, inputs: tuple, train: bool) -> Callable:
    """``model`` as CUDA graphs: for training, ``torch.cuda.make_graphed_callables`` (a forward and
    a backward graph; the parameters' gradients are accumulated outside them, so the optimizer
    runs as usual); for inference one graph of the forward, replayed on the same (static) inputs.
    Warm-up runs on a side stream first, as CUDA graph capture needs."""
    if not torch.cuda.is_available() or any(not x.is_cuda for x in inputs):
        raise ValueError("CUDA graphs need a CUDA device")
    if train:
        return torch.cuda.make_graphed_callables(model, inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            model(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out = model(*inputs)

    def replay(*_args):
        graph.replay()
        return out
    return replay


TRANSFORMER_SIZES = {
    # GPT-2-small width, half its depth: a few MB per recorded step with Python stacks
    "cuda": {"batch": 8, "seq": 1024, "dim": 768, "heads": 12, "layers": 6, "vocab": 50304},
    # small enough for CPU tests (a train step in tens of milliseconds)
    "cpu": {"batch": 4, "seq": 64, "dim": 128, "heads": 4, "layers": 4, "vocab": 1024},
}
"""Default transformer sizes per device type (``--layers``, ``--dim``, ... override them)."""


def workloads(device: str | None = None, train_mlp: bool = False, **overrides) -> dict[str, Workload]:
    """The ladder with default sizes; ``overrides`` replace sizes of the workloads that have them.

    ``train_mlp``: the MLP runs a training step (forward, mean-square loss, backward, AdamW) in
    every impl, ``fused`` through its fused backward (``tracetui.kernels.fused``).

    ``device`` picks the transformer's defaults (``TRANSFORMER_SIZES``; CPU sizes unless "cuda").
    """
    lin = {"batch": 1024, "in_features": 32, "out_features": 64}
    mlp = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072}
    tfm = dict(TRANSFORMER_SIZES["cuda" if device == "cuda" else "cpu"])
    for d in (lin, mlp, tfm):
        d.update({k: v for k, v in overrides.items() if k in d and v is not None})
    return {
        "linear": Workload("linear", lin, ("eager", "compile"), "linear_fwd"),
        "mlp": (Workload("mlp", mlp, IMPLS, "mlp_train", train=True) if train_mlp
                else Workload("mlp", mlp, IMPLS, "mlp_fwd")),
        "transformer": Workload("transformer", tfm, ("eager", "compile"), "", train=True),
    }
