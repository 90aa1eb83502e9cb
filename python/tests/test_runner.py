import json
import tempfile
import unittest
from pathlib import Path

from mage_compare.manifest import load_manifest
from mage_compare.runner import Settings, run_session
from mage_compare.stats import rotate

from .helpers import FakeBackend, layernorm_op, write_manifest

SMALL = Settings(first_warmup=2, segment_warmup=1, span_samples=9, span_rounds=3, b2b_calls=4, b2b_runs=3,
                 profiler_warmup=1, profiler_calls=5, verdict_rounds=8, verdict_samples=3, control_samples=4)

LN_ALL = ["rust current", "rust mage-001", "torch", "torch_compile", "triton"]


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.out = self.root / "comparison.json"
        self.lines = []

    def tearDown(self):
        self.tmp.cleanup()

    def run_with(self, mode="both", ops=None, pairs=None, span_verdicts=False, **fake):
        write_manifest(self.root, ops or [layernorm_op(self.root, pairs=pairs)], mode=mode, span_verdicts=span_verdicts)
        m = load_manifest(self.root)
        self.backend = FakeBackend(m, SMALL, **fake)
        report = run_session(m, self.backend, SMALL, self.out, progress=self.lines.append)
        on_disk = json.loads(self.out.read_text())
        self.assertEqual(on_disk["complete"], report["complete"])
        return on_disk

    def row(self, report, name, op="layernorm"):
        rows = [r for r in report["results"] if r["implementation"] == name and r["op"] == op]
        self.assertEqual(len(rows), 1, name)
        return rows[0]


