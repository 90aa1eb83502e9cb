import unittest

from mage_compare.profparse import counter_diff, counter_snapshot, fresh_function, kernel_events, kernel_summary, split_calls


class SplitCalls(unittest.TestCase):
    def trace(self, durations):
        # Kernel events out of order, a memset in between (not a kernel).
        events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 10.0 * i, "dur": d} for i, d in enumerate(durations)]
        return {"traceEvents": list(reversed(events)) + [{"ph": "X", "cat": "gpu_memset", "ts": 5.0, "dur": 99.0}]}

    def test_segments_split_by_kernels_per_call(self):
        # Segment A: 1 warm-up + 2 calls of 1 kernel; segment B: 1 warm-up + 2 calls of 2 kernels.
        ev = kernel_events(self.trace([9, 1, 2, 9, 9, 3, 4, 5, 6]))
        self.assertEqual([e[1] for e in ev], [9, 1, 2, 9, 9, 3, 4, 5, 6])
        self.assertEqual(split_calls(ev, [(1, 2, 1), (1, 2, 2)]), [[1.0, 2.0], [7.0, 11.0]])

    def test_counts_that_do_not_add_up_are_an_error(self):
        ev = kernel_events(self.trace([1, 2, 3]))
        with self.assertRaises(ValueError) as e:
            split_calls(ev, [(0, 2, 1)])
        self.assertIn("saw 3 kernels; the segments launch 2", str(e.exception))
        with self.assertRaises(ValueError):
            split_calls(ev, [(0, 3, 0)])


class KernelSummary(unittest.TestCase):
    TRACE = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "layernorm_row", "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "layernorm_row", "dur": 7.0},
        {"ph": "X", "cat": "Kernel", "name": "fixup", "dur": 1.0},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "dur": 3.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "dur": 30.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernel", "dur": 4.0},
        {"ph": "f", "cat": "ac2g", "name": "flow"},
        {"ph": "X", "cat": "kernel", "name": "layernorm_row"},
    ]}

    def test_sums_kernels_only(self):
        s = kernel_summary(self.TRACE, 2)
        self.assertAlmostEqual(s["kernel_us"], (5 + 7 + 1 + 0) / 2)
        self.assertEqual(s["kernels_per_call"], 2.0)
        self.assertEqual(s["excluded"], {"gpu_memset": 1, "gpu_memcpy": 1})
        self.assertEqual(s["kernels"][0], {"name": "layernorm_row", "per_call": 1.5, "us_per_call": 6.0})
        self.assertEqual(s["kernels"][1]["name"], "fixup")

    def test_no_kernels(self):
        s = kernel_summary({"traceEvents": []}, 100)
        self.assertIsNone(s["kernel_us"])
        self.assertEqual(s["kernels_per_call"], 0.0)
        s = kernel_summary([{"ph": "X", "cat": "kernel", "dur": 2.0}], 1)  # a bare event list
        self.assertEqual(s["kernel_us"], 2.0)
        with self.assertRaises(ValueError):
            kernel_summary({}, 0)


class Counters(unittest.TestCase):
    def test_snapshot_does_not_create_sections(self):
        from collections import Counter, defaultdict

        c = defaultdict(Counter)
        c["stats"]["calls_captured"] = 2
        snap = counter_snapshot(c)
        self.assertEqual(snap, {"stats": {"calls_captured": 2}})
        self.assertNotIn("recompiles", c)
        c["stats"]["calls_captured"] += 1
        c["recompiles"]["guard"] = 1
        self.assertEqual(snap["stats"]["calls_captured"], 2)  # a copy
        self.assertEqual(counter_diff(snap, counter_snapshot(c)), {"stats.calls_captured": 1, "recompiles.guard": 1})
        self.assertEqual(counter_diff(snap, snap), {})


def scaled(x, k=2):
    return x * k


class Fresh(unittest.TestCase):
    def test_new_code_same_behaviour(self):
        f = fresh_function(scaled, "op0")
        self.assertIsNot(f, scaled)
        self.assertIsNot(f.__code__, scaled.__code__)
        self.assertEqual(f(3), 6)
        self.assertEqual(f(3, k=3), 9)
        self.assertEqual(f.__name__, "scaled__op0")
        g = fresh_function(scaled, "op1")
        self.assertIsNot(g.__code__, f.__code__)

    def test_closures(self):
        k = 5

        def inner(x):
            return x + k

        self.assertEqual(fresh_function(inner, "t")(1), 6)


if __name__ == "__main__":
    unittest.main()
