"""What judging a case costs, by part: the inputs, the float64 reference, the same-dtype baseline, and the
comparison (harness.oracle.judge less its two references), per family, on this machine's device.

    python benchmarks/judge.py --families fwd,bwd --cases 200 --per-kernel 25 --per-row 25
    python benchmarks/judge.py --cases-from reports/run/cases.jsonl --device cuda

No kernel is compiled: each case is judged with its float64 reference rounded to the input dtype standing in
for the kernel's outputs (a correct kernel's, within a rounding), as harness.worker's warm-up judges. Prints
median and mean milliseconds per case of each part, and the torch operators each part dispatches (on a GPU,
about one kernel launch each; `.item()` and other reads of a value wait for the GPU), with `--verdicts FILE`
also each case's verdict and checks (JSON lines), to compare two versions of the judge on the same cases.
"""
import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from harness import campaign as campaign_mod  # noqa: E402
from harness import kernels, oracle, reference  # noqa: E402


class Ops(TorchDispatchMode):
    """Counts the torch operators dispatched, and the reads of a value back to the host (`.item()`, `bool()`)."""

    def __init__(self):
        super().__init__()
        self.ops, self.reads = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        self.reads += func.__name__.startswith(("_local_scalar_dense", "is_nonzero"))
        return func(*args, **(kwargs or {}))


class Part:
    """Times (and counts the operators of) each call of a function, synchronizing the device after it."""

    def __init__(self, fn, device, counting):
        self.fn, self.device, self.counting = fn, device, counting
        self.seconds, self.ops, self.reads = 0.0, 0, 0

    def __call__(self, *args, **kwargs):
        sync(self.device)
        t0 = time.perf_counter()
        with Ops() if self.counting else _nothing() as ops:
            out = self.fn(*args, **kwargs)
            sync(self.device)
        self.seconds += time.perf_counter() - t0
        if ops is not None:
            self.ops, self.reads = self.ops + ops.ops, self.reads + ops.reads
        return out


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def perturbed(outputs: dict, case, how: int) -> dict:
    """The outputs with an error (`how`: 0 none, 1 noise of 1e-2, 2 one NaN, 3 noise of 1e-4), from the case's seed:
    failures and near misses go through the comparison too."""
    if not how:
        return outputs
    g = torch.Generator().manual_seed(case.seed)
    out = {}
    for name, t in outputs.items():
        noise = torch.randn(t.shape, generator=g).to(device=t.device, dtype=t.dtype)
        t = t + noise * (1e-2 if how == 1 else 1e-4) if how != 2 else t.clone()
        if how == 2 and t.numel():
            t.view(-1)[int(torch.randint(t.numel(), (1,), generator=g))] = float("nan")
        out[name] = t
    return out


def judged(case, device, counting, how=0) -> tuple[dict, dict]:
    """({part: (seconds, operators, reads)}) of judging `case`, and its result as a dict."""
    fam = kernels.family(case.family)
    make = Part(fam.runner.make_inputs, device, counting)
    inputs = make(case, device)
    ref = Part(fam.judge.reference, device, counting)
    outputs = {n: t.to(reference.DTYPES[case.dtype]) if t.is_floating_point() and t.dtype == torch.float64 else t
               for n, t in fam.judge.reference(case, inputs, torch.float64).items()}
    outputs = perturbed(outputs, case, how)
    # Judged as the worker judges, the references timed inside it; the outputs are canonical already.
    fam = dataclasses.replace(fam, judge=dataclasses.replace(fam.judge, reference=lambda c, i, dtype: ref(c, i, dtype),
                                                             canonical=lambda c, o: o))
    whole = Part(oracle.judge, device, counting)
    result = whole(case, fam, inputs, outputs)
    parts = {"inputs": (make.seconds, make.ops, make.reads), "references": (ref.seconds, ref.ops, ref.reads),
             "comparison": (whole.seconds - ref.seconds, whole.ops - ref.ops, whole.reads - ref.reads)}
    return parts, result.to_dict()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="fwd,bwd")
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--per-kernel", type=int, default=25)
    p.add_argument("--per-row", type=int, default=25)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--cases-from", type=Path, help="a run's cases.jsonl instead of drawing")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (a worker's: cores / workers)")
    p.add_argument("--no-count", action="store_true", help="time only (counting operators slows each part)")
    p.add_argument("--verdicts", type=Path, help="write each case's verdict and checks here (JSON lines)")
    p.add_argument("--perturb", action="store_true", help="three cases in four get errors in their outputs (noise of "
                                                          "1e-2, a NaN, noise of 1e-4): failures judged too")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cases = campaign_mod.load_cases(a.cases_from) if a.cases_from else \
        campaign_mod.draw(a.families.split(","), a.cases, a.seed, a.per_kernel, per_row=a.per_row)
    judged(cases[0], a.device, False)  # the device's first calls (allocator, libraries) are not a case's
    by_family = defaultdict(lambda: defaultdict(list))
    verdicts, out = Counter(), []
    for i, case in enumerate(cases):
        parts, result = judged(case, a.device, not a.no_count, i % 4 if a.perturb else 0)
        for name, value in parts.items():
            by_family[case.family][name].append(value)
        verdicts[result["verdict"]] += 1
        out.append({"case_id": case.id, "verdict": result["verdict"], "message": result.get("message"),
                    "checks": result.get("checks")})
    print(f"{len(cases)} cases on {a.device} ({a.threads} CPU threads), verdicts {dict(verdicts)}")
    for family, parts in by_family.items():
        cells = []
        for name, values in parts.items():
            ms = [v[0] * 1e3 for v in values]
            cell = f"{name} {statistics.median(ms):.2f} ms median / {statistics.mean(ms):.2f} mean"
            if not a.no_count:
                cell += f" ({statistics.mean(v[1] for v in values):.0f} ops, {statistics.mean(v[2] for v in values):.0f} reads)"
            cells.append(cell)
        print(f"  {family} ({len(parts['inputs'])} cases): " + "; ".join(cells))
    if a.verdicts:
        a.verdicts.write_text("".join(json.dumps(r) + "\n" for r in out))


if __name__ == "__main__":
    main()
