"""``python -m mage_e2e --out e2e.json [--quick] [--only mlp,gnn,triangle,train]``

Runs the workloads of :mod:`mage_e2e` and writes the evidence, rewritten
after every workload so that what ran survives a stop (``complete`` says
whether everything did). Progress goes to stderr, one line per step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

PARTS = ("mlp", "gnn", "triangle", "train")


def say(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


def write(path: str, evidence: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(evidence, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m mage_e2e", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the evidence file (e2e.json)")
    p.add_argument("--quick", action="store_true", help="a smoke run: small shapes, few samples (not evidence)")
    p.add_argument("--only", default=",".join(PARTS), help=f"comma separated parts of {', '.join(PARTS)}")
    p.add_argument("--seed", type=int, default=20261203)
    a = p.parse_args(argv)
    a.only = [s for s in a.only.split(",") if s]
    unknown = [s for s in a.only if s not in PARTS]
    if unknown:
        p.error(f"--only {','.join(unknown)}: the parts are {', '.join(PARTS)}")
    return a


def environment(settings) -> dict:
    import torch

    import mage

    p = torch.cuda.get_device_properties(0)
    try:
        import triton

        triton_version = triton.__version__
    except Exception as e:  # noqa: BLE001
        triton_version = f"unavailable: {e}"
    return {"python": sys.version.split()[0], "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "triton": triton_version, "platform": platform.platform(), "mage_commit": mage.COMMIT,
            "gpu": {"name": p.name, "capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count},
            "torch_settings": settings,
            "compile": {"mode": "default", "fullgraph": True, "dynamic": False}}


class Bench:
    """One workload: the PyTorch model, its Mage twin and float64 twin, a
    step per implementation and mode, measured and checked."""

    def __init__(self, inst, quick: bool):
        self.inst = inst
        self.quick = quick
        self.sizes = dict(warmup=3, calls=3, rounds=2) if quick else dict(warmup=5, calls=10, rounds=5)

    def run(self, name: str, shape: str, make, inputs, grads_of, modes=("forward", "forward+backward"), extra=None):
        """``make(backend)`` builds the block; ``inputs`` are the FP32
        inputs (those in ``grads_of`` take gradients)."""
        import torch

        from .measure import graphed, relative_errors
        from .models import twin

        base = make("torch").cuda()
        models = {"torch": base, "mage": twin(base, make, "mage")}
        m64 = twin(base, make, "torch", torch.float64)
        params = {k: [p for _, p in m.named_parameters()] for k, m in models.items()}
        pnames = [n for n, _ in base.named_parameters()]
        ins = [t.detach().clone().requires_grad_(i in grads_of) for i, t in enumerate(inputs)]
        ins64 = [t.detach().double().requires_grad_(i in grads_of) for i, t in enumerate(inputs)]
        y0 = base(*ins)
        dy = torch.randn_like(y0)
        del y0
        names = {"forward": ["y"], "forward+backward": ["y"] + [f"d_input{i}" for i in grads_of] + [f"d_{n}" for n in pnames]}

        def step_of(model, params_, ins_, dy_, mode):
            wrt = [ins_[i] for i in grads_of] + params_
            if mode == "forward":
                return lambda: (model(*ins_),)

            def step():
                y = model(*ins_)
                return (y, *torch.autograd.grad(y, wrt, dy_))

            return step

        ref = {mode: [t.detach() for t in step_of(m64, list(m64.parameters()), ins64, dy.double(), mode)()] for mode in modes}
        compiled = {}
        failures = []
        for backend in ("torch", "mage"):
            try:
                say(f"{name} {shape}: torch.compile of the {backend} model")
                t0 = time.perf_counter()
                compiled[backend] = torch.compile(models[backend], fullgraph=True, dynamic=False)
                for mode in modes:
                    step_of(compiled[backend], params[backend], ins, dy, mode)()
                torch.cuda.synchronize()
                say(f"{name} {shape}: compiled ({time.perf_counter() - t0:.1f} s)")
            except Exception as e:  # noqa: BLE001
                compiled.pop(backend, None)
                failures.append({"impl": f"{backend}_compile", "error": f"{type(e).__name__}: {e}".splitlines()[0][:400]})
                say(f"{name} {shape}: {backend}_compile failed: {failures[-1]['error']}")
        rows = []
        for mode in modes:
            steps = {}
            for backend in ("torch", "mage"):
                steps[backend] = step_of(models[backend], params[backend], ins, dy, mode)
                if backend in compiled:
                    steps[f"{backend}_compile"] = step_of(compiled[backend], params[backend], ins, dy, mode)
            for impl in list(steps):
                try:
                    steps[f"{impl}+graph"] = graphed(steps[impl])
                except Exception as e:  # noqa: BLE001
                    failures.append({"impl": f"{impl}+graph", "mode": mode, "error": f"{type(e).__name__}: {e}".splitlines()[0][:400]})
                    say(f"{name} {shape} {mode}: {impl}+graph failed: {failures[-1]['error']}")
            errors = {}
            for impl, step in steps.items():
                out = step()
                errors[impl] = relative_errors(out, ref[mode], names[mode])
                del out
            say(f"{name} {shape} {mode}: measuring {len(steps)} implementations")
            timed = self.inst.measure(steps, progress=lambda m: say(f"{name} {shape} {mode}: {m}"), **self.sizes)
            for impl in timed:
                timed[impl]["errors"] = errors[impl]
                timed[impl]["worst_error"] = max(errors[impl].values())
            rows.append({"name": name, "shape": shape, "mode": mode, "impls": timed, **(extra or {})})
            del steps
        del compiled, models
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return rows, failures


def mlp(bench, quick, seed):
    import torch

    from .models import MLPBlock

    shapes = [(512, 768)] if quick else [(512, 768), (4096, 768), (16384, 1024)]
    rows, failures = [], []
    for tokens, d in shapes:
        torch.manual_seed(seed)
        x = torch.randn(tokens, d, device="cuda")
        r, f = bench.run("mlp", f"{tokens}x{d}", lambda b, d=d: MLPBlock(d, backend=b), [x], grads_of=[0])
        rows += r
        failures += f
    return rows, failures


def gnn(bench, quick, seed):
    import torch

    from .models import GNNLayer, power_law_graph

    nodes, feats = (4096, 64) if quick else (65536, 128)
    rowptr, indices, stats = power_law_graph(nodes, 16.0, 2.2, seed, "cuda")
    torch.manual_seed(seed)
    x = torch.randn(nodes, feats, device="cuda")
    w = torch.rand(stats["edges"], device="cuda")

    def make(b):
        m = GNNLayer(feats, feats, backend=b)
        m.set_graph(rowptr, indices, nodes)
        return m

    return bench.run("gnn", f"{nodes}x{feats}x{stats['edges']}", make, [x, w], grads_of=[0, 1], modes=("forward+backward",),
                     extra={"graph": stats})


def triangle(bench, quick, seed):
    import torch

    from .models import TriangleBlock

    n, c_z, c = (64, 64, 32) if quick else (256, 128, 64)
    torch.manual_seed(seed)
    z = torch.randn(n, n, c_z, device="cuda")
    return bench.run("triangle", f"{n}x{c_z}x{c}", lambda b: TriangleBlock(c_z, c, backend=b), [z], grads_of=[0],
                     modes=("forward+backward",))


def train(quick, seed):
    """The same training three times (Mage FP32, PyTorch FP32, PyTorch
    float64): loss curves, agreement, time per step."""
    import torch
    import torch.nn.functional as F

    from .agreement import loss_agreement, median
    from .models import Net, teacher, twin

    d, blocks, out, tokens = 256, 2, 16, 1024
    steps = 40 if quick else 300
    lr = 1e-3
    torch.manual_seed(seed)
    make = lambda b: Net(d, blocks, out, backend=b)  # noqa: E731
    base = make("torch").cuda()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    xs = [torch.randn(tokens, d, device="cuda", generator=gen) for _ in range(steps)]
    ys64 = [teacher(x.double(), out, seed) for x in xs]
    runs = {}
    for label, backend, dtype in (("mage", "mage", torch.float32), ("torch", "torch", torch.float32),
                                  ("float64", "torch", torch.float64)):
        say(f"train: {label} ({steps} steps)")
        model = twin(base, make, backend, dtype)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        batches = [(x.to(dtype), y.to(dtype)) for x, y in zip(xs, ys64)]
        losses, events = [], []
        torch.cuda.synchronize()
        for x, y in batches:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            e.record()
            losses.append(loss.detach())
            events.append((s, e))
        torch.cuda.synchronize()
        per_step = [s.elapsed_time(e) * 1e3 for s, e in events]
        skip = min(10, steps // 4)
        runs[label] = {"loss": [float(v) for v in torch.stack(losses).tolist()], "step_us": median(per_step[skip:]),
                       "step_us_skipped": skip}
        del model, opt, batches
    agreement = loss_agreement(runs["mage"]["loss"], runs["torch"]["loss"], runs["float64"]["loss"])
    say(f"train: Mage against float64 {agreement['mage_vs_float64']:.3g}, PyTorch FP32 against float64 "
        f"{agreement['torch_vs_float64']:.3g}, bound {agreement['bound']:.3g}: {'agree' if agreement['agree'] else 'DISAGREE'}")
    return {"model": {"d": d, "blocks": blocks, "out": out, "tokens": tokens, "params": sum(p.numel() for p in base.parameters())},
            "task": "regression on tanh(x·W1)·W2 (a fixed random teacher), MSE loss, fresh N(0,1) batch each step",
            "optimizer": {"name": "Adam", "lr": lr}, "steps": steps, "runs": runs, "agreement": agreement,
            "step_time": "CUDA events around each training step (forward, loss, backward, Adam), median after the first steps"}


def main(argv=None) -> int:
    a = parse(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: the end-to-end run needs a CUDA GPU with torch (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    import mage  # noqa: F401  (registers torch.ops.mage)

    from .measure import Instruments, fp32_settings

    settings = fp32_settings()
    evidence = {"complete": False, "quick": a.quick, "parts": a.only, "seed": a.seed, "environment": environment(settings),
                "instruments": {"kernel": "CUPTI kernel records through torch.profiler, summed per step, median over rounds",
                                "wall": "CUDA events around back-to-back steps, per step, median over rounds"},
                "workloads": [], "training": None, "failures": []}
    write(a.out, evidence)
    inst = Instruments()
    bench = Bench(inst, a.quick)
    parts = {"mlp": lambda: mlp(bench, a.quick, a.seed), "gnn": lambda: gnn(bench, a.quick, a.seed),
             "triangle": lambda: triangle(bench, a.quick, a.seed)}
    ok = True
    for part in a.only:
        try:
            if part == "train":
                evidence["training"] = train(a.quick, a.seed)
            else:
                rows, failures = parts[part]()
                evidence["workloads"] += rows
                evidence["failures"] += failures
        except Exception as e:  # noqa: BLE001
            ok = False
            evidence["failures"].append({"part": part, "error": f"{type(e).__name__}: {e}".splitlines()[0][:400]})
            traceback.print_exc()
        write(a.out, evidence)
    evidence["complete"] = ok
    write(a.out, evidence)
    say(f"{'complete' if ok else 'INCOMPLETE'}: {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
