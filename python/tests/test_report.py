import json
import math
import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from mage_compare.report import sanitize, write_report


class Sanitize(unittest.TestCase):
    def test_non_finite_become_null(self):
        out = sanitize({"a": math.nan, "b": [1.0, math.inf, -math.inf], "c": (1, 2), 3: Path("/x"), "d": True})
        self.assertEqual(out, {"a": None, "b": [1.0, None, None], "c": [1, 2], "3": "/x", "d": True})
        json.dumps(out, allow_nan=False)


class Atomic(unittest.TestCase):
    def test_writes_and_replaces(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "sub" / "comparison.json"
            write_report(p, {"x": 1, "nan": math.nan})
            self.assertEqual(json.loads(p.read_text()), {"x": 1, "nan": None})
            write_report(p, {"x": 2})
            self.assertEqual(json.loads(p.read_text()), {"x": 2})
            self.assertEqual(os.listdir(p.parent), ["comparison.json"])  # no temp file left

    def test_failed_write_keeps_old_file_and_cleans_up(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "comparison.json"
            write_report(p, {"x": 1})
            with mock.patch("os.replace", side_effect=OSError("disk full")):
                with self.assertRaises(OSError):
                    write_report(p, {"x": 2})
            self.assertEqual(json.loads(p.read_text()), {"x": 1})
            self.assertEqual(os.listdir(d), ["comparison.json"])

    def test_replace_is_the_commit_point(self):
        seen = []
        real = os.replace

        def spy(src, dst):
            seen.append((Path(src).parent, json.loads(Path(src).read_text())))
            return real(src, dst)

        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "c.json"
            with mock.patch("os.replace", side_effect=spy):
                write_report(p, {"y": [1, 2]})
            self.assertEqual(seen, [(Path(d), {"y": [1, 2]})])


if __name__ == "__main__":
    unittest.main()
