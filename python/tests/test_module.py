"""The Python module `mage` (the Rust extension), its parts that need no
GPU: the registry, case reading, and every check `prepare` makes before
it touches a device. `cargo test` builds the extension and requires it
(MAGE_REQUIRE_EXTENSION=1); run by hand without it, these tests skip."""

import os
import re
import shutil
import struct
import tempfile
import unittest
from pathlib import Path

try:
    import mage
except ImportError:  # pragma: no cover - the harness test builds it
    mage = None

REQUIRED = os.environ.get("MAGE_REQUIRE_EXTENSION") == "1"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class FakeDevice:
    def __init__(self, index):
        self.index = index


class FakeTensor:
    """What `mage` reads of a torch tensor, without torch."""

    def __init__(self, shape, dtype="torch.float32", cuda=True, contiguous=True, ptr=1 << 30, device=0):
        self.shape = tuple(shape)
        self.dtype = FakeDtype(dtype)
        self.is_cuda = cuda
        self._contiguous = contiguous
        self._ptr = ptr
        self.device = FakeDevice(device)

    def data_ptr(self):
        return self._ptr

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_contiguous(self):
        return self._contiguous


@unittest.skipIf(mage is None and not REQUIRED, "the extension module `mage` is not built (cargo test builds it)")
class Registry(unittest.TestCase):
    def setUp(self):
        if mage is None:
            self.fail("the extension module `mage` did not import")

    def test_ops_and_their_definitions(self):
        self.assertEqual(mage.ops(), ["matmul", "gelu", "gelu_erf", "layernorm", "triangle", "neighbor", "layernorm_backward", "gelu_backward", "gelu_erf_backward", "triangle_backward", "neighbor_backward", "matmul_nt", "matmul_tn"])
        lb = mage.op_info("layernorm_backward")
        self.assertEqual([i["role"] for i in lb["inputs"]], ["x", "gamma", "dy"])
        self.assertEqual([o["role"] for o in lb["outputs"]], ["dx", "dgamma", "dbeta"])
        self.assertIsNone(lb["output"])
        self.assertEqual(mage.op_info("layernorm")["outputs"], [{"file": "y", "role": "y", "shape": ["rows", "width"]}])
        self.assertEqual(mage.output_shapes("layernorm_backward", [4, 8]), [[4, 8], [8], [8]])
        self.assertEqual(mage.output_shape("layernorm_backward", [4, 8]), [48])
        ln = mage.op_info("layernorm")
        self.assertEqual(ln["dim_names"], ["rows", "width"])
        self.assertAlmostEqual(ln["constants"]["eps"], 1e-5, places=12)
        self.assertEqual([i["role"] for i in ln["inputs"]], ["x", "gamma", "beta"])
        self.assertEqual(ln["inputs"][0]["shape"], ["rows", "width"])
        self.assertNotIn("current", [s["name"] for s in ln["stages"]])
        nb = mage.op_info("neighbor")
        self.assertEqual(nb["dim_names"], ["n", "width", "edges"])
        self.assertEqual(nb["current"]["reads"], ["rowptr"])
        self.assertEqual(nb["inputs"][2]["shape"], ["n+1"])
        self.assertEqual([g["name"] for g in nb["generators"]], ["uniform", "power-law"])
        self.assertIn({"dims": [4096, 64, 65536], "generator": "power-law"}, nb["sweep"])
        self.assertAlmostEqual(mage.op_info("gelu")["constants"]["cubic"], 0.044715)
        self.assertEqual(mage.EVICT_BYTES, 256 << 20)
        with self.assertRaises(mage.MageError) as e:
            mage.op_info("softmax")
        self.assertIn("unknown op `softmax`", str(e.exception))

    def test_shapes_and_dims(self):
        self.assertEqual(mage.input_shapes("triangle", [5, 3]), [[5, 5, 3], [5, 5, 3]])
        self.assertEqual(mage.input_shapes("matmul", [2, 3, 4]), [[2, 4], [4, 3]])
        self.assertEqual(mage.output_shape("neighbor", [7, 9, 23]), [7, 9])
        for op in mage.ops():
            dims = mage.op_info(op)["default_dims"]
            self.assertEqual(mage.dims_from_shapes(op, mage.input_shapes(op, dims)), dims, op)
        for op, shapes, msg in [
            ("matmul", [[2, 3], [4, 5]], "b is [4, 5], which makes `k` 4; an earlier input made it 3"),
            ("layernorm", [[2, 3], [3]], "layernorm takes 3 inputs"),
            ("layernorm", [[6], [3], [3]], "x (a) has 1 axes"),
            ("neighbor", [[4, 2], [3], [0], [3]], "rowptr is empty"),
            ("triangle", [[0, 0, 3], [0, 0, 3]], "dim `n` is 0"),
            ("gelu", [[65536, 65536], [65536]], "overflow"),
        ]:
            with self.subTest(op=op, shapes=shapes):
                with self.assertRaises(mage.MageError) as e:
                    mage.dims_from_shapes(op, shapes)
                self.assertIn(msg, str(e.exception))


    def raises(self, msg, f, *args, **kwargs):
        with self.assertRaises(mage.MageError) as e:
            f(*args, **kwargs)
        self.assertEqual(str(e.exception), msg)

    def test_bad_dims_are_mage_errors_naming_the_argument(self):
        rule = "a dim is a whole number from 0 to 2^32 - 1"
        for f in (mage.input_shapes, mage.output_shape, mage.cost):
            with self.subTest(f=f.__name__):
                self.raises(f"dims[1] is -4; {rule}", f, "layernorm", [4, -4])
                self.raises(f"dims[0] is 4294967296; {rule}", f, "layernorm", [2**32, 8])
                self.raises(f"dims[0] is 1000000000000000000000000000000000000000…; {rule}", f, "gelu", [10**60, 8])
                self.raises(f"dims[1] is '8' (a str); {rule}", f, "layernorm", (4, "8"))
                self.raises(f"dims[1] is 8.0 (a float); {rule}", f, "layernorm", [4, 8.0])
                self.raises(f"dims[1] is True (a bool); {rule}", f, "layernorm", [4, True])
                self.raises("dims is 5; it must be a list or tuple of whole numbers", f, "layernorm", 5)
                self.raises("dims is '4,8' (a str); it must be a list or tuple of whole numbers", f, "layernorm", "4,8")
                # Then as the CLI's --dims: the count, each minimum, every buffer's size.
                self.raises("layernorm takes 2 dims (rows,width), got 3", f, "layernorm", [4, 8, 1])
                self.raises("layernorm dim `width` is 0; it must be at least 1", f, "layernorm", [4, 0])
                self.raises("dims 2147483648x4 overflow: input x (a.bin) would hold 8589934592 elements (at most 2^30)",
                            f, "layernorm", [2**31, 4])
        self.assertEqual(mage.cost("layernorm", (4, 8)), mage.cost("layernorm", [4, 8]))
        self.assertIsNone(mage.check_inputs("gelu", [4, 8], [None, None]))
        self.raises(f"dims[2] is -1; {rule}", mage.check_inputs, "neighbor", [4, 4, -1], [None] * 4)

    def test_bad_shapes_are_mage_errors_naming_the_argument(self):
        rule = "an axis length is a whole number from 0 to 2^64 - 1"
        self.raises(f"shapes[0][1] is -3; {rule}", mage.dims_from_shapes, "layernorm", [[2, -3], [3], [3]])
        self.raises(f"shapes[2][0] is 18446744073709551616; {rule}", mage.dims_from_shapes, "layernorm", [[2, 3], [3], [2**64]])
        self.raises(f"shapes[1][0] is 3.0 (a float); {rule}", mage.dims_from_shapes, "layernorm", [[2, 3], [3.0], [3]])
        self.raises("shapes[1] is 3; it must be a list or tuple of axis lengths", mage.dims_from_shapes, "layernorm", [[2, 3], 3, [3]])
        self.raises("shapes is None (a NoneType); it must be a list of shapes, one per input", mage.dims_from_shapes, "layernorm", None)
        self.raises("layernorm dim `rows` is 4294967296, more than 2^32 - 1", mage.dims_from_shapes, "layernorm",
                    [[2**32, 3], [3], [3]])
        self.assertEqual(mage.dims_from_shapes("layernorm", ([2, 3], (3,), [3])), [2, 3])

    def test_bad_names_paths_and_devices_are_mage_errors(self):
        ops = ", ".join(mage.ops())  # the list test_ops_and_their_definitions pins
        for f, args in [(mage.op_info, ()), (mage.input_shapes, ([4, 8],)), (mage.output_shape, ([4, 8],)),
                        (mage.cost, ([4, 8],)), (mage.dims_from_shapes, ([[4, 8]],)), (mage.read_case, (".",)),
                        (mage.check_inputs, ([4, 8], [None, None])), (mage.prepare, ("current", [], None)),
                        (mage.launch, ("current", [], None))]:
            with self.subTest(f=f.__name__):
                self.raises(f"op is None (a NoneType); it must be the name of an op (a str): {ops}", f, None, *args)
                self.raises(f"op is 3; it must be the name of an op (a str): {ops}", f, 3, *args)
                self.raises(f"unknown op `softmax`; the ops are {ops}", f, "softmax", *args)
        stage = "it must be a stage name (a str such as `mage-001`) or `current`"
        self.raises(f"stage is 7; {stage}", mage.prepare, "gelu", 7, [], None)
        self.raises(f"stage is b'current' (a bytes); {stage}", mage.launch, "gelu", b"current", [], None)
        self.raises("inputs is 'x' (a str); it must be a list of tensors, one per input", mage.prepare, "gelu", "current", "x", None)
        self.raises("path is 5; it must be a str or an os.PathLike naming a case directory", mage.read_case, "gelu", 5)
        case = mage.read_case("gelu", FIXTURES / "gelu-3x257")
        self.raises(f"stage is 1; {stage}", case.tolerance, 1)
        self.assertEqual(case.tolerance(None), case.tolerance())
        device = "a device is a whole number from 0 to the device count - 1 (cuda:0 is 0)"
        for f in (mage.evict_l2, mage.reset_persisting_l2):
            with self.subTest(f=f.__name__):
                self.raises(f"device is -1; {device}", f, -1)
                self.raises(f"device is -1; {device}", f, device=-1)
                self.raises(f"device is 'cuda:0' (a str); {device}", f, "cuda:0")
                self.raises(f"device is 18446744073709551616; {device}", f, 2**64)
                if not os.path.exists("/dev/nvidiactl"):
                    # The driver is asked before torch (not installed here) is imported.
                    self.raises("cuda:0: no CUDA driver or device: libcuda could not be loaded", f, 0)


