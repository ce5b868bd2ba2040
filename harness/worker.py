"""The worker side of the process boundary: build, scan, run and judge one case at a time.

`python -m harness.worker --target auto|sm_90a` reads requests on stdin, {"event": "run", "case": {...}} (or
"build": its kernel only), and answers on stdout: {"event": "stage", "stage": "run"} once the kernel is compiled,
then {"event": "result", ...}: one JSON event a line each way. Compiled kernels stay in memory, keyed by the
case's static fields; TileLang keeps them on disk (TILELANG_CACHE_DIR) too. After a device fault the worker
exits: its CUDA context is dead.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from harness import blame, kernels, oracle
from harness import case as case_mod
from harness.result import VALID_PART_FAILS, Result, ScanFinding

SPAWNED_AT = "HARNESS_SPAWNED_AT"  # set by the pool: time.time() when it started this worker
# Compile targets without a GPU (--arch): Hopper, every family's; Blackwell, what the sm100 outside
# kernels and ws/ws_bwd compile for. "auto" (the local GPU) is the other target a worker takes.
ARCHES = ("sm_90a", "sm_100a")


def run_case(case, target, cache: dict, on_stage=lambda stage, **found: None, build_only=False, guarded=True) -> Result:
    """Compile (cached, a compile error too), scan the generated code, run, and judge: one Result. on_stage("run")
    also carries what the scan found, so a run that hangs or kills the worker keeps it. Compiling
    for another target, or asked to build only, it stops at COMPILED. `guarded`: the run's buffers lie between
    guard bands (harness.bands)."""
    fam = kernels.family(case.family)
    runner = fam.runner
    reason = fam.offer.unsupported(case)
    if not reason and runner.arch and target != runner.arch:
        reason = f"{case.family} compiles for {runner.arch} only (--arch {runner.arch}), not {target}"
    if not reason and (case.knobs or runner.needs):
        from harness import compat
        reason = compat.missing_knobs(case.knobs) or compat.missing_language(runner.needs)
    reason = reason or runner.lacks(case)
    if reason:
        return Result.of(case, "UNSUPPORTED", "plan", reason)
    key = kernels.kernel_key(case)
    seconds = {}
    if isinstance(cache.get(key), Exception):  # a kernel that failed to compile: the same error, not a second compile
        return _refusal(fam, case, target, cache, blame.failed(case, "compile", cache[key], fam, seconds={}))
    if key not in cache:
        t0 = time.perf_counter()
        try:
            kernel = build(fam, case, target)
        except Exception as e:
            cache[key] = e
            failed = blame.failed(case, "compile", e, fam, seconds={"compile": time.perf_counter() - t0})
            return _refusal(fam, case, target, cache, failed)
        seconds["compile"] = time.perf_counter() - t0
        try:
            found, code, features = scan(fam, case, kernel)
        except Exception as e:
            return blame.failed(case, "hazards", e, seconds=seconds)
        cache[key] = (kernel, found, code, features)
    kernel, found, code, features = cache[key]
    why = oracle.invalid(case)
    if why:  # compiled: ACCEPTS_INVALID already; a run only counts what it writes outside its buffers
        ran = accepted_invalid(fam, case, kernel, why, guarded) if target == "auto" and not build_only else \
            oracle.accepts_invalid(case, why)
        return ran.replace(seconds=seconds, hazards=found, code=code, features=features)
    base = control(fam, case) if target == "auto" else None
    if base is not None and kernels.kernel_key(base) not in cache:
        # The forms or twin check's kernel, built with the case's own (under the compile timeout, not in
        # the judge's): the pool gives the cases that need it to this worker (harness.schedule's partner).
        t0 = time.perf_counter()
        try:
            build_control(fam, base, target, cache)
        except Exception as e:  # its code scan broke (a compile error is cached): judged as in the twin stage
            return blame.failed(case, "twin", e, fam, seconds=seconds).replace(hazards=found, code=code, features=features)
        seconds["control"] = time.perf_counter() - t0
    if target != "auto" or build_only:
        return Result.of(case, "COMPILED", "compile", seconds=seconds, hazards=found, code=code, features=features)
    on_stage("run", hazards=found, code=code)
    stage = "inputs"
    try:
        t0 = time.perf_counter()
        from harness import bands

        # Every buffer handed to the kernel sits between guard bands: its inputs (copied in) and
        # whatever the family allocates through harness.bands while it runs (unless not `guarded`:
        # under compute-sanitizer, where a band would hide a write past a tensor from the tool).
        with bands.guarding() if guarded else contextlib.nullcontext() as guard:
            inputs = device_inputs(fam, case, guard)
            seconds["inputs"] = time.perf_counter() - t0
            stage = "run"
            t0 = time.perf_counter()
            outputs = fam.runner.run(kernel, case, inputs)  # returns after the device finished
            breaches = guard.breaches() if guard else []
        seconds["run"] = time.perf_counter() - t0
        stage = "judge"
        t0 = time.perf_counter()
        result = oracle.out_of_bounds(case, breaches) or oracle.judge(case, fam, inputs, outputs, seconds)
        if result.verdict == "PASS" and control(fam, case) is not None:
            stage = "twin"
            result = unlike_control(fam, case, target, cache, inputs, fam.judge.canonical(case, outputs)) or result
        if result.verdict in ("MISMATCH", "NONFINITE") and guarded:
            stage = "reread"
            changed = reads_outside(fam, kernel, case, fam.judge.canonical(case, outputs))
            if changed:
                result = Result.of(case, "OOB_READ", "run", f"{changed} changes with the guard bands' contents, "
                                   "and not from run to run: a read outside a buffer", tensor=changed,
                                   region="band contents")
        result = result.replace(seconds={**seconds, "judge": time.perf_counter() - t0})  # the references and the comparison
    except Exception as e:
        # A device fault is the kernel's wherever it surfaces: a sticky fault can escape the
        # launch's synchronize and hit the next torch call.
        return blame.failed(case, stage, e, fam, seconds=seconds).replace(hazards=found, code=code, features=features)
    return result.replace(hazards=found, code=code, features=features)


def accepted_invalid(fam, case, kernel, why, guarded=True) -> Result:
    """An invalid program TileLang compiled, run under the guard bands (no reference: it means nothing; with the
    bands off, under compute-sanitizer, the tool sees what it writes)."""
    from harness import bands
    try:
        with bands.guarding() if guarded else contextlib.nullcontext() as guard:
            fam.runner.run(kernel, case, device_inputs(fam, case, guard))
            breaches = guard.breaches() if guard else []
    except Exception as e:
        return oracle.accepts_invalid(case, why, ran=blame.failed(case, "run", e, fam))
    return oracle.accepts_invalid(case, why, breaches)


def device_inputs(fam, case, guard=None, device=None) -> dict:
    """fam.runner.make_inputs(case, device), the same bytes (it converts on the host too), copied to `device` (default: the
    GPU; the CPU where there is none, as in the tests of a fake family, whose kernels run on the host) in one copy
    rather than one per tensor: each copy from the host waits for the device, and with many processes on one GPU
    each wait costs milliseconds. Each tensor then goes into an allocation of its own: `guard`'s (harness.bands),
    or, with the bands off (compute-sanitizer), a plain one with the host tensor's strides, so that a read past
    one input does not land in the next."""
    import torch
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    inputs = fam.runner.make_inputs(case, "cpu")
    names = [n for n, t in inputs.items() if isinstance(t, torch.Tensor)]
    # Each tensor's bytes start 16-byte aligned in the one buffer, so that every dtype can view its slice.
    sizes = [-(-inputs[n].numel() * inputs[n].element_size() // 16) * 16 for n in names]
    host = torch.zeros(sum(sizes), dtype=torch.uint8)
    offset = 0
    for n, size in zip(names, sizes):
        raw = inputs[n].contiguous().view(-1).view(torch.uint8)
        host[offset: offset + raw.numel()] = raw
        offset += size
    there, offset = host.to(device), 0
    for n, size in zip(names, sizes):
        t = inputs[n]
        view = there[offset: offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
        inputs[n] = guard.adopt(n, view) if guard else \
            torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device).copy_(view)
        offset += size
    return inputs


def control(fam, case):
    """The case whose kernel must give `case`'s outputs bit for bit, or None: the default forms (harness.case.FORMS
    move data, never the arithmetic) and, for a family whose knobs are twins (Judge.twins), no knobs where the
    arithmetic is exact (Judge.exact). Inexact sums may round apart in another order (float atomics from
    several blocks, seen on an H100 under no_smem_reuse): there the reference's tolerance judges each twin."""
    twin = fam.judge.twins and fam.judge.exact(case)
    other = case.replace(forms=(), knobs=() if twin else case.knobs)
    return None if other == case else other


