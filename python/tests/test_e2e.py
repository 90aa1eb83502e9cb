"""The end-to-end harness's pure parts: the loss curves' agreement and the
command line (no torch, no GPU)."""

import unittest

from mage_e2e import agreement
from mage_e2e.__main__ import PARTS, parse


class Agreement(unittest.TestCase):
    def test_a_curve_as_close_as_torch_agrees(self):
        f64 = [2.0, 1.0, 0.5, 0.25]
        torch32 = [2.0, 1.0000010, 0.5000004, 0.2500002]
        mage = [2.0, 0.9999985, 0.5000006, 0.2500001]
        a = agreement.loss_agreement(mage, torch32, f64)
        self.assertAlmostEqual(a["torch_vs_float64"], 1e-6, delta=1e-9)
        self.assertAlmostEqual(a["mage_vs_float64"], 1.5e-6, delta=1e-9)
        self.assertAlmostEqual(a["bound"], 4 * 1e-6 + 1e-6, delta=1e-9)
        self.assertTrue(a["agree"])

    def test_a_wrong_gradient_curve_fails(self):
        f64 = [2.0, 1.0, 0.5, 0.25]
        torch32 = [2.0, 1.0000001, 0.5000001, 0.25]
        mage = [2.0, 1.01, 0.52, 0.27]  # descends along another direction
        a = agreement.loss_agreement(mage, torch32, f64)
        self.assertFalse(a["agree"])
        self.assertGreater(a["mage_vs_float64"], 100 * a["bound"])

    def test_a_constant_curve_fails(self):
        f64 = [2.0, 1.0, 0.5]
        self.assertFalse(agreement.loss_agreement([2.0, 2.0, 2.0], f64, f64)["agree"])

    def test_the_floor_keeps_the_bound_above_zero(self):
        f64 = [1.0, 0.5]
        a = agreement.loss_agreement([1.0, 0.5000002], f64, f64)
        self.assertEqual(a["torch_vs_float64"], 0.0)
        self.assertTrue(a["agree"])
        self.assertFalse(agreement.loss_agreement([1.0, 0.50001], f64, f64)["agree"])

    def test_refuses_curves_it_cannot_judge(self):
        with self.assertRaisesRegex(ValueError, "one length"):
            agreement.max_relative_deviation([1.0, 2.0], [1.0])
        with self.assertRaisesRegex(ValueError, "finite"):
            agreement.max_relative_deviation([float("nan")], [1.0])
        with self.assertRaisesRegex(ValueError, "is 0"):
            agreement.max_relative_deviation([1.0], [0.0])

    def test_no_worse_names_the_worse_tensors(self):
        r = agreement.no_worse({"y": 1e-7, "dx": 5e-7}, {"y": 2e-7, "dx": 2e-7})
        self.assertEqual(r["worse"], ["dx"])
        self.assertFalse(r["no_worse"])
        with self.assertRaisesRegex(ValueError, "same tensors"):
            agreement.no_worse({"y": 1.0}, {"dx": 1.0})

    def test_median(self):
        self.assertEqual(agreement.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(agreement.median([4.0, 1.0, 2.0, 3.0]), 2.5)


class CommandLine(unittest.TestCase):
    def test_parts(self):
        self.assertEqual(parse(["--out", "x.json"]).only, list(PARTS))
        self.assertEqual(parse(["--out", "x.json", "--only", "train,mlp"]).only, ["train", "mlp"])

    def test_an_unknown_part_is_a_usage_error(self):
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as c:
            parse(["--out", "x.json", "--only", "mlp,attention"])
        self.assertEqual(c.exception.code, 2)
        self.assertIn("--only attention", err.getvalue())


if __name__ == "__main__":
    unittest.main()