class FullSession(Base):
    def test_both_modes_every_block(self):
        times = {"rust current": 9.0, "rust mage-001": 20.0, "torch": 12.0, "torch_compile": 11.0, "triton": 10.0}
        r = self.run_with(times=times)
        self.assertTrue(r["complete"])
        self.assertIsNone(r["error"])
        self.assertEqual(r["schema"], "mage-compare/2")
        self.assertEqual((r["namespace"], r["mode"]), ("mage-test", "both"))
        self.assertEqual(r["environment"]["manifest"], {"toolchain": "nightly-test"})
        self.assertEqual(r["environment"]["nvidia_smi"]["end"]["gpu"]["sm_mhz"], 1980)
        self.assertEqual([x["implementation"] for x in r["results"]], LN_ALL)
        for name in LN_ALL:
            row = self.row(r, name)
            self.assertIsNone(row["error"], name)
            self.assertTrue(row["correct_before"]["passed"])
            self.assertTrue(row["correct_after"]["passed"])
            hot, cold = row["hot"], row["cold"]
            self.assertEqual(hot["mode"], "hot")
            self.assertEqual(len(hot["span"]["samples_us"]), 9)
            self.assertEqual(len(hot["span"]["round_medians_us"]), 3)
            self.assertEqual(hot["span"]["instrument"], "span")
            self.assertAlmostEqual(hot["span"]["median_us"], times[name] + 0.001)
            self.assertEqual(len(hot["b2b_us"]["runs"]), 3)
            self.assertAlmostEqual(hot["b2b_us"]["median"], times[name] * 0.8)
            self.assertAlmostEqual(hot["kernel_us"], times[name] * 0.5)
            self.assertEqual(hot["kernels_per_call"], 1.0)
            self.assertEqual(cold["mode"], "cold")
            self.assertAlmostEqual(cold["span"]["median_us"], 2 * times[name] + 0.001)
            self.assertNotIn("b2b_us", cold)
            self.assertGreater(row["l2_persisting_resets"], 0)
        self.assertEqual(self.row(r, "rust current")["stage"], "current")
        self.assertIsNone(self.row(r, "torch")["stage"])
        self.assertEqual(self.row(r, "torch")["output"], "returned")
        self.assertEqual(self.row(r, "triton")["output"], "preallocated")
        self.assertFalse(self.row(r, "torch_compile")["recompiled"])
        self.assertIsNone(self.row(r, "torch")["recompiled"])
        op = r["ops"][0]
        self.assertEqual(op["best_alternative"]["implementation"], "triton")
        self.assertEqual(op["best_alternative"]["chosen_by"], "hot.kernel_us")
        self.assertEqual(set(op["inputs_sha256"]), {"a.bin", "b.bin", "c.bin"})
        self.assertEqual((op["label"], op["generator"], op["current_picks"]), ("2x3", "normal", "mage-001"))
        self.assertEqual(r["ceilings"]["fp32_flops_per_us"], 50e6)
        floor = op["floor"]
        self.assertEqual((floor["bytes"], floor["flops"], floor["bound"]), (48, 48, "memory"))
        self.assertAlmostEqual(floor["floor_us"], 48 / 4e6)
        self.assertAlmostEqual(floor["cold_copy_us"], 48 / 3e6)  # cold mode: the copy with L2 evicted too
        # verdicts, all on kernel time: the automatic pair, then the manifest's pair, each in hot and cold
        got = [(v["a"], v["b"], v["mode"], v["auto"], v["instrument"]) for v in r["verdicts"]]
        self.assertEqual(got, [("rust current", "best alternative", "hot", True, "kernel"),
                               ("rust current", "best alternative", "cold", True, "kernel"),
                               ("rust current", "rust mage-001", "hot", False, "kernel"),
                               ("rust current", "rust mage-001", "cold", False, "kernel")])
        auto = r["verdicts"][0]
        self.assertEqual(auto["b_implementation"], "triton")
        self.assertEqual(auto["verdict"], "FASTER")
        self.assertEqual(len(auto["ratios"]), 8)
        self.assertAlmostEqual(auto["median_ratio"], 4.501 / 5.001, places=6)
        self.assertEqual(auto["spread"]["kind"], "min-max")
        self.assertEqual(len(auto["samples_us"]["a"]), 8)
        self.assertEqual(len(auto["samples_us"]["a"][0]), 2 * SMALL.verdict_samples)
        self.assertIn("kernel time", auto["instrument_text"])
        self.assertEqual(r["verdicts"][2]["verdict"], "FASTER")  # 9 vs 20
        # control
        c = r["control"]
        self.assertEqual([p["at"] for p in c["checkpoints"]], ["start", "after_event_timing", "after_profiler", "end"])
        self.assertEqual((c["start_us"], c["end_us"], c["drift"], c["flagged"]), (100.0, 100.0, 0.0, False))
        self.assertEqual(r["flags"], [])
        self.assertEqual(self.backend.released, 1)
        self.assertTrue(any("rust current" in l for l in self.lines))

    def test_rotated_rounds(self):
        r = self.run_with(mode="hot")
        spans = [e[1] for e in self.backend.log if e[0] == "span"]
        n = len(LN_ALL)
        rounds = [spans[i * n:(i + 1) * n] for i in range(3)]
        for i, order in enumerate(rounds):
            self.assertEqual(order, rotate(LN_ALL, i))
        self.assertEqual(r["ops"][0]["round_orders"]["hot"], [rotate(LN_ALL, i) for i in range(3)])
        self.assertIsNone(r["ops"][0]["round_orders"]["cold"])
        # rounds of 3 samples each (9 over 3 rounds), every one hot
        self.assertEqual([(e[2], e[3]) for e in self.backend.log if e[0] == "span"][:3 * n], [(3, False)] * (3 * n))

    def test_verdict_segments_are_abba_on_kernel_time(self):
        self.run_with(mode="hot", pairs=[], times={"triton": 8.0})
        segs = [e for e in self.backend.log if e[0] == "kseg"]
        self.assertEqual(len(segs), 4 * SMALL.verdict_rounds)
        a, b = "rust current", "triton"
        self.assertEqual([e[1] for e in segs[:8]], [a, b, b, a, a, b, b, a])
        # every segment: its kernels per call, warm-up calls, then the measured calls, hot
        self.assertEqual({e[2:] for e in segs}, {(1, SMALL.segment_warmup, SMALL.verdict_samples, False)})

    def test_an_implementation_outside_the_contract_is_never_the_best_alternative(self):
        # torch is fastest but computes in another precision (as cuBLAS TF32 does): triton stands for the alternatives.
        r = self.run_with(mode="hot", pairs=[], outside=["torch"],
                          kernel_times={"rust current": 8.0, "rust mage-001": 50.0, "torch": 2.0, "torch_compile": 60.0, "triton": 7.0})
        best = r["ops"][0]["best_alternative"]
        self.assertEqual(best["implementation"], "triton")
        self.assertNotIn("torch", best["candidates"])
        self.assertEqual(self.row(r, "torch")["info"]["outside_contract"], "fake: another precision")
        self.assertEqual(r["verdicts"][0]["verdict"], "SLOWER")

    def test_kernel_time_decides_where_spans_disagree(self):
        # The Rust kernel is slower (8 µs against 4) though its span is shorter (5 against 10):
        # the kernel verdict says SLOWER, and the span verdict, labelled as the launch path, says FASTER.
        r = self.run_with(mode="hot", pairs=[], span_verdicts=True,
                          times={"rust current": 5.0, "rust mage-001": 50.0, "torch": 10.0, "torch_compile": 60.0, "triton": 70.0},
                          kernel_times={"rust current": 8.0, "rust mage-001": 50.0, "torch": 4.0, "torch_compile": 60.0, "triton": 70.0})
        self.assertEqual(r["ops"][0]["best_alternative"]["implementation"], "torch")
        kernel, span = r["verdicts"]
        self.assertEqual((kernel["instrument"], kernel["verdict"]), ("kernel", "SLOWER"))
        self.assertAlmostEqual(kernel["median_ratio"], 8.001 / 4.001, places=6)
        self.assertEqual((span["instrument"], span["verdict"]), ("span", "FASTER"))
        self.assertIn("launch path", span["instrument_text"])

    def test_kernels_per_call_split_the_profile(self):
        self.run_with(mode="hot", pairs=[], kernels_per_call={"torch": 2})
        segs = {(e[1], e[2]) for e in self.backend.log if e[0] == "kseg"}
        self.assertIn(("torch", 2), segs)

    def test_a_fractional_kernel_count_voids_the_kernel_verdict(self):
        write_manifest(self.root, [layernorm_op(self.root, pairs=[])], mode="hot")
        m = load_manifest(self.root)
        backend = FakeBackend(m, SMALL, times={"triton": 8.0})
        real = backend.kernel_time
        backend.kernel_time = lambda impl, w, c: {**real(impl, w, c), "kernels_per_call": 1.5} if impl.name == "triton" else real(impl, w, c)
        r = run_session(m, backend, SMALL, self.out, progress=self.lines.append)
        v = r["verdicts"][0]
        self.assertIsNone(v["verdict"])
        self.assertIn("no whole number of kernels per call", v["error"])

    def test_hot_only_and_cold_only(self):
        r = self.run_with(mode="hot")
        self.assertTrue(all(x["cold"] is None for x in r["results"]))
        self.assertEqual({v["mode"] for v in r["verdicts"]}, {"hot"})
        r = self.run_with(mode="cold")
        for x in r["results"]:
            self.assertIsNone(x["hot"]["span"])
            self.assertIsNone(x["hot"]["b2b_us"])
            self.assertIsNotNone(x["hot"]["kernel_us"])  # the profiler still measures kernel time
            self.assertEqual(len(x["cold"]["span"]["samples_us"]), 9)
        self.assertEqual({v["mode"] for v in r["verdicts"]}, {"cold"})
        self.assertFalse(any(e[0] == "b2b" for e in self.backend.log))


