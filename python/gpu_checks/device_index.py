"""A tensor on cuda:N launches on device N (torch and a CUDA device needed).

    PYTHONPATH=dist/mage/python python3 python/gpu_checks/device_index.py OP=DIR...

Each DIR is a case directory of OP (`mage fixtures OP --dims D --out DIR`). For
every visible device N, with torch's current device left at 0, every case:
its inputs are copied to cuda:N, the output is poisoned there,
`mage.launch(op, "current", ...)` runs, and

* the output is checked against the Rust f64 reference of the case under
  the op's tolerance, through `mage.compare` (the rule `run` uses);
* the profiler's kernel records of the call all name device N;
* torch's current device is still 0 afterwards.

Then a tensor on a device past the count is refused with a one-line
`mage.MageError`. One JSON line per check; exit status 1 on any failure.
"""

import json
import sys

POISON = 0x7FC0BEEF


def tensors(case, device):
    """The case's inputs as tensors of their shapes on `device`."""
    import torch

    import mage

    dtypes = {"f32": torch.float32, "u32": torch.int32}
    info = mage.op_info(case.op)
    out = []
    for spec, raw, shape in zip(info["inputs"], case.input_bytes(), mage.input_shapes(case.op, case.dims)):
        dtype = dtypes[spec["elem"]]
        out.append(torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).to(device))
    return out


def check(case, n):
    import torch
    from torch.profiler import ProfilerActivity, profile

    import mage

    device = torch.device("cuda", n)
    inputs = tensors(case, device)
    out = torch.empty(mage.output_shape(case.op, case.dims), dtype=torch.int32, device=device).fill_(POISON).view(torch.float32)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        stage = mage.launch(case.op, "current", inputs, out)
        torch.cuda.synchronize(n)
    kernel_devices = sorted({e.device_index for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    tol = case.tolerance()
    got = out.cpu().numpy().tobytes()
    cmp = mage.compare(got, case.reference(), tol["abs"], tol["rel"], case.magnitudes() or None, tol["of_magnitude"])
    ok = bool(cmp["passed"]) and kernel_devices == [n] and torch.cuda.current_device() == 0
    return {"device": f"cuda:{n}", "case": f"{case.op} {case.label}", "stage": stage, "kernel_devices": kernel_devices,
            "current_device_after": torch.cuda.current_device(), "passed": cmp["passed"], "failures": cmp["failures"],
            "max_abs_err": cmp["max_abs_err"], "worst_ratio": cmp.get("worst_ratio"), "ok": ok}


def main(args):
    import torch

    import mage

    count = torch.cuda.device_count()
    cases = [mage.read_case(*arg.split("=", 1)) for arg in args]
    failures = 0
    for n in range(count):
        for case in cases:
            r = check(case, n)
            failures += not r["ok"]
            print(json.dumps(r), flush=True)
    try:
        mage.evict_l2(device=count)
        refused = {"past_the_count": f"cuda:{count}", "refused": False}
        failures += 1
    except mage.MageError as e:
        refused = {"past_the_count": f"cuda:{count}", "refused": True, "error": str(e), "one_line": "\n" not in str(e)}
        failures += not refused["one_line"]
    print(json.dumps(refused))
    print(json.dumps({"devices": count, "cases": len(cases), "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
