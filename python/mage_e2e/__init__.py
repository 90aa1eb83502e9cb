"""End to end: does Mage's advantage survive inside a PyTorch model?

``python -m mage_e2e --out DIR`` (what ``cargo xtask e2e`` runs, on a GPU
with torch) measures, in one session, FP32 with TF32 off:

- a transformer MLP block (LayerNorm → Linear → GELU → Linear, plus the
  residual) at 512×768, 4096×768 and 16384×1024 tokens × features, forward
  alone and forward plus backward;
- a GNN layer (neighbor aggregation over a power-law graph, then Linear)
  and a triangle-update block (LayerNorm, two projections, the triangle
  contraction, LayerNorm), forward plus backward;
- each built from Mage's ops (``torch.ops.mage.*``), from PyTorch eager
  and from ``torch.compile`` of the PyTorch model, each also captured in a
  CUDA graph and replayed;
- per step: GPU kernel time (CUPTI records through the PyTorch profiler,
  summed over the step's kernels) and wall time (CUDA events around
  back-to-back steps), medians over rounds in rotated order; the error of
  the output and of every gradient against the same model in float64;
- a small model trained for a few hundred steps twice, with Mage's ops and
  with PyTorch FP32, from the same initialisation on the same batches,
  beside the same training in float64: the loss curves, their agreement
  (:mod:`mage_e2e.agreement`) and the time per step.

It writes ``e2e.json``; ``cargo xtask e2e`` keeps it under
``results/<namespace>/`` with ``e2e.md`` and the loss-curve figure.

Modules: :mod:`.models` (the blocks, one parameter set, a forward per
backend), :mod:`.measure` (GPU instruments), :mod:`.agreement` and
:mod:`.report` (pure: no torch, no GPU; tested in ``python/tests``).
"""
