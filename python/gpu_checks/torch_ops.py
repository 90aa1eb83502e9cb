"""The package's PyTorch ops (`torch.ops.mage.*`) on a GPU: opcheck,
forward and backward against float64 torch on the same inputs, torch.compile
(fullgraph, and mode="reduce-overhead"), capture in a CUDA graph and
replay on new values, PyTorch's semantics (empty tensors, leading dims,
None weight and bias, refused dtypes and CPU tensors), PyTorch's OpInfo
samples where `torch.testing._internal` imports, and the host time per call.

    PYTHONPATH=<bundle>/python python3 python/gpu_checks/torch_ops.py [--quick]

Prints one line per check (PASS, FAIL, OPEN: not computed yet by this build
of Mage, said how; INFO: a number) and exits 1 on any FAIL.

Tolerances come from the data: an output element `i` passes where
`|mage_i - ref_i| <= 8·|torch32_i - ref_i| + 8·K·u·(m_i + mean(m))`, with
`ref` float64 torch on the same inputs, `torch32` float32 torch, `m` the
element's magnitude (`Σ|terms|` of a sum of products, `|ref|` otherwise),
`K` the length of the op's longest sum, `u` float32's unit roundoff
(2^-24; 2^-11 for tanh GELU, whose kernels use the hardware tanh.approx;
2^-19 for exact GELU, whose Φ and gradient are within 1.2e-6 of their
terms against float64).
"""

import argparse
import sys
import time

RESULTS = {"PASS": 0, "FAIL": 0, "OPEN": 0}