@unittest.skipIf(mage is None and not REQUIRED, "the extension module `mage` is not built (cargo test builds it)")
class Contents(unittest.TestCase):
    """The check of the inputs' contents `prepare` makes before binding
    (for neighbor, the CSR of the graph), run by `check_inputs` on host
    bytes through the same Rust function."""

    def setUp(self):
        if mage is None:
            self.fail("the extension module `mage` did not import")
        case = mage.read_case("neighbor", FIXTURES / "neighbor-7x9x23")
        self.dims = case.dims
        self.inputs = case.input_bytes()

    def with_u32(self, which, at, value):
        inputs = list(self.inputs)
        data = bytearray(inputs[which])
        data[4 * at:4 * at + 4] = value.to_bytes(4, "little")
        inputs[which] = bytes(data)
        return inputs

    def refused(self, msg, inputs, dims=None):
        with self.assertRaises(mage.MageError) as e:
            mage.check_inputs("neighbor", self.dims if dims is None else dims, inputs)
        self.assertEqual(str(e.exception), msg)

    def test_the_registry_names_what_the_check_reads(self):
        self.assertEqual(mage.op_info("neighbor")["content_reads"], ["rowptr", "indices"])
        for op in ["matmul", "gelu", "layernorm", "triangle"]:
            self.assertEqual(mage.op_info(op)["content_reads"], [], op)
            n = len(mage.op_info(op)["inputs"])
            self.assertIsNone(mage.check_inputs(op, mage.op_info(op)["default_dims"], [None] * n))

    def test_a_valid_graph_passes_with_or_without_x_and_w(self):
        self.assertIsNone(mage.check_inputs("neighbor", self.dims, self.inputs))
        self.assertIsNone(mage.check_inputs("neighbor", self.dims, [None, None] + self.inputs[2:]))
        self.assertIsNone(mage.check_inputs("neighbor", self.dims, [None, None, bytearray(self.inputs[2]), self.inputs[3]]))
        # An edgeless graph: rowptr all zeros, no indices.
        self.assertIsNone(mage.check_inputs("neighbor", [3, 4, 0], [None, None, bytes(16), b""]))

    def test_a_malformed_graph_is_refused_with_the_cli_message(self):
        # The corruptions of docs/bad-inputs.md rows 39-42; the CLI prefixes `case DIR: `.
        self.refused("rowptr.bin: rowptr[0] is 1; a CSR row pointer must start at 0", self.with_u32(2, 0, 1))
        self.refused("rowptr.bin: rowptr decreases at row 2: rowptr[2] = 12 > rowptr[3] = 11", self.with_u32(2, 2, 12))
        self.refused("rowptr.bin: rowptr[7] is 24; it must equal the edge count 23", self.with_u32(2, 7, 24))
        self.refused("indices.bin: indices[5] is 7; every index must be below n = 7", self.with_u32(3, 5, 7))
        # An int32 -1 is 2^32 - 1 as the kernels read it.
        self.refused("indices.bin: indices[22] is 4294967295; every index must be below n = 7", self.with_u32(3, 22, 2**32 - 1))
        # Refused with x and w left out, as `prepare` leaves them on the device.
        self.refused("indices.bin: indices[5] is 7; every index must be below n = 7", [None, None] + self.with_u32(3, 5, 7)[2:])

    def test_lengths_are_checked_before_contents(self):
        short = self.inputs[2][:-4]
        self.refused("rowptr.bin (rowptr) holds 7 U32 values; dims 7x9x23 need 8", [None, None, short, self.inputs[3]])
        self.refused("indices.bin (indices) holds 24 U32 values; dims 7x9x23 need 23",
                     [None, None, self.inputs[2], self.inputs[3] + bytes(4)])
        self.refused("rowptr.bin (rowptr) holds 0 U32 values; dims 7x9x23 need 8", [None, None, b"", b""])
        self.refused("inputs[2] (rowptr) holds 31 bytes, not a whole number of 4-byte values", [None, None, short + b"\0\0\0", self.inputs[3]])
        self.refused("inputs[3] (indices) is None; the content check of neighbor reads it", [None, None, self.inputs[2], None])
        self.refused("inputs[0] (x) is 1.5 (a float); it must be bytes (little-endian, 4 per value) or None",
                     [1.5, None] + self.inputs[2:])
        self.refused("neighbor takes 4 inputs (x, w, rowptr, indices), got 3", self.inputs[1:])
        self.refused("inputs is None (a NoneType); it must be a list of bytes (or None), one per input", None)
        self.refused("neighbor takes 3 dims (n,width,edges), got 2", self.inputs, dims=[7, 9])


    def test_the_bad_graphs_of_the_gpu_script_are_refused_with_its_messages(self):
        from gpu_checks import module_graph

        n, edges = self.dims[0], self.dims[2]
        rowptr = list(struct.unpack(f"<{n + 1}I", self.inputs[2]))
        bads = module_graph.bad_graphs(n, edges, rowptr)
        self.assertEqual(len(bads), 4)
        for bad in bads:
            with self.subTest(bad=bad["name"]):
                which = {"rowptr": 2, "indices": 3}[bad["input"]]
                self.refused(bad["message"], self.with_u32(which, bad["at"], bad["value"]))
        # And at the script's sizes, on a graph of one edge per row but the last.
        for n, edges in [(64, 1000), (4096, 65536)]:
            rowptr = [min(i, edges) for i in range(n)] + [edges]
            inputs = [None, None, struct.pack(f"<{n + 1}I", *rowptr), bytes(4 * edges)]
            self.assertIsNone(mage.check_inputs("neighbor", [n, 16, edges], inputs))
            for bad in module_graph.bad_graphs(n, edges, rowptr):
                with self.subTest(n=n, bad=bad["name"]):
                    broken = list(inputs)
                    which = {"rowptr": 2, "indices": 3}[bad["input"]]
                    data = bytearray(broken[which])
                    data[4 * bad["at"]:4 * bad["at"] + 4] = bad["value"].to_bytes(4, "little")
                    broken[which] = bytes(data)
                    self.refused(bad["message"], broken, dims=[n, 16, edges])


