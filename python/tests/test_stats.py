import math
import unittest

from mage_compare import stats


class MedianAndQuantiles(unittest.TestCase):
    def test_median(self):
        self.assertEqual(stats.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(stats.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        self.assertEqual(stats.median([7.0]), 7.0)
        self.assertTrue(math.isnan(stats.median([])))

    def test_quantile_type7(self):
        xs = [1.0, 2.0, 3.0, 4.0]
        self.assertEqual(stats.quantile(xs, 0.0), 1.0)
        self.assertEqual(stats.quantile(xs, 1.0), 4.0)
        self.assertAlmostEqual(stats.quantile(xs, 0.25), 1.75)  # numpy.percentile(xs, 25)
        self.assertAlmostEqual(stats.quantile(xs, 0.75), 3.25)
        self.assertAlmostEqual(stats.quantile([5.0, 1.0, 3.0], 0.5), 3.0)
        self.assertEqual(stats.iqr_bounds([2.0]), (2.0, 2.0))
        self.assertTrue(math.isnan(stats.quantile([], 0.5)))
        with self.assertRaises(ValueError):
            stats.quantile(xs, 1.5)

    def test_value_range(self):
        self.assertEqual(stats.value_range([2.0, 5.0, 3.0]), 3.0)
        self.assertEqual(stats.value_range([7.0]), 0.0)
        self.assertTrue(math.isnan(stats.value_range([])))


class Rounds(unittest.TestCase):
    def test_round_sizes(self):
        self.assertEqual(stats.round_sizes(300, 3), [100, 100, 100])
        self.assertEqual(stats.round_sizes(10, 3), [4, 3, 3])
        self.assertEqual(sum(stats.round_sizes(301, 7)), 301)
        with self.assertRaises(ValueError):
            stats.round_sizes(2, 3)
        with self.assertRaises(ValueError):
            stats.round_sizes(5, 0)

    def test_rotation(self):
        items = ["a", "b", "c"]
        self.assertEqual(stats.rotate(items, 0), ["a", "b", "c"])
        self.assertEqual(stats.rotate(items, 1), ["b", "c", "a"])
        self.assertEqual(stats.rotate(items, 2), ["c", "a", "b"])
        self.assertEqual(stats.rotate(items, 3), ["a", "b", "c"])
        self.assertEqual(stats.rotate([], 2), [])
        orders = stats.rotated_orders(items, 3)
        # every item is first exactly once and every order is a permutation
        self.assertEqual(sorted(o[0] for o in orders), items)
        for o in orders:
            self.assertEqual(sorted(o), items)

    def test_span_summary(self):
        s = stats.span_summary([[1.0, 2.0, 3.0], [10.0, 11.0, 12.0], [4.0, 5.0, 6.0]])
        self.assertEqual(s["round_medians_us"], [2.0, 11.0, 5.0])
        self.assertEqual(s["range_us"], 9.0)
        self.assertEqual(s["median_us"], 5.0)
        self.assertEqual(len(s["samples_us"]), 9)
        self.assertEqual(s["samples_us"][:3], [1.0, 2.0, 3.0])

    def test_b2b_and_change(self):
        b = stats.b2b_summary([3.0, 1.0, 2.0], 100)
        self.assertEqual(b, {"median": 2.0, "runs": [3.0, 1.0, 2.0], "calls_per_run": 100})
        self.assertAlmostEqual(stats.relative_change(100.0, 103.0), 0.03)
        self.assertTrue(math.isnan(stats.relative_change(0.0, 1.0)))
        self.assertTrue(stats.finite([1.0, 2]))
        self.assertFalse(stats.finite([1.0, math.nan]))


if __name__ == "__main__":
    unittest.main()
