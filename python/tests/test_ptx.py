import ctypes
import struct
import unittest

from mage_compare.manifest import Arg
from mage_compare.ptx import LaunchError, Value, entry_params, pack_params, param_bytes, resolve_args

from .helpers import PTX

ARGS = [Arg("input", 0), Arg("input", 1), Arg("input", 2), Arg("output"), Arg("u32", 4096), Arg("u32", 768)]


class EntryParams(unittest.TestCase):
    def test_reads_every_entry(self):
        p = entry_params(PTX)
        self.assertEqual(p["layernorm_row"], ["u64", "u64", "u64", "u64", "u32", "u32"])
        self.assertEqual(p["scale"], ["u64", "f32"])
        self.assertEqual(set(p), {"layernorm_row", "scale"})

    def test_no_params_and_comments(self):
        p = entry_params(".visible .entry empty()\n{\n ret;\n}\n.entry k( // .param .u64 fake\n .param .u32 k_param_0\n)")
        self.assertEqual(p["empty"], [])
        self.assertEqual(p["k"], ["u32"])


class Resolve(unittest.TestCase):
    def test_values_in_order(self):
        vals = resolve_args("layernorm_row", ARGS, [100, 200, 300], 400, [], entry_params(PTX)["layernorm_row"])
        self.assertEqual(vals, [Value("ptr", 100), Value("ptr", 200), Value("ptr", 300), Value("ptr", 400),
                                Value("u32", 4096), Value("u32", 768)])

    def test_scratch_and_f32(self):
        vals = resolve_args("k", [Arg("scratch", 1), Arg("f32", 0.5)], [], 0, [10, 20], ["u64", "f32"])
        self.assertEqual(vals, [Value("ptr", 20), Value("f32", 0.5)])
        # .b32 accepts either 32-bit kind
        resolve_args("k", [Arg("u32", 1), Arg("f32", 1.0)], [], 0, [], ["b32", "b32"])

    def test_count_mismatch(self):
        with self.assertRaisesRegex(LaunchError, r"`layernorm_row` takes 6 parameters .* the plan passes 5"):
            resolve_args("layernorm_row", ARGS[:5], [1, 2, 3], 4, [], entry_params(PTX)["layernorm_row"])

    def test_kind_mismatch(self):
        args = [Arg("u32", 1)] + ARGS[1:]
        with self.assertRaisesRegex(LaunchError, r"parameter 0 is \.u64 but the plan passes a u32 \(\{'u32': 1\}\)"):
            resolve_args("layernorm_row", args, [1, 2, 3], 4, [], entry_params(PTX)["layernorm_row"])
        with self.assertRaisesRegex(LaunchError, r"parameter 1 is \.f32 but the plan passes a u32"):
            resolve_args("scale", [Arg("output"), Arg("u32", 3)], [], 4, [], ["u64", "f32"])
        with self.assertRaisesRegex(LaunchError, "cannot pass"):
            resolve_args("s", [Arg("u32", 3)], [], 4, [], ["align"])

    def test_index_out_of_range(self):
        with self.assertRaisesRegex(LaunchError, "input 3, but there are 3 inputs"):
            resolve_args("k", [Arg("input", 3)], [1, 2, 3], 4, [])
        with self.assertRaisesRegex(LaunchError, "scratch 0, but there are 0 scratch"):
            resolve_args("k", [Arg("scratch", 0)], [1], 4, [])
        with self.assertRaisesRegex(LaunchError, "does not fit in a u32"):
            resolve_args("k", [Arg("u32", 2**32)], [], 4, [])


class Pack(unittest.TestCase):
    def test_pointer_array_points_at_values(self):
        vals = [Value("ptr", 0x7F00_0000_1000), Value("u32", 768), Value("f32", 0.25), Value("u32", 2**32 - 1)]
        addr, keep = pack_params(vals)
        arr = (ctypes.c_void_p * 4).from_address(addr)
        self.assertEqual(ctypes.cast(arr[0], ctypes.POINTER(ctypes.c_uint64)).contents.value, 0x7F00_0000_1000)
        self.assertEqual(ctypes.cast(arr[1], ctypes.POINTER(ctypes.c_uint32)).contents.value, 768)
        self.assertEqual(ctypes.cast(arr[2], ctypes.POINTER(ctypes.c_float)).contents.value, 0.25)
        self.assertEqual(ctypes.cast(arr[3], ctypes.POINTER(ctypes.c_uint32)).contents.value, 2**32 - 1)
        self.assertIs(keep[0]._type_, ctypes.c_void_p)
        self.assertEqual(len(keep), 5)

    def test_param_sizes_and_bytes(self):
        b = param_bytes([Value("ptr", 1), Value("u32", 2), Value("f32", 1.0)])
        self.assertEqual([len(x) for x in b], [8, 4, 4])
        self.assertEqual(b[0], struct.pack("<Q", 1))
        self.assertEqual(b[1], struct.pack("<I", 2))
        self.assertEqual(b[2], struct.pack("<f", 1.0))

    def test_empty(self):
        addr, keep = pack_params([])
        self.assertTrue(addr)


if __name__ == "__main__":
    unittest.main()
