import ast
import subprocess
import sys
import unittest
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "mage_compare"
PURE = ["mage_compare", "mage_compare.cli", "mage_compare.runner", "mage_compare.manifest", "mage_compare.definitions",
        "mage_compare.stats", "mage_compare.verdict", "mage_compare.numeric", "mage_compare.report",
        "mage_compare.smi", "mage_compare.profparse", "mage_compare.ops",
        "mage_e2e", "mage_e2e.agreement", "mage_e2e.__main__"]
GPU_ONLY = ["gpu", "impls", "reference", "triton_kernels"]
HEAVY = ["torch", "triton", "numpy", "cuda", "cupy", "mage"]


class Imports(unittest.TestCase):
    def test_pure_modules_import_no_heavy_package(self):
        code = (
            "import sys\n"
            f"for m in {PURE!r}: __import__(m)\n"
            f"bad = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "print(','.join(bad))\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "", f"imported: {r.stdout.strip()}")

    def test_pure_modules_do_not_reference_gpu_modules_at_top_level(self):
        for path in PKG.glob("*.py"):
            if path.stem in GPU_ONLY:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:  # module level only; function bodies may import lazily
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    for n in names:
                        self.assertFalse(any(n == h or n.startswith(h + ".") for h in HEAVY), f"{path.name}: {n}")
                        self.assertFalse(any(n.endswith(g) and n for g in GPU_ONLY), f"{path.name} imports {n}")

    def test_gpu_modules_are_valid_python(self):
        for name in GPU_ONLY:
            path = PKG / f"{name}.py"
            compile(path.read_text(), str(path), "exec")

    def test_gpu_checks_import_torch_and_mage_only_when_run(self):
        checks = sorted((PKG.parent / "gpu_checks").glob("*.py"))
        self.assertIn("module_graph", [p.stem for p in checks])
        for path in checks:
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    self.assertFalse(any(n == h or n.startswith(h + ".") for n in names for h in HEAVY), f"{path.name}: {names}")
        code = "import sys, gpu_checks.module_graph\nprint(','.join(m for m in " + repr(HEAVY) + " if m in sys.modules))\n"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "", f"imported: {r.stdout.strip()}")


if __name__ == "__main__":
    unittest.main()
