import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path

from mage_compare import cli
from mage_compare.runner import Settings

from .helpers import FakeBackend, layernorm_op, write_manifest


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def main(self, argv, factory=None):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(argv, backend_factory=factory)
        return code, err.getvalue()

    def test_args(self):
        a = cli.parse_args(["d", "--out", "x.json", "--skip", "torch_compile", "--skip", "rust", "--quick", "--spread", "iqr"])
        self.assertEqual((a.dir, a.out, a.skip, a.quick, a.spread), (Path("d"), Path("x.json"), ["torch_compile", "rust"], True, "iqr"))
        a = cli.parse_args(["d"])
        self.assertEqual((a.out, a.skip, a.quick, a.no_golden, a.spread), (None, [], False, False, "minmax"))

    def test_bad_manifest_exit_2_with_json_error(self):
        (self.root / "manifest.json").write_text(json.dumps({"namespace": "n", "mode": "warm", "ops": []}))
        code, err = self.main([str(self.root)])
        self.assertEqual(code, 2)
        self.assertIn("mode: `warm`", err)
        r = json.loads((self.root / "comparison.json").read_text())
        self.assertFalse(r["complete"])
        self.assertIn("mode: `warm`", r["error"])
        self.assertEqual(r["results"], [])

    def test_missing_dir(self):
        code, err = self.main([str(self.root / "nope")])
        self.assertEqual(code, 2)
        self.assertIn("not a directory", err)

    def test_backend_failure_exit_1(self):
        write_manifest(self.root, [layernorm_op(self.root)])

        def factory(*a):
            raise RuntimeError("torch sees no CUDA device")

        code, err = self.main([str(self.root), "--out", str(self.root / "o.json")], factory)
        self.assertEqual(code, 1)
        r = json.loads((self.root / "o.json").read_text())
        self.assertIn("torch sees no CUDA device", r["error"])

    def test_fake_run_exit_0(self):
        write_manifest(self.root, [layernorm_op(self.root)], mode="hot")
        seen = {}

        def factory(manifest, settings, skip):
            seen.update(settings=settings, skip=skip)
            return FakeBackend(manifest, settings, skip)

        code, err = self.main([str(self.root), "--quick", "--skip", "torch_compile"], factory)
        self.assertEqual(code, 0, err)
        self.assertEqual(seen["skip"], {"torch_compile"})
        self.assertEqual(seen["settings"].span_samples, Settings.quick().span_samples)
        r = json.loads((self.root / "comparison.json").read_text())
        self.assertTrue(r["complete"])
        self.assertNotIn("torch_compile", [x["implementation"] for x in r["results"]])
        self.assertIn("wrote", err)

    def test_only_op(self):
        write_manifest(self.root, [layernorm_op(self.root)], mode="hot")
        code, err = self.main([str(self.root), "--only-op", "matmul"], lambda m, s, k: FakeBackend(m, s, k))
        self.assertEqual(code, 2)
        self.assertIn("leaves no op", err)

    def test_cli_does_not_import_torch(self):
        self.assertNotIn("torch", sys.modules.get("mage_compare.cli").__dict__)


if __name__ == "__main__":
    unittest.main()
