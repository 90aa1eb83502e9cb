"""Host time per op call from Python, and where it goes (GPU only).

    PYTHONPATH=<bundle>/python python3 python/gpu_checks/host_time.py

Wall time per call on the host (``time.perf_counter`` around 200 calls,
median of 9 rounds in which every case runs once, in an order rotated
each round, after 50 warm-up calls of each; the GPU runs behind, the
queue never fills at these sizes), for PyTorch's own calls and each layer
of a Mage call: the extension's ``Launcher.run`` alone, a prepared call
(``mage.prepare``), a custom op that does nothing (the cost of
``torch.library.custom_op`` itself, with and without autograd) and the
package's ops, with and without ``requires_grad`` (without it, their plain
path: ``Launcher.run_plain``). Then a profile of the
package's ``layer_norm`` with gradients, by function.
"""

import cProfile
import io
import pstats
import statistics
import sys
import time


def per_call(cases, calls=200, rounds=9) -> dict:
    """Median host time per call of each case, µs: `rounds` rounds, each
    timing `calls` calls of every case, the cases in an order rotated by
    one each round (so that no case always runs first, or after the same
    neighbour), after 50 warm-up calls of each."""
    import torch

    for _, f in cases:
        for _ in range(50):
            f()
    torch.cuda.synchronize()
    times = {name: [] for name, _ in cases}
    for r in range(rounds):
        for name, f in cases[r % len(cases):] + cases[:r % len(cases)]:
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    import torch
    import torch.nn.functional as F
    from torch import Tensor

    import mage

    @torch.library.custom_op("mage_host_time::noop", mutates_args=())
    def noop(x: Tensor) -> Tensor:
        return torch.empty_like(x)

    @noop.register_fake
    def _(x):
        return torch.empty_like(x)

    noop.register_autograd(lambda ctx, g: g, setup_context=lambda ctx, inputs, output: None)

    dev = torch.device("cuda")
    torch.manual_seed(0)
    x = torch.randn(64, 768, device=dev)
    xg = x.clone().requires_grad_()
    g, b = torch.randn(768, device=dev), torch.randn(768, device=dev)
    w = torch.randn(3072, 768, device=dev)
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream
    ln = mage.Launcher("layernorm")
    prepared = mage.prepare("layernorm", "current", [x, g, b], y)
    cases = [
        ("torch.empty_like", lambda: torch.empty_like(x)),
        ("F.layer_norm", lambda: F.layer_norm(x, [768], g, b)),
        ("F.layer_norm, requires_grad", lambda: F.layer_norm(xg, [768], g, b)),
        ("F.gelu tanh", lambda: F.gelu(x, approximate="tanh")),
        ("F.linear 64x768 by 3072x768", lambda: F.linear(x, w)),
        ("custom_op doing nothing", lambda: noop(x)),
        ("custom_op doing nothing, requires_grad", lambda: noop(xg)),
        ("torch.empty", lambda: torch.empty((64, 768), dtype=torch.float32, device=dev)),
        ("x.new_empty", lambda: x.new_empty((64, 768))),
        ("Launcher.plan layernorm (the plan cache)", lambda: ln.plan([[64, 768], [768], [768]])),
        ("mage.prepare(...) call", prepared),
        ("Launcher.run layernorm", lambda: ln.run([x, g, b], 0, stream)),
        ("Launcher.run_plain layernorm (the plain path's one call)", lambda: ln.run_plain((x, g, b))),
        ("mage.layer_norm", lambda: mage.layer_norm(x, [768], g, b)),
        ("mage.layer_norm, requires_grad", lambda: mage.layer_norm(xg, [768], g, b)),
        ("mage.bias_gelu", lambda: mage.bias_gelu(x, b)),
        ("mage.gelu tanh", lambda: mage.gelu(x, approximate="tanh")),
        ("F.gelu", lambda: F.gelu(x)),
        ("mage.gelu", lambda: mage.gelu(x)),
        ("mage.layer_norm, no affine", lambda: mage.layer_norm(x, [768])),
        ("F.layer_norm, no affine", lambda: F.layer_norm(x, [768])),
        ("mage.linear 64x768 by 3072x768", lambda: mage.linear(x, w)),
    ]
    measured = per_call(cases)
    for name, _ in cases:
        print(f"INFO host time per call {name} 64x768: median {measured[name]:.2f} us of 9 rounds of 200 calls", flush=True)
    for ours, theirs in [("mage.layer_norm", "F.layer_norm"), ("mage.layer_norm, requires_grad", "F.layer_norm, requires_grad"),
                         ("mage.layer_norm, no affine", "F.layer_norm, no affine"), ("mage.gelu", "F.gelu"), ("mage.gelu tanh", "F.gelu tanh"),
                         ("mage.linear 64x768 by 3072x768", "F.linear 64x768 by 3072x768")]:
        r = measured[ours] / measured[theirs]
        print(f"INFO host time ratio {ours} / {theirs}: {r:.2f} ({'within' if r <= 1 else 'over'} PyTorch's own call)")
    print(f"INFO Launcher(layernorm) plan and bind cache entries after the runs: {ln.cache_sizes()}")
    for label, f in (("mage.layer_norm, requires_grad", lambda: mage.layer_norm(xg, [768], g, b)),
                     ("Launcher.run layernorm", lambda: ln.run([x, g, b], 0, stream))):
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            f()
        prof.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
        print(f"== profile of 2000 calls of {label}\n{s.getvalue()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