@unittest.skipIf(mage is None and not REQUIRED, "the extension module `mage` is not built (cargo test builds it)")
class Cases(unittest.TestCase):
    def setUp(self):
        if mage is None:
            self.fail("the extension module `mage` did not import")
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def committed(self):
        import json

        for d in sorted(FIXTURES.iterdir()):
            if (d / "input.json").is_file():
                yield json.loads((d / "input.json").read_text())["op"], d

    def test_every_committed_case_reads_with_its_tolerance_and_pick(self):
        n = 0
        for op, d in self.committed():
            case = mage.read_case(op, str(d))
            self.assertEqual(case.op, op)
            tol = case.tolerance()
            self.assertEqual(sorted(tol), ["abs", "of_magnitude", "rel"])
            self.assertGreater(tol["of_magnitude"], 0)
            self.assertIn(case.current(), [s["name"] for s in mage.op_info(op)["stages"]])
            out = 1
            for x in mage.output_shape(op, case.dims):
                out *= x
            self.assertEqual(len(case.reference()), 8 * out)
            self.assertEqual(len(case.magnitudes()), 8 * out)
            self.assertEqual(len(case.input_bytes()), len(mage.op_info(op)["inputs"]))
            # Every file of a committed case is recorded: its inputs and expected.bin.
            files = [i["file"] for i in mage.op_info(op)["inputs"]] + ["expected.bin"]
            self.assertEqual(sorted(case.sha256), sorted(files))
            n += 1
        self.assertGreaterEqual(n, 15)
        power = mage.read_case("neighbor", str(FIXTURES / "neighbor-64x16x2000-power-law"))
        self.assertEqual((power.generator, power.label), ("power-law", "64x16x2000 power-law"))
        self.assertEqual(power.current(), "mage-005")
        self.assertEqual(mage.read_case("neighbor", str(FIXTURES / "neighbor-7x9x23")).current(), "mage-001")

    def copy(self, name):
        dst = self.root / name
        shutil.copytree(FIXTURES / name, dst)
        return dst

    def test_bad_cases_are_one_line_errors(self):
        d = self.copy("layernorm-3x257")
        data = bytearray((d / "a.bin").read_bytes())
        data[0] ^= 1
        (d / "a.bin").write_bytes(bytes(data))
        with self.assertRaises(mage.MageError) as e:
            mage.read_case("layernorm", str(d))
        self.assertIn("a.bin has sha256", str(e.exception))
        self.assertEqual(len(str(e.exception).splitlines()), 1)
        with self.assertRaises(mage.MageError) as e:
            mage.read_case("gelu", str(d))
        self.assertIn("is a `layernorm` case, not `gelu`", str(e.exception))
        with self.assertRaises(mage.MageError) as e:
            mage.read_case("layernorm", str(self.root / "nowhere"))
        self.assertIn("is not a directory", str(e.exception))
        d = self.copy("neighbor-7x9x23")
        (d / "rowptr.bin").write_bytes((d / "rowptr.bin").read_bytes()[4:] + b"\0\0\0\0")
        with self.assertRaises(mage.MageError) as e:
            mage.read_case("neighbor", str(d))
        self.assertIn("rowptr.bin has sha256", str(e.exception))


