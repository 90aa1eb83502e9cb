import unittest
from unittest import mock

from mage_compare import smi


class Parse(unittest.TestCase):
    def test_line(self):
        g = smi.parse_line("NVIDIA H200, 580.159.04, 1980, 3201, P0")
        self.assertEqual(g["name"], "NVIDIA H200")
        self.assertEqual(g["driver_version"], "580.159.04")
        self.assertEqual((g["sm_mhz"], g["mem_mhz"], g["pstate"]), (1980, 3201, "P0"))
        self.assertNotIn("error", g)

    def test_missing_values(self):
        g = smi.parse_line("NVIDIA H200, 580.159.04, [N/A], N/A, P0")
        self.assertIsNone(g["sm_mhz"])
        self.assertIsNone(g["mem_mhz"])
        g = smi.parse_line("garbage")
        self.assertIn("expected 5 fields", g["error"])
        self.assertIsNone(g["sm_mhz"])

    def test_output(self):
        out = smi.parse_output("A, 1, 2, 3, P0\nB, 1, 2, 3, P2\n\n")
        self.assertEqual([g["name"] for g in out], ["A", "B"])


class Query(unittest.TestCase):
    def test_no_nvidia_smi(self):
        with mock.patch("subprocess.run", side_effect=FileNotFoundError("nvidia-smi")):
            s = smi.query("GPU-1")
        self.assertIsNone(s["gpu"])
        self.assertIn("nvidia-smi", s["error"])

    def test_falls_back_without_id_and_never_sets(self):
        calls = []

        def run(cmd, **kw):
            calls.append(cmd)
            r = mock.Mock()
            if any(c.startswith("--id=") for c in cmd):
                r.returncode, r.stdout, r.stderr = 6, "", "No devices were found"
            else:
                r.returncode, r.stdout, r.stderr = 0, "NVIDIA H200, 580.1, 1980, 3201, P0\n", ""
            return r

        with mock.patch("subprocess.run", side_effect=run):
            s = smi.query("GPU-x")
        self.assertEqual(s["gpu"]["sm_mhz"], 1980)
        self.assertIn("exit 6", s["error"])
        for c in calls:  # read-only queries only
            self.assertTrue(all(a.startswith("--query-gpu=") or a.startswith("--format=") or a.startswith("--id=")
                                for a in c[1:]), c)


if __name__ == "__main__":
    unittest.main()
