import math
import unittest

from mage_compare import verdict as v


def rounds_with_ratios(ratios, b=10.0):
    """Rounds whose median(A)/median(B) are exactly `ratios`."""
    return [([b * r] * 100, [b] * 100) for r in ratios]


class Decide(unittest.TestCase):
    def test_faster_when_whole_spread_below(self):
        self.assertEqual(v.decide(0.90, 0.85, 0.97), v.FASTER)
        self.assertEqual(v.decide(0.90, 0.85, 0.979999), v.FASTER)

    def test_boundary_of_faster_is_strict(self):
        # high exactly 0.98 is not "below 0.98"; median 0.96 is outside the SAME band
        self.assertEqual(v.decide(0.96, 0.95, 0.98), v.UNCERTAIN)

    def test_slower_when_whole_spread_above(self):
        self.assertEqual(v.decide(1.10, 1.03, 1.20), v.SLOWER)
        self.assertEqual(v.decide(1.05, 1.02, 1.08), v.UNCERTAIN)  # 1.02 is not above 1.02

    def test_same(self):
        self.assertEqual(v.decide(1.00, 0.99, 1.01), v.SAME)
        self.assertEqual(v.decide(0.98, 0.95, 1.05), v.SAME)  # all bounds inclusive
        self.assertEqual(v.decide(1.02, 0.95, 1.05), v.SAME)

    def test_same_needs_narrow_spread(self):
        self.assertEqual(v.decide(1.00, 0.94, 1.01), v.UNCERTAIN)
        self.assertEqual(v.decide(1.00, 0.99, 1.06), v.UNCERTAIN)

    def test_median_outside_same_band_but_spread_straddles(self):
        self.assertEqual(v.decide(0.97, 0.96, 0.99), v.UNCERTAIN)
        self.assertEqual(v.decide(1.03, 1.01, 1.04), v.UNCERTAIN)

    def test_non_finite_or_inverted(self):
        self.assertEqual(v.decide(math.nan, 0.9, 0.95), v.UNCERTAIN)
        self.assertEqual(v.decide(0.9, 0.95, 0.85), v.UNCERTAIN)
        self.assertEqual(v.decide(0.9, -math.inf, 0.95), v.UNCERTAIN)

    def test_custom_thresholds(self):
        t = v.Thresholds(faster_below=0.9, slower_above=1.1, same_median=(0.9, 1.1), same_spread=(0.8, 1.2))
        self.assertEqual(v.decide(0.95, 0.92, 0.97, t), v.SAME)
        self.assertEqual(v.decide(0.8, 0.7, 0.85, t), v.FASTER)


class Schedule(unittest.TestCase):
    def test_abba(self):
        s = v.abba_schedule(2)
        self.assertEqual([arm for _, _, arm in s], ["A", "B", "B", "A", "A", "B", "B", "A"])
        self.assertEqual([r for r, _, _ in s], [0, 0, 0, 0, 1, 1, 1, 1])
        self.assertEqual([p for _, p, _ in s][:4], [0, 1, 2, 3])
        with self.assertRaises(ValueError):
            v.abba_schedule(0)

    def test_abba_cancels_linear_drift(self):
        # times that grow linearly with every segment: A-B-B-A gives both arms the same mean position
        seg = iter(range(100))
        rounds = []
        for r in range(8):
            a, b = [], []
            for arm in v.ABBA:
                t = 10.0 + 0.1 * next(seg)
                (a if arm == "A" else b).append(t)
            rounds.append((a, b))
        out = v.verdict_from_rounds(rounds)
        for ratio in out["ratios"]:
            self.assertAlmostEqual(ratio, 1.0)
        self.assertEqual(out["verdict"], v.SAME)


class FromRounds(unittest.TestCase):
    def test_round_ratio(self):
        self.assertAlmostEqual(v.round_ratio([9.0, 9.0, 100.0], [10.0, 10.0, 10.0]), 0.9)
        self.assertTrue(math.isnan(v.round_ratio([], [1.0])))
        self.assertTrue(math.isnan(v.round_ratio([1.0], [0.0])))
        self.assertTrue(math.isnan(v.round_ratio([math.nan], [1.0])))

    def test_faster_verdict(self):
        out = v.verdict_from_rounds(rounds_with_ratios([0.90, 0.91, 0.92, 0.93, 0.90, 0.91, 0.92, 0.94]))
        self.assertEqual(out["verdict"], v.FASTER)
        self.assertAlmostEqual(out["median_ratio"], 0.915)
        self.assertEqual(out["spread"]["kind"], "min-max")
        self.assertAlmostEqual(out["spread"]["low"], 0.90)
        self.assertAlmostEqual(out["spread"]["high"], 0.94)
        self.assertEqual(len(out["ratios"]), 8)
        self.assertEqual(len(out["round_medians_us"]["a"]), 8)

    def test_one_bad_round_makes_minmax_uncertain_but_not_iqr(self):
        ratios = [0.90, 0.91, 0.92, 0.90, 0.91, 0.92, 0.90, 0.99]
        self.assertEqual(v.verdict_from_rounds(rounds_with_ratios(ratios))["verdict"], v.UNCERTAIN)
        self.assertEqual(v.verdict_from_rounds(rounds_with_ratios(ratios), spread="iqr")["verdict"], v.FASTER)

    def test_never_from_a_single_best_round(self):
        # one very fast round does not make A faster
        ratios = [1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0]
        out = v.verdict_from_rounds(rounds_with_ratios(ratios))
        self.assertNotEqual(out["verdict"], v.FASTER)
        self.assertEqual(out["median_ratio"], 1.0)

    def test_slower_and_same(self):
        self.assertEqual(v.verdict_from_rounds(rounds_with_ratios([1.1, 1.12, 1.09, 1.15, 1.1, 1.1, 1.11, 1.13]))["verdict"], v.SLOWER)
        self.assertEqual(v.verdict_from_rounds(rounds_with_ratios([1.0, 1.01, 0.99, 1.0, 1.0, 1.02, 0.98, 1.0]))["verdict"], v.SAME)

    def test_too_few_finite_rounds(self):
        out = v.verdict_from_rounds([([9.0], [10.0]), ([], [10.0])])
        self.assertEqual(out["verdict"], v.UNCERTAIN)
        self.assertIn("fewer than two", out["note"])
        self.assertIn("1 of 2 rounds", out["note"])

    def test_spread_kinds(self):
        self.assertEqual(v.spread_of([1.0, 3.0, 2.0]), (1.0, 3.0))
        self.assertEqual(v.spread_of([1.0, 2.0, 3.0, 4.0], "iqr"), (1.75, 3.25))
        with self.assertRaises(ValueError):
            v.spread_of([1.0], "range")


if __name__ == "__main__":
    unittest.main()