def unlike_control(fam, case, target, cache, inputs, mine: dict) -> Result | None:
    """A MISMATCH if an output differs in any bit from the control's kernel (`control`) on the same inputs, else
    None. The reference check forgives rounding; this sees it. A control kernel that does not compile, or whose own
    runs differ, proves nothing. The region names what the two differ in ("forms", or "twin:<knobs>"), so
    the control is the report's."""
    base = control(fam, case)
    key = kernels.kernel_key(base)
    if key not in cache:
        build_control(fam, base, target, cache)
    if isinstance(cache[key], Exception):
        return None
    kernel = cache[key][0]
    theirs = fam.judge.canonical(base, fam.runner.run(kernel, base, inputs))
    what, region = (f"its twin without {', '.join(case.knobs)}", "twin:" + ",".join(case.knobs)) if base.knobs != case.knobs \
        else ("the default forms' kernel", "forms")
    unlike = _unlike_bits(mine, theirs)
    if not unlike:
        return None
    name, t = unlike[0], mine[unlike[0]]  # the first output that differs
    if not _same_bits(fam.judge.canonical(base, fam.runner.run(kernel, base, inputs))[name], theirs[name]):
        return None  # the control's own runs differ: it proves nothing
    differ = _words(t) != _words(theirs[name])
    gap = (t.double() - theirs[name].double()).abs()[differ].max()
    return Result.of(case, "MISMATCH", "judge", f"{name} differs from {what} on the same "
                     f"inputs in {int(differ.sum())} elements (max |difference| {float(gap):.3g}, "
                     f"first at {differ.nonzero()[0].tolist()})", tensor=name, region=region)


