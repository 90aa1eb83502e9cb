"""The package's PyTorch ops, their parts that need no GPU: schemas, fake
(meta) implementations, tracing by torch.compile with no graph break,
refusals, and `mage.nn`'s parameters and state_dict. Skipped where torch
is not installed; the GPU half is `gpu_checks/torch_ops.py`."""

import importlib.util
import os
import unittest

HAVE_TORCH = importlib.util.find_spec("torch") is not None
REQUIRED = os.environ.get("MAGE_REQUIRE_EXTENSION") == "1"

mage = torch = None
if HAVE_TORCH:
    try:
        import torch
        import mage
        import mage.nn
    except ImportError:  # pragma: no cover - the harness test builds it
        mage = None

SCHEMAS = {
    "layer_norm": "mage::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05) -> Tensor",
    "gelu": 'mage::gelu(Tensor input, str approximate="none") -> Tensor',
    "bias_gelu": "mage::bias_gelu(Tensor input, Tensor bias) -> Tensor",
    "linear": "mage::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
    "matmul": "mage::matmul(Tensor input, Tensor other) -> Tensor",
    "triangle": "mage::triangle(Tensor a, Tensor b) -> Tensor",
    "neighbor": "mage::neighbor(Tensor rowptr, Tensor indices, Tensor x, Tensor w, SymInt graph_id) -> Tensor",
}


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TorchOps(unittest.TestCase):
    def setUp(self):
        if mage is None:
            if REQUIRED:
                self.fail("the package `mage` did not import")
            self.skipTest("the extension module `mage._C` is not built (cargo test builds it)")

    def fake(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        return FakeTensorMode()

    def test_the_ops_have_pytorchs_signatures(self):
        for name, schema in SCHEMAS.items():
            self.assertEqual(str(getattr(torch.ops.mage, name).default._schema), schema, name)
        for name in ["layer_norm_backward", "bias_gelu_backward", "gelu_erf_backward", "triangle_backward", "neighbor_backward", "matmul_nt", "matmul_tn"]:
            self.assertTrue(hasattr(torch.ops.mage, name), name)
        self.assertIs(mage.layer_norm, mage._torch_ops.layer_norm)

    def test_fake_implementations_give_torchs_shapes(self):
        with self.fake():
            x = torch.empty(2, 3, 8)
            self.assertEqual(mage.layer_norm(x, [8]).shape, (2, 3, 8))
            self.assertEqual(mage.layer_norm(x, [3, 8], torch.empty(3, 8), None).shape, (2, 3, 8))
            self.assertEqual(mage.gelu(x, approximate="tanh").shape, (2, 3, 8))
            self.assertEqual(mage.gelu(x).shape, (2, 3, 8))
            self.assertEqual(mage.bias_gelu(x, torch.empty(8)).shape, (2, 3, 8))
            self.assertEqual(mage.linear(x, torch.empty(5, 8), torch.empty(5)).shape, (2, 3, 5))
            self.assertEqual(mage.linear(x, torch.empty(5, 8)).shape, (2, 3, 5))
            for a, b, want in [((2, 3, 8), (8, 4), (2, 3, 4)), ((7, 1, 3, 8), (5, 8, 4), (7, 5, 3, 4)), ((8,), (8, 4), (4,)), ((3, 8), (8,), (3,)), ((8,), (8,), ())]:
                self.assertEqual(tuple(mage.matmul(torch.empty(a), torch.empty(b)).shape), want, (a, b))
            self.assertEqual(mage.triangle(torch.empty(2, 5, 5, 3), torch.empty(2, 5, 5, 3)).shape, (2, 5, 5, 3))
            r, i = torch.empty(5, dtype=torch.int32), torch.empty(9, dtype=torch.int32)
            self.assertEqual(torch.ops.mage.neighbor(r, i, torch.empty(4, 2, 3), torch.empty(9), 1).shape, (4, 2, 3))
            dx, dw, db = torch.ops.mage.layer_norm_backward(x, x, [8], None)
            self.assertEqual((dx.shape, dw.shape, db.shape), ((2, 3, 8), (8,), (8,)))
            for backward in [torch.ops.mage.bias_gelu_backward, torch.ops.mage.gelu_erf_backward]:
                dx, db = backward(x, x, torch.empty(8))
                self.assertEqual((dx.shape, db.shape), ((2, 3, 8), (8,)))
            # Empty tensors keep torch's shapes.
            self.assertEqual(mage.layer_norm(torch.empty(0, 8), [8]).shape, (0, 8))
            self.assertEqual(mage.linear(torch.empty(0, 8), torch.empty(5, 8)).shape, (0, 5))

    def test_torch_compile_traces_a_model_with_no_graph_break(self):
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        model = torch.nn.Sequential(mage.nn.LayerNorm(8), mage.nn.GELU(approximate="tanh"), mage.nn.GELU(), mage.nn.Linear(8, 4))
        compiled = torch.compile(model, backend=backend, fullgraph=True)
        with self.assertRaises(mage.MageError) as e:  # traced, then run on the CPU: refused
            compiled(torch.randn(2, 8))
        self.assertIn("Mage's kernels run on CUDA tensors", str(e.exception))
        self.assertEqual(len(graphs), 1)
        code = graphs[0].code
        for op in ["mage.layer_norm", "mage.gelu", "mage.linear"]:
            self.assertIn(op, code)

    def test_the_backward_graph_holds_mages_gradient_ops(self):
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(x, w, b, bias):
            y = mage.layer_norm(x, [8], w, b)
            y = mage.bias_gelu(y, bias)
            y = mage.gelu(y)
            return torch.autograd.grad(y.sum(), (x, w, b, bias))

        with self.fake() as mode:
            args = [mode.from_tensor(torch.randn(s, requires_grad=True)) for s in [(3, 8), (8,), (8,), (8,)]]
            gm = make_fx(f)(*args)
        code = gm.code
        self.assertIn("mage.layer_norm_backward", code)
        self.assertIn("mage.bias_gelu_backward", code)
        self.assertIn("mage.gelu_erf_backward", code)

    def check_refusals(self, cases):
        for f, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(mage.MageError) as e:
                    f()
                text = str(e.exception)
                self.assertTrue(text.startswith(msg), text)
                self.assertNotIn("\n", text)

    def test_refusals_are_one_line_and_say_what_is_supported(self):
        x = torch.randn(4, 8)
        self.check_refusals([
            (lambda: mage.layer_norm(x, [8]), "mage.layer_norm: input is on cpu; Mage's kernels run on CUDA tensors (.cuda())"),
            (lambda: mage.gelu(x, approximate="tanh"), "mage.gelu: input is on cpu"),
            (lambda: mage.gelu(x), "mage.gelu: input is on cpu"),
            (lambda: mage.matmul(x, torch.randn(8, 2)), "mage.matmul: input is on cpu"),
            (lambda: mage.layer_norm(x.double(), [8]), "mage.layer_norm: input is on cpu"),
        ])
        with self.fake():
            fx = torch.empty(4, 8)
            self.check_refusals([
                (lambda: mage.layer_norm(fx.double(), [8]), "mage.layer_norm: input is torch.float64; Mage's kernels compute in torch.float32 only (no cast is made: .float() first)"),
                (lambda: mage.layer_norm(fx, [8], eps=float("nan")), "mage.layer_norm: eps = nan; it must be a finite number"),
                (lambda: mage.gelu(fx, approximate="fast"), "mage.gelu: approximate='fast'; it must be 'none' or 'tanh'"),
                (lambda: mage.gelu(fx.double()), "mage.gelu: input is torch.float64"),
                (lambda: mage.gelu(fx.half(), approximate="tanh"), "mage.gelu: input is torch.float16"),
                (lambda: mage.linear(fx, torch.empty(5, 7)), "mage.linear: input [4, 8] and weight [5, 7] cannot be multiplied"),
                (lambda: mage.layer_norm(fx, [7]), "mage.layer_norm: normalized_shape [7] is not the trailing shape"),
                (lambda: mage.bias_gelu(fx, torch.empty(7)), "mage.bias_gelu: bias is [7]"),
            ])
            # Exact-erf GELU, PyTorch's default, is computed (gelu_erf).
            self.assertEqual(mage.gelu(fx).shape, (4, 8))
            self.assertEqual(mage.gelu(fx, approximate="none").shape, (4, 8))
            # Any finite eps is taken: the kernels' parameter.
            mage.layer_norm(torch.empty(2, 8), [8], eps=1e-5)
            mage.layer_norm(torch.empty(2, 8), [8], eps=1e-12)

    def test_a_missing_op_is_one_line_naming_it(self):
        if "matmul_nt" in mage.ops():
            self.skipTest("this build has matmul_nt")
        with self.assertRaises(mage.MageError) as e:
            mage._torch_ops._launcher("matmul_nt", "linear")
        self.assertTrue(str(e.exception).startswith("mage.linear needs Mage's op `matmul_nt`, which this build of Mage does not have (its ops: matmul,"), str(e.exception))

    def test_a_graph_on_the_cpu_or_of_another_dtype_is_refused(self):
        r, i = torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32)
        with self.assertRaises(mage.MageError) as e:
            mage.Graph(r, i, 2)
        self.assertEqual(str(e.exception), "mage.Graph: rowptr is on cpu; Mage's kernels run on CUDA tensors (.cuda())")
        with self.assertRaises(mage.MageError) as e:
            mage.neighbor("graph", torch.randn(2, 3), torch.randn(2))
        self.assertIn("it must be a mage.Graph", str(e.exception))

    def test_nn_modules_are_drop_in(self):
        pairs = [
            (torch.nn.LayerNorm(16), mage.nn.LayerNorm(16)),
            (torch.nn.LayerNorm([4, 16], elementwise_affine=True, bias=False), mage.nn.LayerNorm([4, 16], bias=False)),
            (torch.nn.LayerNorm(16, elementwise_affine=False), mage.nn.LayerNorm(16, elementwise_affine=False)),
            (torch.nn.Linear(16, 8), mage.nn.Linear(16, 8)),
            (torch.nn.Linear(16, 8, bias=False), mage.nn.Linear(16, 8, bias=False)),
            (torch.nn.GELU(), mage.nn.GELU()),
            (torch.nn.GELU(approximate="tanh"), mage.nn.GELU(approximate="tanh")),
        ]
        for theirs, ours in pairs:
            with self.subTest(module=repr(theirs)):
                self.assertIsInstance(ours, type(theirs))
                self.assertEqual(list(theirs.state_dict()), list(ours.state_dict()))
                self.assertEqual([(n, p.shape) for n, p in theirs.named_parameters()], [(n, p.shape) for n, p in ours.named_parameters()])
                self.assertEqual(theirs.extra_repr(), ours.extra_repr())
                for p in theirs.parameters():
                    torch.nn.init.normal_(p)
                ours.load_state_dict(theirs.state_dict())
                theirs.load_state_dict(ours.state_dict())
                for a, b in zip(theirs.state_dict().values(), ours.state_dict().values()):
                    self.assertTrue(torch.equal(a, b))
        self.assertEqual(mage.nn.LayerNorm(16).eps, 1e-5)
        self.assertEqual(mage.nn.GELU().approximate, "none")