@unittest.skipIf(mage is None and not REQUIRED, "the extension module `mage` is not built (cargo test builds it)")
class Prepare(unittest.TestCase):
    """Every check `prepare` makes before a device is touched."""

    def setUp(self):
        if mage is None:
            self.fail("the extension module `mage` did not import")

    def ln(self, rows=4, width=8, **out):
        x = FakeTensor((rows, width), ptr=1 << 30)
        g, b = FakeTensor((width,), ptr=2 << 30), FakeTensor((width,), ptr=3 << 30)
        y = FakeTensor(out.pop("shape", (rows, width)), ptr=out.pop("ptr", 4 << 30), **out)
        return [x, g, b], y

    def refused(self, msg, op, stage, inputs, output):
        with self.assertRaises(mage.MageError) as e:
            mage.prepare(op, stage, inputs, output)
        self.assertIn(msg, str(e.exception))
        self.assertEqual(len(str(e.exception).splitlines()), 1)

    def test_arguments_are_checked_before_any_launch(self):
        inputs, y = self.ln()
        self.refused("x is `int`, not a torch tensor", "layernorm", "current", [1, inputs[1], inputs[2]], y)
        self.refused("x is on the CPU", "layernorm", "current", [FakeTensor((4, 8), cuda=False)] + inputs[1:], y)
        self.refused("gamma is torch.float64; it must be torch.float32", "layernorm", "current",
                     [inputs[0], FakeTensor((8,), dtype="torch.float64"), inputs[2]], y)
        self.refused("x is not contiguous", "layernorm", "current", [FakeTensor((4, 8), contiguous=False)] + inputs[1:], y)
        self.refused("layernorm takes 3 inputs (x, gamma, beta), got 2", "layernorm", "current", inputs[:2], y)
        self.refused("gamma is [7], which makes `width` 7; an earlier input made it 8", "layernorm", "current",
                     [inputs[0], FakeTensor((7,), ptr=2 << 30), inputs[2]], y)
        inputs, y = self.ln(shape=(4, 9))
        self.refused("output is [4, 9]; layernorm 4x8 writes [4, 8]", "layernorm", "current", inputs, y)
        inputs, y = self.ln(ptr=(1 << 30) + 64)
        self.refused("the output overlaps x", "layernorm", "current", inputs, y)
        inputs, y = self.ln()
        self.refused("layernorm has no stage `mage-999`", "layernorm", "mage-999", inputs, y)
        self.refused("is on cuda:1, x on cuda:0", "layernorm", "current", inputs[:2] + [FakeTensor((8,), device=1)], y)
        # An op with several outputs takes them as a list, in order, each its own shape.
        lb = [FakeTensor((4, 8)), FakeTensor((8,), ptr=2 << 30), FakeTensor((4, 8), ptr=3 << 30)]
        dx, dg, db = FakeTensor((4, 8), ptr=4 << 30), FakeTensor((8,), ptr=5 << 30), FakeTensor((8,), ptr=6 << 30)
        self.refused("it must be a list of 3 tensors (dx, dgamma, dbeta)", "layernorm_backward", "current", lb, dx)
        self.refused("layernorm_backward writes 3 outputs (dx, dgamma, dbeta), got 2", "layernorm_backward", "current", lb, [dx, dg])
        self.refused("output dgamma is [7]; layernorm_backward 4x8 writes [8]", "layernorm_backward", "current", lb,
                     [dx, FakeTensor((7,), ptr=5 << 30), db])
        self.refused("output dgamma overlaps dbeta", "layernorm_backward", "current", lb, [dx, dg, FakeTensor((8,), ptr=(5 << 30) + 16)])
        self.refused("output dx overlaps x", "layernorm_backward", "current", lb, [FakeTensor((4, 8)), dg, db])
        idx = [FakeTensor((5, 4)), FakeTensor((9,)), FakeTensor((6,), dtype="torch.float32"), FakeTensor((9,), dtype="torch.int32")]
        self.refused("rowptr is torch.float32; it must be torch.int32 or torch.uint32", "neighbor", "current", idx, FakeTensor((5, 4)))

    @unittest.skipIf(os.path.exists("/dev/nvidiactl"), "a machine with a GPU: the launch path is exercised there")
    def test_a_valid_call_without_a_driver_says_so(self):
        inputs, y = self.ln()
        with self.assertRaises(mage.MageError) as e:
            mage.prepare("layernorm", "mage-002", inputs, y)
        self.assertIn("no CUDA driver or device", str(e.exception))
        # A graph is copied to the host for its check: the driver is asked
        # before torch (not installed here) is.
        x, w, rowptr, idx = (FakeTensor((5, 4), ptr=1 << 30), FakeTensor((9,), ptr=2 << 30),
                             FakeTensor((6,), dtype="torch.int32", ptr=3 << 30), FakeTensor((9,), dtype="torch.int32", ptr=4 << 30))
        for stage in ["current", "mage-001"]:
            with self.subTest(stage=stage):
                self.refused("cuda:0: no CUDA driver or device: libcuda could not be loaded", "neighbor", stage,
                             [x, w, rowptr, idx], FakeTensor((5, 4), ptr=5 << 30))

    @unittest.skipIf(os.path.exists("/dev/nvidiactl"), "a machine with a GPU: module_graph.py checks a device past the count there")
    def test_the_tensors_device_is_the_one_opened(self):
        # Tensors on cuda:1 open device 1's context (here: the error names it).
        on1 = [FakeTensor((8, 16), device=1), FakeTensor((16,), device=1), FakeTensor((16,), device=1)]
        with self.assertRaises(mage.MageError) as e:
            mage.prepare("layernorm", "mage-002", on1, FakeTensor((8, 16), ptr=2 << 30, device=1))
        self.assertEqual(str(e.exception), "cuda:1: no CUDA driver or device: libcuda could not be loaded")
        for f in (mage.evict_l2, mage.reset_persisting_l2):
            with self.assertRaises(mage.MageError) as e:
                f(3)
            self.assertEqual(str(e.exception), "cuda:3: no CUDA driver or device: libcuda could not be loaded")


class Readme(unittest.TestCase):
    def test_every_test_the_refusals_table_names_exists(self):
        readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
        table = readme.split("## Refusals", 1)[1].split("\n## ", 1)[0]
        names = set(re.findall(r"`(test_\w+)`", table))
        self.assertGreaterEqual(len(names), 6)
        defined = set(re.findall(r"def (test_\w+)", Path(__file__).read_text()))
        self.assertEqual(names - defined, set())


if __name__ == "__main__":
    unittest.main()