def _refusal(fam, case, target, cache, failed: Result) -> Result:
    """A compile failure of an invalid program: REFUSES_INVALID if the program without its invalid statements
    compiles (the refusal was about them), else the failure stands, a valid program's (its known class or a new one).
    Where they cannot be left out (nothing would be stored without them) no valid program failed: REFUSES_INVALID."""
    twin = oracle.valid_twin(case)
    if twin is None:
        return oracle.refused(case, failed)
    key = kernels.kernel_key(twin)
    if key not in cache:
        build_control(fam, twin, target, cache)
    if isinstance(cache[key], Exception):
        return failed.replace(message=failed.message + VALID_PART_FAILS)
    return oracle.refused(case, failed)


def build_control(fam, base, target, cache) -> None:
    """Compile the control case `base`'s kernel into `cache`, or the exception it raised."""
    key = kernels.kernel_key(base)
    try:
        kernel = build(fam, base, target)
    except Exception as e:
        cache[key] = e
    else:
        # Cached as run_case caches it (scanned), so that the control case itself, run later in this
        # worker, still gets its code checks and digest.
        cache[key] = (kernel, *scan(fam, base, kernel))


def _words(t):
    """A tensor's elements as same-sized integers: equal exactly when their bits are."""
    import torch
    return t.detach().contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def reads_outside(fam, kernel, case, first: dict) -> str | None:
    """The output that changes when the guard bands hold other contents (harness.bands' "large"
    instead of its NaN pattern) but not when the same run repeats: a read outside a buffer. None if
    there is none. Each pattern runs twice and both pairs must agree bit for bit: a nondeterministic
    kernel (atomics in another order) that happens to repeat once proves nothing."""
    from harness import bands

    def rerun(pattern):
        with bands.guarding(pattern) as guard:
            inputs = device_inputs(fam, case, guard)
            return fam.judge.canonical(case, fam.runner.run(kernel, case, inputs))

    same, other, same2, other2 = rerun("nan"), rerun("large"), rerun("nan"), rerun("large")
    for name, t in first.items():
        if _same_bits(same[name], same2[name]) and _same_bits(same2[name], t) and _same_bits(other[name], other2[name]) \
                and not _same_bits(other[name], t):
            return name
    return None