class StandIn:
    """A `Launcher` that computes each Mage op with float32 torch on the
    CPU: what the Python side does around a launch (flattening, batching,
    which gradient op gets which tensors) checked with no GPU."""

    taken = []

    def __init__(self, op):
        self.op = op

    def run_plain(self, inputs, constants=None):
        """`Launcher.run_plain`'s rule less its CUDA device: None unless every
        input is a plain, contiguous, non-empty float32 tensor that wants no
        gradient, of shapes the op takes; `taken` records the launches."""
        grad = torch.is_grad_enabled()
        for t in inputs:
            if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.dtype is not torch.float32 or not t.is_contiguous() or t.numel() == 0 or (grad and t.requires_grad):
                return None
        try:
            mage.dims_from_shapes(self.op, [list(t.shape) for t in inputs])
        except mage.MageError:
            return None
        StandIn.taken.append(self.op)
        return self.run(list(inputs), 0, 0, "current", None, constants)

    def run(self, inputs, device, stream, stage="current", graph=None, constants=None):
        F = torch.nn.functional
        eps = dict(constants or []).get("eps", 1e-5)

        def ln(x, g, b):
            return F.layer_norm(x, [x.shape[-1]], g, b, eps)

        def ln_backward(x, g, dy):
            mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
            rstd = (var + eps).rsqrt()
            xhat = (x - mu) * rstd
            dxhat = dy * g
            dx = rstd * (dxhat - dxhat.mean(-1, keepdim=True) - xhat * (dxhat * xhat).mean(-1, keepdim=True))
            return [dx, (dy * xhat).sum(0), dy.sum(0)]

        def gelu(x, b):
            return F.gelu(x + b, approximate="tanh")

        def gelu_backward(x, b, dy):
            c, k = (2 / torch.pi) ** 0.5, 0.044715
            z = x + b
            t = torch.tanh(c * (z + k * z**3))
            dx = dy * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * k * z * z))
            return [dx, dx.sum(0)]

        def gelu_erf(x, b):
            return F.gelu(x + b)

        def gelu_erf_backward(x, b, dy):
            z = x + b
            dx = dy * (0.5 * (1 + torch.erf(z / 2**0.5)) + z * torch.exp(-0.5 * z * z) / (2 * torch.pi) ** 0.5)
            return [dx, dx.sum(0)]

        def tri(a, b):
            return torch.einsum("ikc,jkc->ijc", a, b)

        def rows_of(rowptr):
            return torch.repeat_interleave(torch.arange(rowptr.shape[0] - 1), (rowptr[1:] - rowptr[:-1]).long())

        def nb(x, w, rowptr, indices):
            return torch.zeros_like(x).index_add(0, rows_of(rowptr), w[:, None] * x[indices.long()])

        def nb_backward(x, w, rowptr, indices, dy, *transpose):
            rows, idx = rows_of(rowptr), indices.long()
            return [torch.zeros_like(x).index_add(0, idx, w[:, None] * dy[rows]), (dy[rows] * x[idx]).sum(1)]

        i = inputs
        return {
                "layernorm": lambda: [ln(*i)],
                "layernorm_backward": lambda: ln_backward(*i),
                "gelu": lambda: [gelu(*i)],
                "gelu_backward": lambda: gelu_backward(*i),
                "gelu_erf": lambda: [gelu_erf(*i)],
                "gelu_erf_backward": lambda: gelu_erf_backward(*i),
                "matmul": lambda: [i[0] @ i[1]],
                "matmul_nt": lambda: [i[0] @ i[1].T],
                "matmul_tn": lambda: [i[0].T @ i[1]],
                "triangle": lambda: [tri(*i)],
                "triangle_backward": lambda: [torch.einsum("ijc,jkc->ikc", i[2], i[1]), torch.einsum("ijc,ikc->jkc", i[2], i[0])],
                "neighbor": lambda: [nb(*i)],
                "neighbor_backward": lambda: nb_backward(*i),
        }[self.op]()


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TorchSemanticsWithAStandIn(unittest.TestCase):
    """Every op's forward and gradients against torch's, on the CPU, with
    Mage's launches replaced by `StandIn`."""

    def setUp(self):
        if mage is None:
            if REQUIRED:
                self.fail("the package `mage` did not import")
            self.skipTest("the extension module `mage._C` is not built (cargo test builds it)")
        ops = mage._torch_ops
        saved = (ops._launcher, ops._check, ops._raw_stream)
        ops._launcher = lambda op, needed_by: StandIn(op)
        ops._check = ops._check_fake
        ops._raw_stream = lambda device: 0
        self.addCleanup(lambda: setattr(ops, "_launcher", saved[0]) or setattr(ops, "_check", saved[1]) or setattr(ops, "_raw_stream", saved[2]))
        torch.manual_seed(0)

    def same(self, name, ours, theirs, shapes):
        xs = [torch.randn(s, dtype=torch.float64).float().requires_grad_() for s in shapes]
        a, b = ours(*xs), theirs(*xs)
        self.assertEqual(a.shape, b.shape, name)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)
        g = torch.randn(a.shape)
        ga = torch.autograd.grad(a, xs, g)
        gb = torch.autograd.grad(b, xs, g)
        for i, (p, q) in enumerate(zip(ga, gb)):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4, msg=f"{name}: grad {i}")

    def test_forward_and_gradients_follow_torch(self):
        F = torch.nn.functional
        self.same("layer_norm", lambda x, w, b: mage.layer_norm(x, [8], w, b), lambda x, w, b: F.layer_norm(x, [8], w, b), [(2, 3, 8), (8,), (8,)])
        self.same("layer_norm eps=0.5", lambda x, w, b: mage.layer_norm(x, [8], w, b, 0.5), lambda x, w, b: F.layer_norm(x, [8], w, b, 0.5), [(2, 3, 8), (8,), (8,)])
        self.same("layer_norm over two axes", lambda x, w: mage.layer_norm(x, [3, 8], w), lambda x, w: F.layer_norm(x, [3, 8], w), [(2, 3, 8), (3, 8)])
        self.same("layer_norm no affine", lambda x: mage.layer_norm(x, [8]), lambda x: F.layer_norm(x, [8]), [(5, 8)])
        self.same("gelu", lambda x: mage.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [(2, 3, 8)])
        self.same("gelu erf", mage.gelu, F.gelu, [(2, 3, 8)])
        self.same("gelu erf, approximate='none'", lambda x: mage.gelu(x, approximate="none"), lambda x: F.gelu(x, approximate="none"), [(5, 7)])
        self.same("nn.GELU()", mage.nn.GELU(), torch.nn.GELU(), [(4, 8)])
        self.same("nn.GELU('tanh')", mage.nn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh"), [(4, 8)])
        self.same("bias_gelu", mage.bias_gelu, lambda x, b: F.gelu(x + b, approximate="tanh"), [(2, 3, 8), (8,)])
        self.same("linear", mage.linear, F.linear, [(2, 3, 8), (5, 8), (5,)])
        self.same("linear no bias", mage.linear, F.linear, [(4, 8), (5, 8)])
        for sa, sb in [((5, 7), (7, 3)), ((2, 3, 6, 7), (7, 4)), ((3, 6, 7), (3, 7, 4)), ((2, 1, 6, 7), (5, 7, 4)), ((7,), (7, 4)), ((6, 7), (7,)), ((7,), (7,)), ((3, 7), (2, 7, 4)), ((5, 0), (0, 10)), ((2, 5, 0), (0, 3))]:
            self.same(f"matmul {sa}x{sb}", mage.matmul, torch.matmul, [sa, sb])
        self.same("matmul_nt", torch.ops.mage.matmul_nt, lambda a, b: a @ b.mT, [(2, 6, 7), (2, 5, 7)])
        self.same("matmul_tn", torch.ops.mage.matmul_tn, lambda a, b: a.mT @ b, [(7, 6), (7, 5)])
        tri = lambda a, b: torch.einsum("...ikc,...jkc->...ijc", a, b)
        self.same("triangle", mage.triangle, tri, [(5, 5, 3), (5, 5, 3)])
        self.same("triangle batched", mage.triangle, tri, [(2, 4, 4, 3), (2, 4, 4, 3)])

    def test_neighbor_reads_neighbor_backwards_inputs_by_role(self):
        ops = mage._torch_ops
        rowptr = torch.tensor([0, 2, 2, 5, 6], dtype=torch.int32)
        indices = torch.tensor([1, 3, 0, 1, 2, 3], dtype=torch.int32)
        g = object.__new__(ops.Graph)
        g.rowptr, g.indices, g.num_nodes, g.info, g.id = rowptr, indices, 4, None, 10**9
        g.t_rowptr, g.t_rows, g.t_edges = ops._transpose(rowptr, indices, 4)
        # Sources 0..3 have edges [2], [0, 3], [4], [1, 5]: rows 2; 0, 2; 2; 0, 3.
        self.assertEqual(g.t_rowptr.tolist(), [0, 1, 3, 4, 6])
        self.assertEqual(g.t_edges.tolist(), [2, 0, 3, 4, 1, 5])
        self.assertEqual(g.t_rows.tolist(), [2, 0, 2, 2, 0, 3])
        g._versions = (ops._version(rowptr), ops._version(indices))
        ops._GRAPHS[g.id] = g
        rows = torch.tensor([0, 0, 2, 2, 2, 3])
        ref = lambda x, w: torch.zeros_like(x).index_add(0, rows, w[:, None] * x[indices.long()])
        self.same("neighbor", lambda x, w: mage.neighbor(g, x, w), ref, [(4, 3), (6,)])
        self.same("neighbor, trailing dims", lambda x, w: mage.neighbor(g, x, w), lambda x, w: ref(x.reshape(4, 6), w).reshape(4, 2, 3), [(4, 2, 3), (6,)])
        rowptr.add_(0)
        with self.assertRaises(mage.MageError) as e:
            mage.neighbor(g, torch.randn(4, 3), torch.randn(6))
        self.assertIn("written in place after mage.Graph checked them", str(e.exception))


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TheEagerPathWithAStandIn(TorchSemanticsWithAStandIn):
    """The same forward and gradients through the eager path (the op's own
    function and an autograd.Function, no dispatcher): its CUDA test
    relaxed so that the stand-in's CPU tensors take it; every call counted."""

    def setUp(self):
        super().setUp()
        ops = mage._torch_ops
        self.assertTrue(ops._IMPLS and ops._FUNCTIONS, "this torch's custom ops keep no function: the eager path is off")
        saved = (ops._plain, dict(ops._IMPLS))
        self.taken = []

        def plain(args):
            ok = not (ops._dispatch_modes() or ops._function_modes() or ops._transforms() is not None)
            return ok and all(type(a) in ops._PLAIN for a in args if isinstance(a, torch.Tensor))

        def counted(name, impl):
            def f(*args):
                self.taken.append(name)
                return impl(*args)
            return f

        ops._plain = plain
        for name, impl in saved[1].items():
            ops._IMPLS[name] = counted(name, impl)
        # The autograd.Functions run the counted functions too.
        saved_functions = dict(ops._FUNCTIONS)
        for name in saved_functions:
            ops._FUNCTIONS[name] = ops._function(name, ops._IMPLS[name], *ops._GRADIENTS[name])

        def restore():
            ops._plain = saved[0]
            ops._IMPLS.clear()
            ops._IMPLS.update(saved[1])
            ops._FUNCTIONS.clear()
            ops._FUNCTIONS.update(saved_functions)

        self.addCleanup(restore)

    def test_forward_and_gradients_follow_torch(self):
        super().test_forward_and_gradients_follow_torch()
        for name in ("layer_norm", "layer_norm_backward", "gelu", "bias_gelu", "bias_gelu_backward", "gelu_erf_backward", "linear", "matmul", "matmul_nt", "matmul_tn", "triangle", "triangle_backward"):
            self.assertIn(name, self.taken, f"{name} did not take the eager path")

    def test_modes_and_subclasses_take_the_dispatcher(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.utils.flop_counter import FlopCounterMode

        x, w, b = torch.randn(3, 8), torch.randn(8), torch.randn(8)
        self.taken.clear()
        mage.layer_norm(x, [8], w, b)
        self.assertEqual(self.taken, ["layer_norm"])
        self.taken.clear()
        with FakeTensorMode() as mode:
            y = mage.layer_norm(mode.from_tensor(x), [8], mode.from_tensor(w), mode.from_tensor(b))
        self.assertEqual(tuple(y.shape), (3, 8))
        self.assertEqual(self.taken, [], "a fake call ran the op's function")
        with FlopCounterMode(display=False):
            mage.layer_norm(x, [8], w, b)
        # Under a dispatch mode the dispatcher runs the op's function itself, uncounted.
        self.assertEqual(self.taken, [])
        with torch.device("cpu"):
            mage.layer_norm(x, [8], w, b)
        self.assertEqual(self.taken, [])

    def test_a_second_derivative_is_refused(self):
        x = torch.randn(3, 8, requires_grad=True)
        y = mage.layer_norm(x, [8], torch.randn(8), torch.randn(8))
        (g,) = torch.autograd.grad(y, x, torch.randn(3, 8), create_graph=True)
        with self.assertRaises(RuntimeError):
            torch.autograd.grad(g.sum(), x)

    def test_no_grad_skips_autograd(self):
        x = torch.randn(3, 8, requires_grad=True)
        with torch.no_grad():
            y = mage.layer_norm(x, [8])
        self.assertIsNone(y.grad_fn)
        self.assertIsNotNone(mage.layer_norm(x, [8]).grad_fn)


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class ThePlainPathWithAStandIn(TorchSemanticsWithAStandIn):
    """The package's functions by the plain path (`run_plain` of a launcher
    a call has made): what they hand it and what they make of its outputs,
    and the full path wherever it declines."""

    def setUp(self):
        super().setUp()
        ops = mage._torch_ops
        saved = dict(ops._LAUNCHERS)
        for op in ("layernorm", "gelu", "gelu_erf", "matmul_nt", "matmul"):
            ops._LAUNCHERS[op] = StandIn(op)
        self.addCleanup(lambda: ops._LAUNCHERS.clear() or ops._LAUNCHERS.update(saved))
        ops._eps_constants(1e-5)
        self.full = []
        saved_call = ops._call
        ops._call = lambda *args: self.full.append(args[0]) or saved_call(*args)
        self.addCleanup(lambda: setattr(ops, "_call", saved_call))
        StandIn.taken.clear()

    def plain(self, name, ours, theirs, *inputs, op):
        self.full.clear()
        StandIn.taken.clear()
        with torch.no_grad():
            got, want = ours(*inputs), theirs(*inputs)
        self.assertEqual(got.shape, want.shape, name)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=name)
        self.assertEqual((self.full, StandIn.taken), ([], [op]), f"{name}: not by the plain path")

    def test_the_common_calls_take_the_plain_path(self):
        F = torch.nn.functional
        x, x3, w, b = torch.randn(5, 8), torch.randn(2, 3, 8), torch.randn(8), torch.randn(8)
        self.plain("layer_norm", lambda x: mage.layer_norm(x, [8], w, b), lambda x: F.layer_norm(x, [8], w, b), x, op="layernorm")
        self.plain("layer_norm 3-D", lambda x: mage.layer_norm(x, (8,), w, b), lambda x: F.layer_norm(x, [8], w, b), x3, op="layernorm")
        self.plain("layer_norm no affine", lambda x: mage.layer_norm(x, [8]), lambda x: F.layer_norm(x, [8]), x3, op="layernorm")
        self.plain("layer_norm weight only", lambda x: mage.layer_norm(x, [8], w), lambda x: F.layer_norm(x, [8], w), x, op="layernorm")
        self.plain("gelu", mage.gelu, F.gelu, x3, op="gelu_erf")
        self.plain("gelu tanh", lambda x: mage.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), x, op="gelu")
        self.plain("bias_gelu", lambda x: mage.bias_gelu(x, b), lambda x: F.gelu(x + b, approximate="tanh"), x3, op="gelu")
        self.plain("linear no bias", lambda x: mage.linear(x, torch.randn(4, 8).mul(0).add(1)), lambda x: F.linear(x, torch.ones(4, 8)), x, op="matmul_nt")
        self.plain("matmul", lambda x: mage.matmul(x, torch.ones(8, 3)), lambda x: x @ torch.ones(8, 3), x, op="matmul")

    def test_an_input_that_wants_a_gradient_takes_autograd_then_the_plain_path(self):
        ops = mage._torch_ops
        saved = ops._plain
        # The eager path's CUDA test relaxed, as in TheEagerPathWithAStandIn.
        ops._plain = lambda args: not (ops._dispatch_modes() or ops._function_modes() or ops._transforms() is not None)
        self.addCleanup(lambda: setattr(ops, "_plain", saved))
        F = torch.nn.functional
        x, w, b, m = torch.randn(5, 8), torch.randn(8), torch.randn(8), torch.randn(8, 3)
        cases = [
            ("layer_norm", lambda x: mage.layer_norm(x, [8], w, b), lambda x: F.layer_norm(x, [8], w, b), "layernorm"),
            ("gelu", mage.gelu, F.gelu, "gelu_erf"),
            ("gelu", lambda x: mage.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), "gelu"),
            ("bias_gelu", lambda x: mage.bias_gelu(x, b), lambda x: F.gelu(x + b, approximate="tanh"), "gelu"),
            ("linear", lambda x: mage.linear(x, m.T.contiguous()), lambda x: F.linear(x, m.T), "matmul_nt"),
            ("matmul", lambda x: mage.matmul(x, m), lambda x: x @ m, "matmul"),
        ]
        for name, ours, theirs, op in cases:
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            self.full.clear()
            StandIn.taken.clear()
            got, want = ours(xa), theirs(xb)
            self.assertEqual((self.full, StandIn.taken), ([name], [op]), f"{name} ({op}): not autograd, then the plain path")
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=name)
            dy = torch.randn_like(want)
            (got * dy).sum().backward()
            (want * dy).sum().backward()
            torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-4, atol=1e-5, msg=f"{name}: the gradient")

    def test_every_other_call_takes_the_full_path(self):
        x, w = torch.randn(5, 8), torch.randn(8)
        cases = [
            ("an eps no call has checked", lambda: mage.layer_norm(x, [8], w, None, 0.25), "layer_norm"),
            ("an int eps", lambda: mage.layer_norm(x, [8], w, None, 1), "layer_norm"),
            ("two normalized axes", lambda: mage.layer_norm(x.view(5, 2, 4), [2, 4]), "layer_norm"),
            ("a normalized_shape of another width", lambda: mage.layer_norm(x, [5]), "layer_norm"),
            ("a non-contiguous 3-D input", lambda: mage.layer_norm(torch.randn(3, 8, 2).transpose(1, 2), [8]), "layer_norm"),
            ("a 1-D gelu input", lambda: mage.gelu(torch.randn(8)), "gelu"),
            ("approximate='fast'", lambda: mage.gelu(x, approximate="fast"), "gelu"),
            ("linear with a bias", lambda: mage.linear(x, torch.randn(4, 8), torch.randn(4)), "linear"),
            ("a batched matmul", lambda: mage.matmul(torch.randn(2, 5, 8), torch.randn(2, 8, 3)), "matmul"),
            ("a float64 input", lambda: mage.matmul(x.double(), torch.randn(8, 3).double()), "matmul"),
        ]
        for name, f, op in cases:
            self.full.clear()
            StandIn.taken.clear()
            try:
                f()
            except (mage.MageError, RuntimeError):
                pass
            self.assertEqual(self.full, [op], f"{name}: did not take the full path")
            self.assertEqual(StandIn.taken, [], f"{name}: the plain path launched")


if __name__ == "__main__":
    unittest.main()
