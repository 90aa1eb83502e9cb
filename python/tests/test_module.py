"""The Python module `mage` (the Rust extension), its parts that need no
GPU: the registry, case reading, and every check `prepare` makes before
it touches a device. `cargo test` builds the extension and requires it
(MAGE_REQUIRE_EXTENSION=1); run by hand without it, these tests skip."""

import os
import shutil
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
        self.assertEqual(mage.ops(), ["matmul", "gelu", "layernorm", "triangle", "neighbor"])
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
            abs_tol, rel_tol = case.tolerance()
            self.assertGreater(abs_tol, 0)
            self.assertIn(case.current(), [s["name"] for s in mage.op_info(op)["stages"]])
            out = 1
            for x in mage.output_shape(op, case.dims):
                out *= x
            self.assertEqual(len(case.reference()), 8 * out)
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
        idx = [FakeTensor((5, 4)), FakeTensor((9,)), FakeTensor((6,), dtype="torch.float32"), FakeTensor((9,), dtype="torch.int32")]
        self.refused("rowptr is torch.float32; it must be torch.int32 or torch.uint32", "neighbor", "current", idx, FakeTensor((5, 4)))

    @unittest.skipIf(os.path.exists("/dev/nvidiactl"), "a machine with a GPU: the launch path is exercised there")
    def test_a_valid_call_without_a_driver_says_so(self):
        inputs, y = self.ln()
        with self.assertRaises(mage.MageError) as e:
            mage.prepare("layernorm", "mage-002", inputs, y)
        self.assertIn("no CUDA driver or device", str(e.exception))


if __name__ == "__main__":
    unittest.main()