def _unlike_bits(mine: dict, theirs: dict) -> list[str]:
    """The names, in order, of the tensors of `mine` whose bits differ from `theirs` (NaN payloads and -0.0 as
    stored; another shape or dtype differs). Compared where they are, with one host sync for all: no copy of
    either to the host."""
    import torch
    names = list(mine)
    alike = [mine[n].shape == theirs[n].shape and mine[n].dtype == theirs[n].dtype for n in names]
    flags = [(_words(mine[n]) != _words(theirs[n])).any() for n, ok in zip(names, alike) if ok]
    hits = iter(torch.stack(flags).tolist() if flags else [])
    return [n for n, ok in zip(names, alike) if not ok or next(hits)]


def _same_bits(a, b) -> bool:
    return not _unlike_bits({"t": a}, {"t": b})


def build(fam, case, target):
    """fam.runner.build, keeping what it prints as the exception's `compiler_output` (nvcc's errors,
    which some releases leave out of the exception); the log gets it all the same."""
    with tempfile.TemporaryFile("w+") as out:
        try:
            with _printing_to(out):
                return fam.runner.build(case, target)
        except Exception as e:
            e.compiler_output = _text(out)
            raise
        finally:
            sys.stderr.write(_text(out))


@contextlib.contextmanager
def _printing_to(out):
    """File descriptors 1 and 2 (subprocesses such as nvcc included) go to `out` meanwhile."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    for fd in (1, 2):
        os.dup2(out.fileno(), fd)
    try:
        yield
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)


def _text(out) -> str:
    out.flush()
    out.seek(0)
    return out.read()


def scan(fam, case, kernel) -> tuple[tuple[ScanFinding, ...], str, tuple[str, ...]]:
    """What the compile-only checks see in the generated code (harness.codegen), a digest of
    that code (the same program compiled twice must give the same digest: harness.determinism), and its
    code features (harness.cuda_features), sorted."""
    from harness import codegen, compat, cuda_features
    sources = compat.kernel_sources(kernel)
    fragments = fam.judge.fragments(case)
    # One kernel at a time: buffer names, offsets and barrier numbers mean nothing across kernels.
    found = [f for source in sources
             for f in codegen.check(source, fam.judge.contiguous(case), fam.judge.aligned, fragments)]
    features = sorted(set().union(*(cuda_features.features(source, fragments) for source in sources)))
    return (tuple(ScanFinding(f.check, f.message) for f in found), hashlib.sha256("\n".join(sources).encode()).hexdigest()[:16],
            tuple(features))


def warm_up(target: str) -> None:
    """Pay the worker's fixed costs before its first case, while the parent still probes the
    environment: TileLang and the kernel modules, and on a GPU the CUDA context and a first judge
    of a small forward and backward case (it loads the references' and the checks' CUDA kernels:
    0.4 s, which pytest's examples, one at a time, paid once per worker). A failure here is left
    to the first case, which reports it in context."""
    with contextlib.suppress(Exception):
        for name in kernels.FAMILIES:
            kernels.family(name)
        import torch
        if target == "auto" and torch.cuda.is_available():
            judge_small_cases("cuda")


def judge_small_cases(device: str) -> list[str]:
    """Judge a small forward and a small backward case, the baseline standing in for the kernel's
    outputs (already canonical): their verdicts, PASS unless the references or the checks broke."""
    from harness import reference

    verdicts = []
    for name in ("fwd", "bwd"):
        fam = kernels.family(name)
        fam = dataclasses.replace(fam, judge=dataclasses.replace(fam.judge, canonical=lambda case, outputs: outputs))
        case = case_mod.Case(family=name, variant=fam.offer.variants[0], heads=2, kv_heads=1, seqlen_q=70, seqlen_k=130,
                             sinks=True)
        inputs = fam.runner.make_inputs(case, device)
        verdicts.append(oracle.judge(case, fam, inputs, fam.judge.reference(case, inputs, reference.DTYPES[case.dtype])).verdict)
    return verdicts


# The pool's requests, named JSON events as the worker's replies are: "run" a case, or "build" its kernel only (the
# pool builds ahead).
REQUESTS = ("run", "build")


def request_line(case: case_mod.Case, build_only: bool) -> str:
    """The line the pool sends for `case`."""
    return json.dumps({"event": "build" if build_only else "run", "case": case_mod.to_dict(case)}) + "\n"


def request(line: str) -> tuple[case_mod.Case, bool]:
    """(case, build_only) of a line the pool sent; CaseError for a line that is no request or holds no case."""
    try:
        msg = json.loads(line)
    except json.JSONDecodeError as e:
        raise case_mod.CaseError(f"request is not valid JSON: {e}") from None
    event = msg.get("event") if isinstance(msg, dict) else None
    if event not in REQUESTS:
        raise case_mod.CaseError(f"a request is an event {' or '.join(REQUESTS)}, got {line.strip()[:200]}")
    return case_mod.from_dict(msg.get("case")), event == "build"


def main(target: str, families=(), examples=None, guarded=True) -> None:
    """Serve the pool (harness.pool) on stdin and stdout; `families`: the (name, "module:attr") of the families
    registered at run time in the parent (harness.kernels.register), registered here too; `examples`: the
    outside kernels' source tree (harness.kernels.use_examples); `guarded`: guard bands around the buffers."""
    for name, where in families:
        kernels.register(name, where)
    kernels.use_examples(examples)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # TileLang and nvcc print freely; only the protocol goes to the parent.

    def send(msg):
        proto.write(json.dumps(msg) + "\n")

    warm_up(target)
    # Spawn to ready (interpreter, imports, warm-up): the first case's result carries it.
    start = {"start": time.time() - float(os.environ.get(SPAWNED_AT, time.time()))}
    cache: dict = {}
    for line in sys.stdin:
        try:
            case, build_only = request(line)
        except case_mod.CaseError as e:  # parent and worker disagree about the Case: ours, not a crash
            send({"event": "refused", "message": f"worker cannot read the case: {e}"})
            continue
        result = run_case(case, target, cache, on_stage=lambda s, hazards, code: send(
            {"event": "stage", "stage": s, "hazards": [f.to_json() for f in hazards], "code": code}), build_only=build_only,
            guarded=guarded)
        if start and not build_only:
            result = result.replace(seconds={**start, **(result.seconds or {})})
            start = None
        send({"event": "result", **result.to_dict()})
        if result.fatal:
            return  # the CUDA context is poisoned: the parent starts a fresh worker


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="auto", choices=("auto", *ARCHES))
    p.add_argument("--family", action="append", default=[], type=kernels.spec, metavar="NAME=MODULE:ATTR",
                   help="a family registered at run time in the parent (repeatable)")
    p.add_argument("--examples", type=Path, help="the TileLang source tree outside kernels load from")
    p.add_argument("--no-bands", action="store_true", help="no guard bands around the buffers (compute-sanitizer's runs)")
    args = p.parse_args()
    main(args.target, args.family, args.examples, not args.no_bands)