def line(status, name, detail=""):
    if status in RESULTS:
        RESULTS[status] += 1
    print(f"{status:4} {name}{': ' + detail if detail else ''}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes, no timing")
    ap.add_argument("--no-host-time", action="store_true", help="no host time per call (host_time.py measures it alone)")
    a = ap.parse_args()

    import torch
    import mage
    import mage.nn

    if not torch.cuda.is_available():
        print("no CUDA device: this script needs a GPU")
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    ops = set(mage.ops())
    has_nt_tn = {"matmul_nt", "matmul_tn"} <= ops
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, mage {mage.COMMIT}, ops: {', '.join(sorted(ops))}")

    U32 = 2.0**-24
    U_ERF = 2.0**-19

    def check(name, out, ref, t32, mag=None, K=1, u=U32):
        """One comparison under the data-derived rule of the module doc."""
        out, ref, t32 = out.detach().double(), ref.detach().double(), t32.detach().double()
        m = ref.abs() if mag is None else mag.detach().double()
        if out.shape != ref.shape:
            line("FAIL", name, f"shape {list(out.shape)}, torch's {list(ref.shape)}")
            return False
        if ref.numel() == 0:
            line("PASS", name, "empty")
            return True
        allowed = 8 * (t32 - ref).abs() + 8 * K * u * (m + m.mean())
        err = (out - ref).abs()
        bad = ~(err <= allowed)
        ratio = float((err / allowed.clamp_min(1e-300)).max())
        if bool(bad.any()):
            i = int(bad.flatten().nonzero()[0])
            line("FAIL", name, f"{int(bad.sum())}/{ref.numel()} outside; first at {i}: {float(out.flatten()[i])} vs {float(ref.flatten()[i])} (allowed {float(allowed.flatten()[i]):.3g}); worst ratio {ratio:.3g}")
            return False
        line("PASS", name, f"max err {float(err.max()):.3g}, worst ratio {ratio:.3g}")
        return True

    def attempt(name, f):
        try:
            f()
        except Exception as e:  # every check reports, none stops the script
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if isinstance(e, mage.MageError) and "this build of Mage does not have" in first:
                line("OPEN", name, first)
            else:
                line("FAIL", name, f"{type(e).__name__}: {first[:300]}")

    def rn(*s, scale=1.0):
        return (torch.randn(*s, device=dev) * scale).requires_grad_()

    def grads(f, inputs, dtype):
        """f's output and the gradients of <f, g> (g fixed) w.r.t. inputs, computed in `dtype`."""
        xs = [t.detach().to(dtype).requires_grad_(t.requires_grad) for t in inputs]
        y = f(*xs)
        g = GOUT[tuple(y.shape)].to(dtype)
        gs = torch.autograd.grad(y, [x for x in xs if x.requires_grad], g, allow_unused=True)
        return y, gs

    GOUT = {}

    def fwd_bwd(name, mage_f, torch_f, inputs, K, u=U32, mags=None):
        """Forward and every input's gradient: Mage against float64 torch."""
        y = mage_f(*inputs)
        GOUT[tuple(y.shape)] = torch.randn(y.shape, device=dev)
        ym, gm = grads(mage_f, inputs, torch.float32)
        y64, g64 = grads(torch_f, inputs, torch.float64)
        y32, g32 = grads(torch_f, inputs, torch.float32)
        check(f"{name} forward", ym, y64, y32, None if mags is None else mags(inputs), K, u)
        for i, (a, b, c) in enumerate(zip(gm, g64, g32)):
            if a is None:
                line("FAIL", f"{name} grad {i}", "no gradient")
            else:
                check(f"{name} grad {i}", a, b, c, None, K, u)

    F = torch.nn.functional

    # ------------------------------------------------------------ forward and backward against float64
    shapes = [(7, 33), (4, 5, 768), (1024, 1024)] if not a.quick else [(7, 33), (4, 5, 768)]
    for s in shapes:
        w = s[-1]
        attempt(f"layer_norm {s}", lambda: fwd_bwd(f"layer_norm {s}", lambda x, g, b: mage.layer_norm(x, [w], g, b), lambda x, g, b: F.layer_norm(x, [w], g, b), [rn(*s), rn(w), rn(w)], w))
        attempt(f"layer_norm {s} no affine", lambda: fwd_bwd(f"layer_norm {s} no affine", lambda x: mage.layer_norm(x, [w]), lambda x: F.layer_norm(x, [w]), [rn(*s)], w))
        attempt(f"gelu tanh {s}", lambda: fwd_bwd(f"gelu tanh {s}", lambda x: mage.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [rn(*s)], 1, 2.0**-11))
        attempt(f"gelu none {s}", lambda: fwd_bwd(f"gelu none {s}", lambda x: mage.gelu(x), lambda x: F.gelu(x), [rn(*s)], 1, U_ERF))
        attempt(f"gelu none {s} tails", lambda: fwd_bwd(f"gelu none {s} tails", lambda x: mage.gelu(x, approximate="none"), lambda x: F.gelu(x, approximate="none"), [rn(*s, scale=6.0)], 1, U_ERF))
        attempt(f"bias_gelu {s}", lambda: fwd_bwd(f"bias_gelu {s}", mage.bias_gelu, lambda x, b: F.gelu(x + b, approximate="tanh"), [rn(*s), rn(w)], s[0], 2.0**-11))
    for eps in [1e-12, 1e-6, 0.1]:
        attempt(f"layer_norm (64, 256) eps={eps}", lambda: fwd_bwd(f"layer_norm (64, 256) eps={eps}", lambda x, g, b: mage.layer_norm(x, [256], g, b, eps), lambda x, g, b: F.layer_norm(x, [256], g, b, eps), [rn(64, 256, scale=0.3), rn(256), rn(256)], 256))
    attempt("layer_norm [2, 3, 4, 8] over [4, 8]", lambda: fwd_bwd("layer_norm [2, 3, 4, 8] over [4, 8]", lambda x, g, b: mage.layer_norm(x, [4, 8], g, b), lambda x, g, b: F.layer_norm(x, [4, 8], g, b), [rn(2, 3, 4, 8), rn(4, 8), rn(4, 8)], 32))
    mm_shapes = [((5, 7), (7, 3)), ((2, 3, 64, 96), (96, 80)), ((3, 33, 17), (3, 17, 9)), ((2, 1, 8, 16), (5, 16, 4)), ((16,), (16, 8)), ((8, 16), (16,))]
    for sa, sb in mm_shapes:
        k = sa[-1]
        inputs = [rn(*sa), rn(*sb)]
        if has_nt_tn:
            attempt(f"matmul {sa}x{sb}", lambda: fwd_bwd(f"matmul {sa}x{sb}", mage.matmul, torch.matmul, inputs, k, mags=lambda t: torch.matmul(t[0].detach().double().abs(), t[1].detach().double().abs())))
        else:
            def fwd_only():
                x, y = [t.detach() for t in inputs]
                check(f"matmul {sa}x{sb} forward", mage.matmul(x, y), torch.matmul(x.double(), y.double()), torch.matmul(x, y), torch.matmul(x.double().abs(), y.double().abs()), k)
            attempt(f"matmul {sa}x{sb} forward", fwd_only)
            line("OPEN", f"matmul {sa}x{sb} backward", "needs matmul_nt and matmul_tn, which this build of Mage does not have")
    for sx, sw, bias in [((5, 7), (3, 7), True), ((2, 9, 64), (48, 64), True), ((4, 32), (16, 32), False)]:
        attempt(f"linear {sx} {sw} bias={bias}", lambda: fwd_bwd(
            f"linear {sx} {sw} bias={bias}", mage.linear, F.linear, [rn(*sx), rn(*sw)] + ([rn(sw[0])] if bias else []), sx[-1],
            mags=lambda t: F.linear(t[0].detach().double().abs(), t[1].detach().double().abs(), None if len(t) < 3 else t[2].detach().double().abs())))
    def tri_ref(A, B):
        return torch.einsum("...ikc,...jkc->...ijc", A, B)
    for s in [(9, 9, 4), (2, 16, 16, 8)] + ([] if a.quick else [(128, 128, 32)]):
        attempt(f"triangle {s}", lambda: fwd_bwd(f"triangle {s}", mage.triangle, tri_ref, [rn(*s), rn(*s)], s[-2], mags=lambda t: tri_ref(t[0].detach().double().abs(), t[1].detach().double().abs())))

    def random_graph(n, e, heavy=False):
        dst = torch.randint(0, max(1, n // 50) if heavy else n, (e,), device=dev).sort().values
        counts = torch.bincount(dst, minlength=n)
        rowptr = torch.cat([torch.zeros(1, dtype=torch.int64, device=dev), counts.cumsum(0)]).to(torch.int32)
        indices = torch.randint(0, n, (e,), device=dev, dtype=torch.int32)
        return rowptr, indices

    def nb_ref(rowptr, indices, n):
        def f(x, w):
            rows = torch.repeat_interleave(torch.arange(n, device=dev), (rowptr[1:] - rowptr[:-1]).long())
            x2 = x.reshape(n, -1)
            y = torch.zeros_like(x2).index_add(0, rows, w[:, None] * x2[indices.long()])
            return y.reshape(x.shape)
        return f

    for n, width, e, heavy in [(7, 9, 23, False), (4096, 64, 65536, False), (4096, 64, 65536, True), (300, 5, 0, False)]:
        def nb():
            rowptr, indices = random_graph(n, e, heavy)
            g = mage.Graph(rowptr, indices, n)
            ref = nb_ref(rowptr, indices, n)
            deg = int((rowptr[1:] - rowptr[:-1]).max()) if e else 1
            fwd_bwd(f"neighbor {n}x{width}x{e}{' heavy' if heavy else ''} ({g.stage(width)})", lambda x, w: mage.neighbor(g, x, w), ref, [rn(n, width), rn(e)], max(deg, 1))
        attempt(f"neighbor {n}x{width}x{e}", nb)

    # ------------------------------------------------------------ opcheck
    from torch.library import opcheck

    def oc(name, op, args, kwargs=None):
        def f():
            opcheck(op, args, kwargs or {})
            line("PASS", f"opcheck {name}")
        attempt(f"opcheck {name}", f)

    for s in [(3, 16), (2, 5, 40)]:
        oc(f"layer_norm {s}", torch.ops.mage.layer_norm, (rn(*s), [s[-1]], rn(s[-1]), rn(s[-1])))
        oc(f"layer_norm {s} None", torch.ops.mage.layer_norm, (rn(*s), [s[-1]]))
        oc(f"gelu {s}", torch.ops.mage.gelu, (rn(*s),), {"approximate": "tanh"})
        oc(f"gelu none {s}", torch.ops.mage.gelu, (rn(*s),))
        oc(f"bias_gelu {s}", torch.ops.mage.bias_gelu, (rn(*s), rn(s[-1])))
        oc(f"layer_norm_backward {s}", torch.ops.mage.layer_norm_backward, (torch.randn(s, device=dev), torch.randn(s, device=dev), [s[-1]], torch.randn(s[-1], device=dev)))
        oc(f"bias_gelu_backward {s}", torch.ops.mage.bias_gelu_backward, (torch.randn(s, device=dev), torch.randn(s, device=dev), torch.randn(s[-1], device=dev)))
        oc(f"gelu_erf_backward {s}", torch.ops.mage.gelu_erf_backward, (torch.randn(s, device=dev), torch.randn(s, device=dev), torch.randn(s[-1], device=dev)))
    for sa, sb in [((5, 7), (7, 3)), ((2, 6, 8), (8, 4))]:
        grad = has_nt_tn
        oc(f"matmul {sa}x{sb}", torch.ops.mage.matmul, (torch.randn(sa, device=dev, requires_grad=grad), torch.randn(sb, device=dev, requires_grad=grad)))
    if has_nt_tn:
        oc("linear", torch.ops.mage.linear, (rn(2, 3, 8), rn(5, 8), rn(5)))
        oc("matmul_nt", torch.ops.mage.matmul_nt, (rn(6, 8), rn(5, 8)))
        oc("matmul_tn", torch.ops.mage.matmul_tn, (rn(8, 6), rn(8, 5)))
    else:
        line("OPEN", "opcheck linear, matmul_nt, matmul_tn", "need matmul_nt and matmul_tn, which this build of Mage does not have")
    for s in [(6, 6, 4), (2, 5, 5, 3)]:
        oc(f"triangle {s}", torch.ops.mage.triangle, (rn(*s), rn(*s)))
        oc(f"triangle_backward {s}", torch.ops.mage.triangle_backward, (torch.randn(s, device=dev), torch.randn(s, device=dev), torch.randn(s, device=dev)))
    rowptr, indices = random_graph(50, 300)
    graph = mage.Graph(rowptr, indices, 50)
    for width in [4, 7]:
        oc(f"neighbor width {width}", torch.ops.mage.neighbor, (graph.rowptr, graph.indices, rn(50, width), rn(300), graph.id))
        oc(f"neighbor_backward width {width}", torch.ops.mage.neighbor_backward, (torch.randn(50, width, device=dev), graph.rowptr, graph.indices, torch.randn(50, width, device=dev), torch.randn(300, device=dev), graph.id))

    # ------------------------------------------------------------ torch.compile, CUDA graphs
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = mage.nn.LayerNorm(64)
            self.act = mage.nn.GELU(approximate="tanh")
            self.fc = mage.nn.Linear(64, 32) if has_nt_tn else None
            self.bias = torch.nn.Parameter(torch.randn(64))

        def forward(self, x):
            y = mage.bias_gelu(self.act(self.ln(x)), self.bias)
            return self.fc(y) if self.fc is not None else y

    if not has_nt_tn:
        line("OPEN", "compile model: mage.nn.Linear left out", "needs matmul_nt, which this build of Mage does not have")
    model = Block().to(dev)

    def compiled_full():
        x = torch.randn(8, 16, 64, device=dev, requires_grad=True)
        eager = model(x)
        ge = torch.autograd.grad(eager.sum(), [x] + list(model.parameters()))
        cm = torch.compile(model, fullgraph=True)
        out = cm(x)
        gc = torch.autograd.grad(out.sum(), [x] + list(model.parameters()))
        same = torch.equal(out, eager) and all(torch.equal(p, q) for p, q in zip(ge, gc))
        line("PASS" if same else "FAIL", "torch.compile(fullgraph=True) of LayerNorm, GELU, bias_gelu" + (", Linear" if has_nt_tn else ""), "forward and gradients equal eager Mage bit for bit" if same else f"max diff {float((out - eager).abs().max())}")
    attempt("torch.compile fullgraph", compiled_full)

    def graph_capture():
        x = torch.randn(8, 16, 64, device=dev)
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(2):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g), torch.no_grad():
            y = model(x)
        ok = True
        for _ in range(3):
            x.copy_(torch.randn_like(x))
            g.replay()
            with torch.no_grad():
                ok &= torch.equal(y, model(x))
        line("PASS" if ok else "FAIL", "torch.cuda.graph capture and replay on new values", "replays equal eager calls" if ok else "a replay differs from eager")
    attempt("cuda graph", graph_capture)

    def graphed_train_step():
        x = torch.randn(8, 16, 64, device=dev, requires_grad=True)
        gm = torch.cuda.make_graphed_callables(model, (x,))
        ok = True
        for _ in range(3):
            xn = torch.randn_like(x).requires_grad_()
            out = gm(xn)
            gx, = torch.autograd.grad(out.sum(), xn)
            xe = xn.detach().clone().requires_grad_()
            ge, = torch.autograd.grad(model(xe).sum(), xe)
            ok &= torch.equal(gx, ge)
        line("PASS" if ok else "FAIL", "make_graphed_callables: forward and backward captured", "gradients equal eager" if ok else "a gradient differs")
    attempt("graphed forward and backward", graphed_train_step)

    def neighbor_capture():
        rowptr, indices = random_graph(4096, 65536)
        g = mage.Graph(rowptr, indices, 4096)
        x, w = torch.randn(4096, 64, device=dev), torch.randn(65536, device=dev)
        mage.neighbor(g, x, w)
        cg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cg):
            y = mage.neighbor(g, x, w)
        x.copy_(torch.randn_like(x))
        cg.replay()
        ok = torch.equal(y, mage.neighbor(g, x, w))
        line("PASS" if ok else "FAIL", f"neighbor captured in a CUDA graph ({g.stage(64)})", "replay equals eager" if ok else "replay differs")
        rowptr2 = g.rowptr
        rowptr2.add_(0)
        try:
            mage.neighbor(g, x, w)
            line("FAIL", "neighbor after an in-place write to rowptr", "not refused")
        except mage.MageError as e:
            line("PASS", "neighbor after an in-place write to rowptr is refused", str(e))
    attempt("neighbor capture", neighbor_capture)

    def reduce_overhead():
        cm = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        ok = True
        with torch.no_grad():
            for _ in range(4):
                x = torch.randn(8, 16, 64, device=dev)
                ok &= torch.equal(cm(x), model(x))
        line("PASS" if ok else "FAIL", 'torch.compile(mode="reduce-overhead")', "4 calls equal eager" if ok else "a call differs")
    attempt("reduce-overhead", reduce_overhead)

    # ------------------------------------------------------------ semantics
    def refused(name, f, want):
        try:
            f()
            line("FAIL", name, "not refused")
        except mage.MageError as e:
            line("PASS" if want in str(e) and "\n" not in str(e) else "FAIL", name, str(e))

    def empty_cases():
        for name, m, t in [
            ("layer_norm [0, 8]", lambda: mage.layer_norm(torch.empty(0, 8, device=dev), [8]), lambda: F.layer_norm(torch.empty(0, 8, device=dev), [8])),
            ("gelu [3, 0]", lambda: mage.gelu(torch.empty(3, 0, device=dev), approximate="tanh"), lambda: F.gelu(torch.empty(3, 0, device=dev), approximate="tanh")),
            ("gelu none [3, 0]", lambda: mage.gelu(torch.empty(3, 0, device=dev)), lambda: F.gelu(torch.empty(3, 0, device=dev))),
            ("matmul [0, 4]x[4, 3]", lambda: mage.matmul(torch.empty(0, 4, device=dev), torch.randn(4, 3, device=dev)), lambda: torch.empty(0, 3, device=dev)),
            ("matmul [3, 0]x[0, 2] (zeros)", lambda: mage.matmul(torch.empty(3, 0, device=dev), torch.empty(0, 2, device=dev)), lambda: torch.zeros(3, 2, device=dev)),
            ("triangle [0, 0, 4]", lambda: mage.triangle(torch.empty(0, 0, 4, device=dev), torch.empty(0, 0, 4, device=dev)), lambda: torch.empty(0, 0, 4, device=dev)),
        ]:
            got, want = m(), t()
            line("PASS" if got.shape == want.shape and torch.equal(got, want) else "FAIL", f"empty {name}", f"shape {list(got.shape)}")
    attempt("empty tensors", empty_cases)
    def misaligned_views():
        # Views starting 4 bytes into their storage: the ops copy them to a
        # block of their own; a launch on preallocated tensors refuses them.
        flat = torch.randn(64 * 768 + 1, device=dev)
        v = flat[1:].view(64, 768)
        w, b = torch.randn(768, device=dev), torch.randn(768, device=dev)
        ok = torch.equal(mage.layer_norm(v, [768], w, b), mage.layer_norm(v.clone(), [768], w, b))
        ok &= torch.equal(mage.gelu(v, approximate="tanh"), mage.gelu(v.clone(), approximate="tanh"))
        ok &= torch.equal(mage.bias_gelu(v, flat[1:769]), mage.bias_gelu(v.clone(), flat[1:769].clone()))
        line("PASS" if ok else "FAIL", "views off a 16-byte boundary (layer_norm, gelu, bias_gelu)", "equal to the same calls on copies" if ok else "a call differs from its copy's")
        refused("launch on a view off a 16-byte boundary refused", lambda: mage.launch("gelu", "current", [v, w], torch.empty(64, 768, device=dev)), "not a multiple of 16 bytes")
    attempt("misaligned views", misaligned_views)
    def plain_path():
        # The plain path: `Launcher.run_plain` launches where a call is the
        # common one, and declines (None) everything else, which then takes
        # the full path. The package's functions take it with no `_call`.
        T = mage._torch_ops
        x, w, b = torch.randn(64, 768, device=dev), torch.randn(768, device=dev), torch.randn(768, device=dev)
        ln = T._launcher("layernorm", "layer_norm")
        got = ln.run_plain((x, w, b))
        same = got is not None and torch.equal(got[0], ln.run([x, w, b], 0, torch.cuda.current_stream().cuda_stream)[0])
        line("PASS" if same else "FAIL", "run_plain launches a plain call", "the bits of run's" if same else f"got {got}")

        class Sub(torch.Tensor):
            pass

        flat = torch.randn(64 * 768 + 1, device=dev)
        declined = [
            ("an input that wants a gradient", (x.clone().requires_grad_(), w, b), None),
            ("a CPU input", (x.cpu(), w, b), None),
            ("a float64 input", (x.double(), w, b), None),
            ("a non-contiguous input", (torch.randn(768, 64, device=dev).t(), w, b), None),
            ("a view off a 16-byte boundary", (flat[1:].view(64, 768), w, b), None),
            ("an empty input", (torch.empty(0, 768, device=dev), w, b), None),
            ("a tensor subclass", (x.as_subclass(Sub), w, b), None),
            ("a weight of another width", (x, torch.randn(767, device=dev), b), None),
            ("two inputs of three", (x, w), None),
            ("a 3-D input", (x.view(8, 8, 768), w, b), None),
            ("a torch.device mode", (x, w, b), lambda: torch.device("cuda")),
        ]
        from torch.utils.flop_counter import FlopCounterMode
        declined.append(("a dispatch mode (FlopCounterMode)", (x, w, b), lambda: FlopCounterMode(display=False)))
        for name, inputs, mode in declined:
            if mode is None:
                out = ln.run_plain(inputs)
            else:
                with mode():
                    out = ln.run_plain(inputs)
            line("PASS" if out is None else "FAIL", f"run_plain declines {name}", "None" if out is None else "it launched")
        with torch.no_grad():
            out = ln.run_plain((x.clone().requires_grad_(), w, b))
        line("PASS" if out is not None else "FAIL", "run_plain launches under no_grad on an input that has requires_grad", "")

        full = []
        saved = T._call
        T._call = lambda *args: full.append(args[0]) or saved(*args)
        try:
            x3 = torch.randn(4, 16, 768, device=dev)
            wn = torch.randn(256, 768, device=dev)
            bm = torch.randn(768, 96, device=dev)
            mage.layer_norm(x, [768], w, b, 0.5)  # a first call checks eps = 0.5
            cases = [
                ("layer_norm", lambda: mage.layer_norm(x, [768], w, b), lambda: torch.ops.mage.layer_norm(x, [768], w, b)),
                ("layer_norm [4, 16, 768]", lambda: mage.layer_norm(x3, [768], w, b), lambda: torch.ops.mage.layer_norm(x3, [768], w, b)),
                ("layer_norm no affine", lambda: mage.layer_norm(x, [768]), lambda: torch.ops.mage.layer_norm(x, [768])),
                ("layer_norm eps=0.5", lambda: mage.layer_norm(x, [768], w, b, 0.5), lambda: torch.ops.mage.layer_norm(x, [768], w, b, 0.5)),
                ("gelu", lambda: mage.gelu(x), lambda: torch.ops.mage.gelu(x)),
                ("gelu tanh [4, 16, 768]", lambda: mage.gelu(x3, approximate="tanh"), lambda: torch.ops.mage.gelu(x3, approximate="tanh")),
                ("bias_gelu", lambda: mage.bias_gelu(x, b), lambda: torch.ops.mage.bias_gelu(x, b)),
                ("linear no bias", lambda: mage.linear(x, wn), lambda: torch.ops.mage.linear(x, wn)),
                ("matmul", lambda: mage.matmul(x, bm), lambda: torch.ops.mage.matmul(x, bm)),
            ]
            for name, ours, theirs in cases:
                full.clear()
                got, want = ours(), theirs()
                ok = not full and got.shape == want.shape and torch.equal(got, want)
                line("PASS" if ok else "FAIL", f"mage.{name} by the plain path", "the bits of torch.ops.mage's" if ok else (f"took the full path ({full})" if full else "bits differ"))
            full.clear()
            xg = x.clone().requires_grad_()
            y = mage.layer_norm(xg, [768], w, b)
            ok = full == ["layer_norm"] and y.grad_fn is not None
            line("PASS" if ok else "FAIL", "mage.layer_norm with requires_grad takes the full path (autograd)", f"{full}")
        finally:
            T._call = saved
    attempt("the plain path", plain_path)
    x = torch.randn(4, 8, device=dev)
    refused("float64 refused", lambda: mage.layer_norm(x.double(), [8]), "torch.float64")
    refused("bfloat16 refused", lambda: mage.gelu(x.bfloat16(), approximate="tanh"), "torch.bfloat16")
    refused("CPU tensor refused", lambda: mage.matmul(x.cpu(), x.cpu().t()), "is on cpu")
    refused("eps nan refused", lambda: mage.layer_norm(x, [8], eps=float("nan")), "eps = nan; it must be a finite number")
    refused("GELU approximate='fast' refused", lambda: mage.gelu(x, approximate="fast"), "it must be 'none' or 'tanh'")
    def strided():
        xt = torch.randn(8, 4, device=dev).t()
        check("layer_norm of a transposed (non-contiguous) input", mage.layer_norm(xt, [8]), F.layer_norm(xt.double(), [8]), F.layer_norm(xt, [8]), None, 8)
    attempt("non-contiguous", strided)
    def bad_graph():
        rowptr = torch.tensor([0, 2, 1, 3], dtype=torch.int32, device=dev)
        refused("a graph whose rowptr decreases refused", lambda: mage.Graph(rowptr, torch.zeros(3, dtype=torch.int32, device=dev), 3), "decreases")
        refused("an index past num_nodes refused", lambda: mage.Graph(torch.tensor([0, 1, 2, 3], dtype=torch.int32, device=dev), torch.tensor([0, 3, 1], dtype=torch.int32, device=dev), 3), "below n = 3")
    attempt("bad graphs", bad_graph)

    # ------------------------------------------------------------ OpInfo
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as e:  # expecttest and friends may be missing
        line("OPEN", "OpInfo samples", f"torch.testing._internal does not import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); pip install expecttest to run them")
        op_db = None
    if op_db is not None:
        mapping = {"nn.functional.layer_norm": lambda x, *a, **k: mage.layer_norm(x, *a, **k),
                   "nn.functional.gelu": lambda x, *a, **k: mage.gelu(x, *a, **k),
                   "nn.functional.linear": lambda x, *a, **k: mage.linear(x, *a, **k),
                   "mm": lambda x, *a, **k: mage.matmul(x, *a, **k),
                   "matmul": lambda x, *a, **k: mage.matmul(x, *a, **k)}
        def cast(v, dtype):
            """A sample's argument as a fresh leaf in `dtype` (requires_grad kept)."""
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                return v.detach().to(dtype).requires_grad_(v.requires_grad)
            if isinstance(v, (list, tuple)):
                return type(v)(cast(t, dtype) for t in v)
            return v

        def call(f, sample, dtype):
            """f on the sample cast to `dtype`: the output and its leaves that need a gradient."""
            x = cast(sample.input, dtype)
            args = [cast(t, dtype) for t in sample.args]
            kwargs = {k: cast(t, dtype) for k, t in sample.kwargs.items()}
            leaves = [t for t in [x, *args, *kwargs.values()] if isinstance(t, torch.Tensor) and t.requires_grad]
            return f(x, *args, **kwargs), leaves

        for info in [o for o in op_db if o.name in mapping and o.variant_test_name == ""]:
            counts = {"ran, forward and backward correct": 0, "refused as torch refuses": 0, "refused as unsupported": 0, "failed": 0}
            def one(sample):
                args, kwargs = sample.args, sample.kwargs
                try:
                    got, leaves = call(mapping[info.name], sample, torch.float32)
                except mage.MageError as e:
                    msg = str(e)
                    try:
                        call(info.op, sample, torch.float32)
                        torch_ok = True
                    except Exception:
                        torch_ok = False
                    if not torch_ok:
                        counts["refused as torch refuses"] += 1
                    elif "not computed by Mage's kernels" in msg or "does not have" in msg:
                        counts["refused as unsupported"] += 1
                    else:
                        counts["failed"] += 1
                        line("FAIL", f"OpInfo {info.name}", f"{msg} (torch computes it)")
                    return
                ref, leaves64 = call(info.op, sample, torch.float64)
                t32, leaves32 = call(info.op, sample, torch.float32)
                shapes = [list(sample.input.shape)] + [list(t.shape) for t in args if isinstance(t, torch.Tensor)]
                k = sample.input.shape[-1] if sample.input.dim() else 1
                u = 2.0**-11 if "gelu" in info.name else U32
                label = f"OpInfo {info.name} {shapes} {kwargs if kwargs else ''}".rstrip()
                ok = check(f"{label} forward", got, ref, t32, None, max(k, 1), u)
                if ok and leaves and got.numel() > 0:
                    # Every gradient's longest sum is at most the largest dim of any input.
                    K = max([1] + [d for sh in shapes for d in sh])
                    g = torch.randn(got.shape, device=dev)
                    gm = torch.autograd.grad(got, leaves, g, allow_unused=True)
                    g64 = torch.autograd.grad(ref, leaves64, g.double(), allow_unused=True)
                    g32 = torch.autograd.grad(t32, leaves32, g, allow_unused=True)
                    for i, (a_, b_, c_) in enumerate(zip(gm, g64, g32)):
                        if b_ is None:
                            continue
                        if a_ is None:
                            line("FAIL", f"{label} grad {i}", "no gradient")
                            ok = False
                        else:
                            ok = check(f"{label} grad {i}", a_, b_, c_, None, K, u) and ok
                counts["ran, forward and backward correct" if ok else "failed"] += 1

            seen = set()
            samples = list(info.sample_inputs(dev, torch.float32, requires_grad=True)) + list(info.reference_inputs(dev, torch.float32, requires_grad=True))
            for sample in samples:
                # sample_inputs and reference_inputs overlap: each distinct case once.
                key = repr([(tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) else t for t in [sample.input, *sample.args]] + sorted((k, repr(v.shape) if isinstance(v, torch.Tensor) else repr(v)) for k, v in sample.kwargs.items()))
                if key in seen:
                    continue
                seen.add(key)
                try:
                    one(sample)
                except Exception as e:  # one sample's error is its FAIL; the rest still run
                    counts["failed"] += 1
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    line("FAIL", f"OpInfo {info.name} {list(sample.input.shape)}", f"{type(e).__name__}: {first}")
            status = "FAIL" if counts["failed"] else "PASS"
            line(status, f"OpInfo {info.name} samples", f"{len(seen)} distinct of sample_inputs and reference_inputs: " + ", ".join(f"{k} {v}" for k, v in counts.items()))

    # ------------------------------------------------------------ host time per call
    if not a.quick and not a.no_host_time:
        xs = torch.randn(64, 768, device=dev)
        gamma, beta = torch.ones(768, device=dev), torch.zeros(768, device=dev)
        for name, f in [("mage.layer_norm", lambda: mage.layer_norm(xs, [768], gamma, beta)),
                        ("torch.ops.mage.layer_norm", lambda: torch.ops.mage.layer_norm(xs, [768], gamma, beta)),
                        ("F.layer_norm (torch)", lambda: F.layer_norm(xs, [768], gamma, beta)),
                        ("mage.gelu tanh", lambda: mage.gelu(xs, approximate="tanh")),
                        ("mage.gelu none", lambda: mage.gelu(xs))]:
            for _ in range(50):
                f()
            torch.cuda.synchronize()
            times = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(200):
                    f()
                times.append((time.perf_counter() - t0) / 200 * 1e6)
                torch.cuda.synchronize()
            times.sort()
            line("INFO", f"host time per call {name} 64x768", f"median {times[3]:.2f} us of 7 runs of 200")

    print(f"{RESULTS['PASS']} passed, {RESULTS['FAIL']} failed, {RESULTS['OPEN']} open")
    return 1 if RESULTS["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
