import json
import tempfile
import unittest
from pathlib import Path

from mage_compare.manifest import ManifestError, load_manifest

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

    def base(self, **op):
        return {"namespace": "n", "mode": "hot", "environment": {}, "ops": [{**layernorm_op(self.root), **op}]}

    def test_valid_manifest(self):
        write_manifest(self.root, [layernorm_op(self.root), neighbor_op(self.root)], span_verdicts=True)
        m = load_manifest(self.root)
        self.assertEqual((m.namespace, m.mode, m.span_verdicts), ("mage-test", "both", True))
        self.assertTrue(m.hot and m.cold)
        self.assertEqual(m.environment, {"toolchain": "nightly-test"})
        ln, nb = m.ops
        self.assertEqual((ln.op, ln.dims, ln.label, ln.generator), ("layernorm", [2, 3], "2x3", "normal"))
        self.assertEqual(ln.case_path, self.root / ln.case_dir)
        self.assertEqual(ln.stages, ["current", "mage-001"])
        self.assertEqual(ln.pairs, [("rust current", "rust mage-001")])
        self.assertEqual(ln.current_picks, "mage-001")
        self.assertEqual(ln.title, "layernorm 2x3")
        self.assertEqual((nb.dims, nb.generator, nb.pairs), ([2, 2, 3], "uniform", []))

    def test_defaults(self):
        m = self.load_obj({"namespace": "n", "mode": "cold", "ops": [
            {"op": "gelu", "dims": [2, 3], "case_dir": "c", "stages": ["current"]}]})
        self.assertFalse(m.span_verdicts)
        self.assertEqual((m.ops[0].generator, m.ops[0].label, m.ops[0].pairs), ("normal", "2x3", []))

    def test_errors_name_the_path(self):
        for obj, msg in [
            ([], "top level must be an object"),
            ({"namespace": "n", "mode": "warm", "ops": []}, "mode: `warm`"),
            ({"namespace": "n", "mode": "hot", "ops": []}, "ops: the manifest lists no ops"),
            ({"namespace": "n", "mode": "hot", "span_verdicts": "yes", "ops": [1]}, "span_verdicts: expected true or false"),
            (self.base(dims=[2, "3"]), "ops[0].dims[1]: expected an integer"),
            (self.base(stages=["current", "current"]), "ops[0].stages: a stage appears twice"),
            (self.base(pairs=[{"a": "rust current", "b": "rust current"}]), "ops[0].pairs[0]: compares `rust current` with itself"),
            (self.base(pairs=[{"a": "rust current", "b": "rust mage-999"}]), "ops[0].pairs[0].b: `rust mage-999` is neither"),
            (self.base(pairs=[{"a": "rust current"}]), "ops[0].pairs[0]: missing key `b`"),
        ]:
            with self.subTest(msg=msg):
                with self.assertRaises(ManifestError) as e:
                    self.load_obj(obj)
                self.assertIn(msg, str(e.exception))

    def test_builtin_and_best_alternative_are_valid_pair_names(self):
        m = self.load_obj(self.base(pairs=[{"a": "rust current", "b": "best alternative"}, {"a": "triton", "b": "torch"}]))
        self.assertEqual(m.ops[0].pairs, [("rust current", "best alternative"), ("triton", "torch")])

    def test_missing_or_unreadable(self):
        with self.assertRaises(ManifestError) as e:
            load_manifest(self.root)
        self.assertIn("no manifest", str(e.exception))
        (self.root / "manifest.json").write_text("{")
        with self.assertRaises(ManifestError) as e:
            load_manifest(self.root)
        self.assertIn("not valid JSON", str(e.exception))


if __name__ == "__main__":
    unittest.main()
