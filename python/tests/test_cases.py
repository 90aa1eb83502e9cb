import json
import tempfile
import unittest
from pathlib import Path

from mage_compare.cases import CaseError, check_csr, read_case, sha256_file, u32_array
from mage_compare.manifest import load_manifest

from .helpers import f32, layernorm_op, neighbor_op, u32, write_manifest


class ReadCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        write_manifest(self.root, [layernorm_op(self.root)])
        self.spec = load_manifest(self.root).ops[0]
        self.case = self.spec.case_path

    def tearDown(self):
        self.tmp.cleanup()

    def test_reads_and_verifies(self):
        datas, shas = read_case(self.spec)
        self.assertEqual([len(d) for d in datas], [24, 12, 12])
        self.assertEqual(datas[1], f32(1.0, 1.0, 1.0))
        self.assertEqual(set(shas), {"a.bin", "b.bin", "c.bin"})
        self.assertEqual(shas["a.bin"], sha256_file(self.case / "a.bin"))

    def test_sha_mismatch(self):
        (self.case / "b.bin").write_bytes(f32(1.0, 1.0, 2.0))
        with self.assertRaisesRegex(CaseError, r"b\.bin: sha256 [0-9a-f]{64} does not match inputs\.sha256\.json"):
            read_case(self.spec)

    def test_uppercase_sha_accepted(self):
        sums = json.loads((self.case / "inputs.sha256.json").read_text())
        sums = {k: v.upper() for k, v in sums.items()}
        (self.case / "inputs.sha256.json").write_text(json.dumps(sums))
        read_case(self.spec)

    def test_missing_file_sum_and_dir(self):
        (self.case / "c.bin").unlink()
        with self.assertRaisesRegex(CaseError, r"c\.bin: missing"):
            read_case(self.spec)
        sums = json.loads((self.case / "inputs.sha256.json").read_text())
        del sums["a.bin"]
        (self.case / "inputs.sha256.json").write_text(json.dumps(sums))
        with self.assertRaisesRegex(CaseError, r"no sha256 for a\.bin"):
            read_case(self.spec)
        (self.case / "inputs.sha256.json").unlink()
        with self.assertRaisesRegex(CaseError, r"inputs\.sha256\.json: missing"):
            read_case(self.spec)
        self.spec.case_path = self.root / "elsewhere"
        with self.assertRaisesRegex(CaseError, "does not exist"):
            read_case(self.spec)

    def test_short_file(self):
        data = f32(1.0, 1.0)
        (self.case / "b.bin").write_bytes(data)
        import hashlib

        sums = json.loads((self.case / "inputs.sha256.json").read_text())
        sums["b.bin"] = hashlib.sha256(data).hexdigest()
        (self.case / "inputs.sha256.json").write_text(json.dumps(sums))
        with self.assertRaisesRegex(CaseError, "8 bytes; the manifest expects 3 f32 values"):
            read_case(self.spec)

    def test_input_json_must_agree(self):
        (self.case / "input.json").write_text(json.dumps({"op": "layernorm", "dims": [3, 2]}))
        with self.assertRaisesRegex(CaseError, r"dims are \[3, 2\]"):
            read_case(self.spec)
        (self.case / "input.json").write_text(json.dumps({"op": "gelu", "dims": [2, 3]}))
        with self.assertRaisesRegex(CaseError, "op is `gelu`"):
            read_case(self.spec)


class Csr(unittest.TestCase):
    def test_u32_array(self):
        self.assertEqual(list(u32_array(u32(0, 1, 2**32 - 1))), [0, 1, 2**32 - 1])

    def test_valid(self):
        self.assertIsNone(check_csr(2, 3, [0, 1, 3], [1, 0, 1]))
        self.assertIsNone(check_csr(3, 0, [0, 0, 0, 0], []))

    def test_invalid(self):
        self.assertIn("start at 0", check_csr(2, 3, [1, 1, 3], [0, 0, 0]))
        self.assertIn("decreases at row 1: rowptr[1] = 2 > rowptr[2] = 1", check_csr(2, 3, [0, 2, 1], [0, 0, 0]))
        self.assertIn("must equal the edge count 3", check_csr(2, 3, [0, 1, 2], [0, 0, 0]))
        self.assertIn("indices[1] is 2", check_csr(2, 3, [0, 1, 3], [0, 2, 1]))
        self.assertIn("n = 2 needs 3", check_csr(2, 3, [0, 3], [0, 0, 0]))
        self.assertIn("indices has 2 entries", check_csr(2, 3, [0, 1, 3], [0, 0]))

    def test_from_case(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            write_manifest(root, [neighbor_op(root)], pairs=[])
            spec = load_manifest(root).ops[0]
            datas, _ = read_case(spec)
            self.assertIsNone(check_csr(2, 3, u32_array(datas[2]), u32_array(datas[3])))


if __name__ == "__main__":
    unittest.main()