class Failures(Base):
    def test_wrong_implementation_is_not_timed(self):
        r = self.run_with(wrong=["torch"], times={"torch": 1.0})
        row = self.row(r, "torch")
        self.assertFalse(row["correct_before"]["passed"])
        self.assertIn("wrong before timing: 6 of 6 elements", row["error"])
        self.assertIsNone(row["hot"])
        self.assertIsNone(row["cold"])
        self.assertIsNone(row["correct_after"])
        timed = {e[1] for e in self.backend.log if e[0] in ("span", "b2b", "profile", "warm")}
        self.assertNotIn("torch", timed)
        # the fastest (but wrong) one is not the best alternative
        self.assertNotEqual(r["ops"][0]["best_alternative"]["implementation"], "torch")

    def test_broken_implementation(self):
        r = self.run_with(broken=["triton"])
        row = self.row(r, "triton")
        self.assertEqual(row["error"], "could not build")
        self.assertIsNone(row["correct_before"])
        self.assertNotIn("triton", {e[1] for e in self.backend.log if e[0] == "check"})

    def test_wrong_after_timing_drops_times_and_verdicts(self):
        r = self.run_with(mode="hot", wrong_after=["rust mage-001"])
        row = self.row(r, "rust mage-001")
        self.assertTrue(row["correct_before"]["passed"])
        self.assertFalse(row["correct_after"]["passed"])
        self.assertIn("wrong after timing", row["error"])
        self.assertIsNone(row["hot"])
        pair = [v for v in r["verdicts"] if v["b"] == "rust mage-001"][0]
        self.assertIsNone(pair["verdict"])
        self.assertIsNone(pair["ratios"])
        self.assertIn("failed its correctness check after timing", pair["error"])
        auto = [v for v in r["verdicts"] if v["auto"]][0]
        self.assertIsNotNone(auto["verdict"])

    def test_an_unreadable_case_is_an_op_error(self):
        ops = [layernorm_op(self.root), layernorm_op(self.root, rows=3)]
        (self.root / ops[0]["case_dir"] / "input.json").unlink()
        r = self.run_with(ops=ops)
        self.assertTrue(r["complete"])
        self.assertIn("input.json", r["ops"][0]["error"])
        self.assertIsNone(r["ops"][1]["error"])
        self.assertTrue(all(x["dims"] == [3, 3] for x in r["results"]))

    def test_no_rust_current_means_no_auto_verdict(self):
        r = self.run_with(mode="hot", ops=[layernorm_op(self.root, stages=("mage-001",), pairs=[])])
        self.assertEqual(r["verdicts"], [])
        self.assertTrue(any("no `rust current`" in n for n in r["ops"][0]["notes"]))

    def test_all_alternatives_wrong(self):
        r = self.run_with(mode="hot", wrong=["torch", "torch_compile", "triton"], pairs=[])
        self.assertIsNone(r["ops"][0]["best_alternative"])
        self.assertIn("no correct non-Rust implementation", r["verdicts"][0]["error"])

    def test_recompile_is_reported(self):
        r = self.run_with(mode="hot", recompiles=["torch_compile"])
        row = self.row(r, "torch_compile")
        self.assertTrue(row["recompiled"])
        self.assertTrue(any("stats.calls_captured" in n for n in row["notes"]))

    def test_control_drift_is_flagged(self):
        r = self.run_with(mode="hot", control_us=(100.0, 101.0, 102.0, 104.0))
        c = r["control"]
        self.assertAlmostEqual(c["drift"], 0.04)
        self.assertTrue(c["flagged"])
        self.assertAlmostEqual(c["max_abs_checkpoint_drift"], 0.04)
        self.assertTrue(any("control kernel moved +4.0%" in f for f in r["flags"]))

    def test_skip(self):
        r = self.run_with(mode="hot", skip={"torch_compile", "rust mage-001"}, pairs=[])
        self.assertEqual([x["implementation"] for x in r["results"]], ["rust current", "torch", "triton"])

    def test_abort_is_reported(self):
        write_manifest(self.root, [layernorm_op(self.root)], mode="hot")
        m = load_manifest(self.root)
        backend = FakeBackend(m, SMALL)

        def boom(*a):
            raise RuntimeError("device lost")

        backend.kernel_time = boom  # per-implementation failure: a note, not an abort
        backend.control = boom  # control failures are recorded, never fatal
        backend.smi = boom  # this one aborts the session
        report = run_session(m, backend, SMALL, self.out, progress=self.lines.append)
        self.assertFalse(report["complete"])
        self.assertIn("session aborted: device lost", report["error"])
        self.assertFalse(json.loads(self.out.read_text())["complete"])


class QuickSettings(unittest.TestCase):
    def test_quick_is_consistent(self):
        from mage_compare.stats import round_sizes

        q = Settings.quick()
        self.assertEqual(sum(round_sizes(q.span_samples, q.span_rounds)), q.span_samples)
        d = Settings()
        self.assertEqual((d.span_samples, d.span_rounds, d.b2b_calls, d.b2b_runs, d.profiler_calls, d.verdict_rounds,
                          d.verdict_samples, d.control_samples, d.drift_limit),
                         (300, 3, 100, 3, 100, 8, 50, 50, 0.03))


if __name__ == "__main__":
    unittest.main()
