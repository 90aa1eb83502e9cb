import json
import tempfile
import unittest
from pathlib import Path

from mage_compare.manifest import Arg, ManifestError, load_manifest, parse_manifest

from .helpers import layernorm_op, neighbor_op, write_manifest


class ManifestTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def load_obj(self, obj):
        (self.root / "manifest.json").write_text(json.dumps(obj))
        return load_manifest(self.root)

    def base(self):
        return {"namespace": "n", "mode": "hot", "environment": {}, "ops": [layernorm_op(self.root)], "verdict_pairs": []}

    def test_valid_manifest(self):
        write_manifest(self.root, [layernorm_op(self.root), neighbor_op(self.root)])
        m = load_manifest(self.root)
        self.assertEqual(m.namespace, "mage-test")
        self.assertEqual(m.mode, "both")
        self.assertTrue(m.hot and m.cold)
        self.assertEqual(m.environment, {"toolchain": "nightly-test"})
        ln, nb = m.ops
        self.assertEqual(ln.op, "layernorm")
        self.assertEqual(ln.dims, [2, 3])
        self.assertEqual(ln.case_path, self.root / ln.case_dir)
        self.assertIsNone(ln.problem)
        self.assertEqual([r.name for r in ln.rust], ["rust current", "rust mage-001"])
        launch = ln.rust[0].plan.launches[0]
        self.assertEqual(launch.grid, (2, 1, 1))
        self.assertEqual(launch.args[0], Arg("input", 0))
        self.assertEqual(launch.args[3], Arg("output"))
        self.assertEqual(launch.args[4], Arg("u32", 2))
        self.assertEqual(ln.rust[0].ptx_path, self.root / "ptx/mage_layernorm.ptx")
        self.assertIsNone(ln.rust[0].problem)
        self.assertEqual(ln.label, "layernorm 2x3")
        self.assertEqual(nb.inputs[2].elem, "u32")
        self.assertEqual(m.verdict_pairs[0].a, "rust current")

    def test_missing_dir_and_file(self):
        with self.assertRaisesRegex(ManifestError, "not a directory"):
            load_manifest(self.root / "nope")
        with self.assertRaisesRegex(ManifestError, "no manifest"):
            load_manifest(self.root)

    def test_bad_json(self):
        (self.root / "manifest.json").write_text("{")
        with self.assertRaisesRegex(ManifestError, "not valid JSON"):
            load_manifest(self.root)

    def test_bad_mode(self):
        obj = self.base()
        obj["mode"] = "warm"
        with self.assertRaisesRegex(ManifestError, r"mode: `warm` is not one of hot, cold, both"):
            self.load_obj(obj)

    def test_missing_key_names_path(self):
        obj = self.base()
        del obj["ops"][0]["rust"][1]["plan"]["launches"][0]["grid"]
        with self.assertRaisesRegex(ManifestError, r"ops\[0\]\.rust\[1\]\.plan\.launches\[0\]: missing key `grid`"):
            self.load_obj(obj)

    def test_bad_arg(self):
        obj = self.base()
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["args"][3] = {"output": True, "u32": 1}
        with self.assertRaisesRegex(ManifestError, r"args\[3\]: an argument is an object with exactly one"):
            self.load_obj(obj)
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["args"][3] = {"pointer": 1}
        with self.assertRaisesRegex(ManifestError, "unknown argument kind `pointer`"):
            self.load_obj(obj)
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["args"][3] = {"u32": 2**32}
        with self.assertRaisesRegex(ManifestError, "does not fit in 32 bits"):
            self.load_obj(obj)
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["args"][3] = {"u32": -1}
        with self.assertRaisesRegex(ManifestError, "integer >= 0"):
            self.load_obj(obj)
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["args"][3] = {"output": False}
        with self.assertRaisesRegex(ManifestError, "`output` must be true"):
            self.load_obj(obj)

    def test_types(self):
        obj = self.base()
        obj["ops"][0]["dims"] = [2, "3"]
        with self.assertRaisesRegex(ManifestError, r"ops\[0\]\.dims\[1\]: expected an integer"):
            self.load_obj(obj)
        obj = self.base()
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["grid"] = [1, 1]
        with self.assertRaisesRegex(ManifestError, r"grid: expected \[x, y, z\]"):
            self.load_obj(obj)
        obj = self.base()
        obj["ops"][0]["rust"][0]["plan"]["launches"][0]["block"] = [0, 1, 1]
        with self.assertRaisesRegex(ManifestError, "integer >= 1"):
            self.load_obj(obj)
        obj = self.base()
        obj["ops"][0]["tolerance"] = {"abs": -1, "rel": 0}
        with self.assertRaisesRegex(ManifestError, "finite and >= 0"):
            self.load_obj(obj)
        obj = self.base()
        obj["ops"][0]["inputs"][0]["elem"] = "f16"
        with self.assertRaisesRegex(ManifestError, "unknown element type `f16`"):
            self.load_obj(obj)
        obj = self.base()
        obj["ops"][0]["inputs"][0]["file"] = "../a.bin"
        with self.assertRaisesRegex(ManifestError, "plain file name"):
            self.load_obj(obj)

    def test_names(self):
        obj = self.base()
        obj["ops"][0]["rust"][1]["name"] = "rust current"
        with self.assertRaisesRegex(ManifestError, "appears twice"):
            self.load_obj(obj)
        obj["ops"][0]["rust"][1]["name"] = "triton"
        with self.assertRaisesRegex(ManifestError, "built-in implementation"):
            self.load_obj(obj)

    def test_empty_ops_and_self_pair(self):
        obj = self.base()
        obj["ops"] = []
        with self.assertRaisesRegex(ManifestError, "lists no ops"):
            self.load_obj(obj)
        obj = self.base()
        obj["verdict_pairs"] = [{"op": "layernorm", "a": "torch", "b": "torch"}]
        with self.assertRaisesRegex(ManifestError, "with itself"):
            self.load_obj(obj)

    def test_op_level_problems_do_not_stop_the_run(self):
        obj = self.base()
        obj["ops"][0]["inputs"][1]["len"] = 4
        m = self.load_obj(obj)
        self.assertIn("input 1 (b.bin) of layernorm 2x3 holds 3 values; the manifest says 4", m.ops[0].problem)
        obj = self.base()
        obj["ops"][0]["op"] = "softmax"
        self.assertIn("unknown op `softmax`", self.load_obj(obj).ops[0].problem)
        obj = self.base()
        obj["ops"][0]["output_shape"] = [3, 2]
        self.assertIn("the output of layernorm 2x3 is [2, 3]", self.load_obj(obj).ops[0].problem)
        obj = self.base()
        obj["ops"][0]["dims"] = [2, 3, 4]
        self.assertIn("takes 2 dims", self.load_obj(obj).ops[0].problem)

    def test_entry_level_plan_problems(self):
        obj = self.base()
        launch = obj["ops"][0]["rust"][0]["plan"]["launches"][0]
        launch["args"][0] = {"input": 3}
        self.assertIn("input 3, but the op has 3 inputs", self.load_obj(obj).ops[0].rust[0].problem)
        launch["args"][0] = {"scratch": 0}
        self.assertIn("scratch 0, but the plan has 0 scratch buffers", self.load_obj(obj).ops[0].rust[0].problem)
        launch["args"][0] = {"input": 0}
        launch["block"] = [1024, 2, 1]
        self.assertIn("more than 1024 threads", self.load_obj(obj).ops[0].rust[0].problem)
        launch["block"] = [128, 1, 1]
        launch["grid"] = [1, 65536, 1]
        self.assertIn("grid y = 65536 exceeds 65535", self.load_obj(obj).ops[0].rust[0].problem)
        self.assertIsNone(self.load_obj(obj).ops[0].rust[1].problem)

    def test_top_level_must_be_object(self):
        with self.assertRaisesRegex(ManifestError, "top level must be an object"):
            parse_manifest([], self.root)


if __name__ == "__main__":
    unittest.main()
