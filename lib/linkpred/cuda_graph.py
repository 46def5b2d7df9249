"""A GatModel training step captured once as a CUDA graph and replayed (fused implementation, one fixed graph).

On a GPU a seed-sized step (20,000 nodes, 38,700 edges) is bound by launching its few hundred kernels, not by their
arithmetic: the eager fused step took 0.017 s on an H200, as long as its host needed to queue it. A captured step
queues the same kernels with one call (torch.cuda.CUDAGraph), so the GPU, not its host, sets the pace.

What a capture needs, and why this is a class of its own rather than a flag of the training loop's step:
- fixed shapes and addresses: the node features, the message-passing edges (prepared once with prepare_edges, whose
  sizes depend on the data) and the number of supervised pairs stay the same from replay to replay; new pairs of the
  same count are copied into the captured buffer;
- no wait for the GPU inside the step: GatModel's input range check runs once before the capture;
- an optimizer that keeps its step count on the GPU (AdamW(capturable=True));
- autocast without its weight cache (cache_enabled=False), as PyTorch's CUDA-graph notes ask.
Dropout masks differ at every replay: the default CUDA generator advances inside a captured graph.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.common.device import resolve_precision
from lib.linkpred.fused_gat import prepare_edges
from lib.linkpred.model import GatModel, check_inputs


class GraphedTrainStep:
    """One training step of `model` as a replayed CUDA graph: encode x [N, F] on edge_index [2, E], decode the
    supervised pairs [2, P] with the seed's dot decoder, binary cross-entropy with labels [P] (1 = edge),
    backward, AdamW(lr, weight_decay).

    step(pairs=None) -> the loss, a 0-d float32 tensor on the GPU that the next replay overwrites; `pairs` [2, P],
    when given, replaces the supervised pairs (same P) before the replay. precision: fp32 or bf16 (lib.common.device);
    fp16 needs a GradScaler, whose skipped steps a fixed graph cannot express.
    """

    def __init__(
        self,
        model: GatModel,
        x: Tensor,
        edge_index: Tensor,
        pairs: Tensor,
        labels: Tensor,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        precision: str = "fp32",
        warmup: int = 3,
    ):
        if model.cfg.gat_impl != "fused":
            raise ValueError("a CUDA-graph training step captures the fused GatModel; build it with gat_impl='fused'")
        if model.cfg.decoder != "dot":  # the other decoders read the graph's pairs with data-dependent sizes
            raise ValueError(
                f"a CUDA-graph training step decodes with the dot decoder, not {model.cfg.decoder!r}; "
                f"train that decoder with the eager step"
            )
        if x.device.type != "cuda":
            raise ValueError(
                f"a CUDA-graph training step needs its tensors on a CUDA device, not {x.device}; "
                f"train with the eager step on the CPU"
            )
        prec = resolve_precision(precision, x.device)
        if prec.grad_scaling:
            raise ValueError(f"precision {precision!r} needs loss scaling, which a captured step cannot skip; use bf16")
        check_inputs(x, edge_index, model.cfg.in_channels)
        check_inputs(x, pairs, model.cfg.in_channels)
        self.model, self.dtype = model, prec.dtype
        self.x, self.edge_index = x, edge_index
        self.pairs, self.labels = pairs.clone(), labels.float().clone()
        self.edges = prepare_edges(edge_index, x.size(0), model.cfg.gat_heads)
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, capturable=True)
        side = torch.cuda.Stream(x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):  # warm-up off the default stream, as PyTorch's capture recipe asks
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream(x.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def _step(self) -> Tensor:
        self.model.train()
        self.opt.zero_grad(set_to_none=False)
        with torch.autocast(
            "cuda", dtype=self.dtype or torch.float32, enabled=self.dtype is not None, cache_enabled=False
        ):
            z = self.model.encode(self.x, self.edge_index, self.edges)
            logits = self.model.decode(z, self.pairs).float()
        loss = F.binary_cross_entropy_with_logits(logits, self.labels)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def step(self, pairs: Tensor | None = None) -> Tensor:
        if pairs is not None:
            if pairs.shape != self.pairs.shape:
                raise ValueError(
                    f"pairs have shape {tuple(pairs.shape)} but the step was captured for {tuple(self.pairs.shape)}; "
                    f"capture another GraphedTrainStep for another pair count"
                )
            self.pairs.copy_(pairs)
        self.graph.replay()
        return self.loss
