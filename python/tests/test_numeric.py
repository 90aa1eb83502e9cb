import math
import unittest

from mage_compare.numeric import compare_arrays, compare_lists

try:
    import numpy as np
except ImportError:  # CI without numpy: the list version is the specification
    np = None

NAN = float("nan")


class Lists(unittest.TestCase):
    def test_pass(self):
        # 2 + 2^-11 is exact in float32, as the output is rounded to it.
        c = compare_lists([1.0, 2.00048828125, -3.0], [1.0, 2.0, -3.0], 1e-3, 1e-4)
        self.assertTrue(c["passed"])
        self.assertEqual(c["failures"], 0)
        self.assertEqual(c["checked"], 3)
        self.assertAlmostEqual(c["max_abs_err"], 2**-11, places=12)
        self.assertAlmostEqual(c["rel_l2_err"], 2**-11 / math.sqrt(14), places=12)
        self.assertAlmostEqual(c["max_rel_err"], 2**-11 / 3.0, places=12)  # over max |ref|, not |ref| at the error
        self.assertEqual(c["tolerance"], {"abs": 1e-3, "rel": 1e-4, "of_magnitude": 0.0})

    def test_the_rule_is_the_modules(self):
        # The same bytes through mage.compare directly give the same block.
        import struct

        import mage
        out, ref = [1.0, 2.5, float("nan")], [1.0, 2.0, 3.0]
        direct = mage.compare(struct.pack("<3f", *out), struct.pack("<3d", *ref), 0.1, 0.0)
        self.assertEqual(direct, compare_lists(out, ref, 0.1, 0.0))
        self.assertEqual((direct["failures"], direct["nan_count"], direct["max_abs_err"]), (2, 1, 0.5))
        with self.assertRaises(mage.MageError):
            mage.compare(b"\0" * 5, b"\0" * 8, 0.0, 0.0)

    def test_an_empty_output_does_not_pass(self):
        self.assertFalse(compare_lists([], [], 1.0, 1.0)["passed"])

    def test_a_magnitude_bound_follows_the_scale_and_fails_zeros(self):
        for scale in (1e-6, 1.0, 1e15):
            ref, mag = [3.0 * scale, -2.0 * scale], [5.0 * scale, 4.0 * scale]
            close = [3.0 * scale * (1 + 1e-7), -2.0 * scale]
            self.assertTrue(compare_lists(close, ref, 0.0, 0.0, mag, 1e-6)["passed"], scale)
            self.assertEqual(compare_lists([0.0, 0.0], ref, 0.0, 0.0, mag, 1e-6)["failures"], 2, scale)
        with self.assertRaises(ValueError):
            compare_lists([1.0], [1.0], 0.0, 0.0, None, 1e-6)

    def test_relative_part_of_bound(self):
        # |err| 0.05 at |ref| 1000: 1e-4 + 1e-4 * 1000 = 0.1001 -> passes
        self.assertTrue(compare_lists([1000.05], [1000.0], 1e-4, 1e-4)["passed"])
        self.assertFalse(compare_lists([1000.2], [1000.0], 1e-4, 1e-4)["passed"])

    def test_nan_and_inf_fail(self):
        c = compare_lists([NAN, 1.0, float("inf")], [0.0, 1.0, 2.0], 1e-4, 1e-4)
        self.assertFalse(c["passed"])
        self.assertEqual(c["failures"], 2)
        self.assertEqual(c["nan_count"], 1)
        self.assertIsNone(c["max_abs_err"])  # infinite
        self.assertEqual(c["first_failures"][0], {"index": 0, "out": None, "ref": 0.0})
        self.assertEqual(c["first_failures"][1]["index"], 2)

    def test_all_nan(self):
        c = compare_lists([NAN, NAN], [1.0, 2.0], 1e-4, 1e-4)
        self.assertFalse(c["passed"])
        self.assertEqual(c["nan_count"], 2)
        self.assertIsNone(c["max_abs_err"])

    def test_first_failures_capped(self):
        c = compare_lists([1.0] * 10, [0.0] * 10, 1e-4, 1e-4)
        self.assertEqual(c["failures"], 10)
        self.assertEqual(len(c["first_failures"]), 5)
        self.assertIsNone(c["rel_l2_err"])  # |ref| = 0
        self.assertIsNone(c["max_rel_err"])

    def test_length_mismatch(self):
        with self.assertRaises(ValueError):
            compare_lists([1.0], [1.0, 2.0], 0, 0)


@unittest.skipIf(np is None, "numpy not installed")
class ArraysAgreeWithLists(unittest.TestCase):
    def check_same(self, out, ref, a=1e-4, r=1e-4):
        want = compare_lists(out, ref, a, r)
        got = compare_arrays(np.array(out, dtype=np.float32), np.array(ref, dtype=np.float64), a, r)
        ref32 = compare_lists([float(np.float32(x)) for x in out], ref, a, r)
        self.assertEqual(got["passed"], ref32["passed"])
        self.assertEqual(got["failures"], ref32["failures"])
        self.assertEqual(got["nan_count"], ref32["nan_count"])
        self.assertEqual([f["index"] for f in got["first_failures"]], [f["index"] for f in ref32["first_failures"]])
        for k in ("max_abs_err", "rel_l2_err", "max_rel_err"):
            if ref32[k] is None:
                self.assertIsNone(got[k])
            else:
                self.assertAlmostEqual(got[k], ref32[k], places=12)
        return want, got

    def test_cases(self):
        self.check_same([1.0, 2.00005, -3.0], [1.0, 2.0, -3.0])
        self.check_same([NAN, 1.0, float("inf")], [0.0, 1.0, 2.0])
        self.check_same([NAN, NAN], [1.0, 2.0])
        self.check_same([1.0] * 10, [0.0] * 10)
        self.check_same([], [])

    def test_shapes_flatten(self):
        out = np.arange(6, dtype=np.float32).reshape(2, 3).T  # non-contiguous
        ref = np.arange(6, dtype=np.float64).reshape(2, 3).T
        self.assertTrue(compare_arrays(out, ref, 0, 0)["passed"])


if __name__ == "__main__":
    unittest.main()
