#!/usr/bin/env python3
"""Verify the patches of reproducers/examples/ against TileLang's examples, on a GPU.

For each patch, on TileLang 0.1.15 with 0.1.14's examples (the newest that run on it):
  without  the shapes that failed fail on the examples as released;
  with     on a copy with the patch applied, those shapes pass, and so do the examples' own test shapes.

A shape is checked one of two ways:
  case     a harness case (a recorded reproducer's, one derived from it, or an adapter's `peer` shape, which
           transcribes the example's test_example_*.py call), run with `harness run --cases-from`: every buffer
           between guard bands (OOB_WRITE), outputs NaN-filled (NONFINITE), judged against the float64 reference;
  call     the example's own code in a fresh process: a test_example_*.py function, or main() at the failing
           shape, written as a test would be. It passes when it returns. A race (a load TileLang never waits for)
           is launched many times, each launch with the L2 flushed. A line it prints as `CALL NOTE: ...` is shown
           on its result line (the diagnostics run without a patch, as INFO).

One line per (patch, shape, without/with): PASS when the result is the one expected, FAIL otherwise, INFO for a
shape run without an expectation (with a patch: a shape that meets a compiler bug the patch leaves alone), SKIP for a
call whose example imports a package missing here (flash_attn: the varlen forwards' main() compare with it; their
tests are also run with the float64 reference standing in for it).
Exit 1 on any FAIL, 2 when a patch does not apply or the setup is broken.
The trees run in parallel (one `harness run` per tree, the calls beside them), each with its own kernel cache; the
examples' main() time each kernel once unless --full-bench.

On the GPU machine, from the project root (TileLang 0.1.15 and 0.1.14's examples carried along, no network):

    source .gpu/env.sh 0.1.15
    python3 scripts/verify_example_patches.py --examples .gpu/examples/tilelang-0.1.14 --out /tmp/verify --report "$OUT"

Only what a patch's change touches: --only PATCH (repeatable) runs its shapes with and without it, and --match
narrows to the labels matching a regular expression, e.g. `--only varlen_split_bwd_dkdv_store --match "made atomic"`.

Anywhere: --dry-run applies the patches to copies, builds every case and prints the plan; --compile-only (no GPU)
compiles the cases for sm_90a on each tree, e.g. `--compile-only --only gqa_decode_split_ranges`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "reproducers" / "examples"
FOLDERS = ("flash_attention", "attention_sink", "flash_decoding")  # what the patches and the adapters touch
TREES = (ROOT / ".gpu" / "examples" / "tilelang-0.1.14", ROOT / "examples-src" / "tilelang-0.1.14")
FAILS = ("MISMATCH", "NONFINITE", "OOB_WRITE", "OOB_READ", "COMPILE_ERROR", "REJECTED", "CRASH", "HANG")

P1, P2 = "dq_layout_rows_of_8", "varlen_rows_without_keys"
P3, P4, P5 = "gqa_decode_split_ranges", "sink_varlen_bwd_key_grid", "varlen_split_bwd_dkdv_store"
ORDER = (P1, P2, P3, P4, P5)  # one pull request each, reported in this order


class SetupError(Exception):
    """No examples tree, a patch that does not apply, nothing selected: one line, exit 2."""


@dataclass(frozen=True, eq=False)
class Shape:
    patch: str
    label: str
    case: dict | None = None    # {"repro": id} or {"peer": family, "index": i}, and "set": {field: value}
    call: tuple | None = None   # (folder, module, code run in the module's namespace)
    without: str | None = None  # "fail": must fail without the patch; "info": run and shown; None: not run
    verdicts: tuple = ()        # the failures that count without the patch (empty: any)
    with_patch: bool = True     # False: a diagnostic run on the examples as released only (without="info")
    passes_with: bool = True    # False: run with the patch too, shown (INFO): it meets a compiler bug left alone


def _repro(patch, rid, label, verdict=None, without="fail", passes_with=True, **changes):
    return Shape(patch, f"{rid} {label}", case={"repro": rid, "set": changes}, without=without,
                 verdicts=(verdict,) if verdict else (), passes_with=passes_with)


def _derived(patch, rid, label, **changes):
    return Shape(patch, label, case={"repro": rid, "set": changes}, without="fail")


def _peer(patch, family, index=0, **changes):
    what = f" {', '.join(f'{k} {v}' for k, v in changes.items())}" if changes else ""
    return Shape(patch, f"test shape {index} of {family}{what}", case={"peer": family, "index": index, "set": changes})


def _test(patch, folder, module, function):
    return Shape(patch, f"{module}.{function}", call=(folder, module, f"{function}()"))


def _main(patch, folder, module, args, without=None):
    return Shape(patch, f"{module}.main({args})", call=(folder, module, f"main({args})"), without=without)


def _code(patch, folder, module, label, code, without="fail", with_patch=True, passes_with=True):
    return Shape(patch, f"{module}: {label}", call=(folder, module, code), without=without, with_patch=with_patch,
                 passes_with=passes_with)


# The failing shapes as a test of the example would state them (the patches' texts quote them).
NO_KEYS_INPUTS = """
import torch
heads, dim = 2, 128
cu_q = torch.tensor([0, 13, 92, 155], dtype=torch.int32, device="cuda")  # queries (13, 79, 63)
cu_k = torch.tensor([0, 0, 79, 142], dtype=torch.int32, device="cuda")  # keys (0, 79, 63): the first has none
q = torch.randn(155, heads, dim, dtype=torch.float16, device="cuda")
k = torch.randn(142, heads, dim, dtype=torch.float16, device="cuda")
v = torch.randn(142, heads, dim, dtype=torch.float16, device="cuda")
kernel = flashattn(3, 155, 142, heads, dim, False, block_M=64, block_N=64, num_stages=1, threads=128)
flush = torch.empty(2**26, dtype=torch.float32, device="cuda")  # 256 MB: each launch finds Q out of the L2
"""
# Repeated, each launch cold. What the patch promises is no NaN; the rows' 0 can still be overwritten by the late Q
# load of TileLang's zero-trip wait (54d466153e16), a race the patch leaves to the compiler: counted, not asserted.
NO_KEYS = NO_KEYS_INPUTS + """
late = 0
for launch in range(50):
    flush.zero_()
    out = kernel(q, k, v, cu_q, cu_k, 79)
    assert torch.isfinite(out).all(), f"NaN in the output (launch {launch})"
    late += bool(out[:13].any())
print("CALL NOTE:", f"{late} of 50 launches left a no-key row not 0", flush=True)
"""
# Where the no-key rows' values come from on the examples as released: NaN (0 / 0, the example's bug), or Q's
# tile (Q's TMA load landing in O_shared after the epilogue wrote it: the compiler's zero-trip wait, 54d466153e16).
NO_KEYS_SOURCE = NO_KEYS_INPUTS + """
tile = q[:64].float()  # what block 0 of the first sequence loads: its 13 rows and 51 of the next sequence
counts, total = {"NaN": 0, "0": 0, "of Q's tile": 0}, 0
for launch in range(50):
    flush.zero_()
    rows = kernel(q, k, v, cu_q, cu_k, 79)[:13].float()
    for h in range(heads):
        r = rows[:, h]
        counts["NaN"] += int(r.isnan().sum())
        counts["0"] += int((r == 0).sum())
        counts["of Q's tile"] += int((torch.isin(r, tile[:, h]) & (r != 0)).sum())
    total += rows.numel()
counts["other"] = total - sum(counts.values())
print("CALL NOTE:", ", ".join(f"{n / total:.1%} {what}" for what, n in counts.items()),
      "(the no-key rows' values in 50 cold launches)", flush=True)
"""
# 913bfee4e161's lengths through the example's autograd, checked as its main() checks, against its ref_program.
# Key block 1 of the first sequence (keys 128-255 of 58) has no query block to visit: its loop runs zero times.
SINK_SEQLENS = """
import itertools, torch
seqlens = [(13, 58), (129, 166), (63, 12), (59, 7)]  # (queries, keys) per sequence
heads, groups, dim, causal = 4, 4, 128, True
cu_q = torch.tensor([0, *itertools.accumulate(n for n, _ in seqlens)], dtype=torch.int32, device="cuda")
cu_k = torch.tensor([0, *itertools.accumulate(n for _, n in seqlens)], dtype=torch.int32, device="cuda")
max_q, max_k = max(n for n, _ in seqlens), max(n for _, n in seqlens)
torch.manual_seed(0)
q = torch.randn(int(cu_q[-1]), heads, dim, dtype=torch.float16, device="cuda").requires_grad_()
k = torch.randn(int(cu_k[-1]), heads // groups, dim, dtype=torch.float16, device="cuda").requires_grad_()
v = torch.randn(int(cu_k[-1]), heads // groups, dim, dtype=torch.float16, device="cuda").requires_grad_()
sinks = torch.randn(heads, dtype=torch.float16, device="cuda").requires_grad_()
do = torch.randn_like(q)
o_ref = ref_program(q, k, v, cu_q, cu_k, max_q, max_k, sinks, len(seqlens), causal, groups=groups)
names = ("dQ", "dK", "dV", "dsinks")
want = dict(zip(names, torch.autograd.grad(o_ref, (q, k, v, sinks), do)))
flush = torch.empty(2**26, dtype=torch.float32, device="cuda")  # 256 MB: each backward finds K and V out of the L2
for launch in range(10):
    o = attention(q, k, v, sinks, cu_q, cu_k, max_q, max_q, max_k, None, groups, causal)
    assert torch.allclose(o, o_ref, rtol=1e-2, atol=1e-2), f"O max err {(o - o_ref).abs().max().item()}"
    flush.zero_()
    got = dict(zip(names, torch.autograd.grad(o, (q, k, v, sinks), do)))
    for name in names:
        assert torch.isfinite(got[name]).all(), f"{name} not finite (launch {launch})"
        err = (got[name] - want[name]).abs().max().item()
        assert torch.allclose(got[name], want[name], rtol=1e-2, atol=1e-2), f"{name} max err {err} (launch {launch})"
"""
# The varlen forwards' tests compare with flash_attn_varlen_func. Where flash_attn is not installed, this stands in
# for it: the harness's float64 reference (harness.reference), sequence by sequence, causal aligned bottom-right.
FLASH_ATTN_REFERENCE = """
import sys, types, torch
from harness import reference


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False):
    assert dropout_p == 0.0
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[-1])
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        sq, sk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        if sq and sk:
            qi, ki, vi = (x[s:s + n].transpose(0, 1)[None].double()
                          for x, s, n in ((q, cq[b], sq), (k, ck[b], sk), (v, ck[b], sk)))
            seen = reference.visible(sq, sk, -1, 0 if causal else -1, device=q.device)
            o, _ = reference.attention(qi, ki, vi, None, seen, scale)
            out[cq[b]:cq[b + 1]] = o[0].transpose(0, 1).to(out.dtype)
    return out


try:
    import flash_attn  # noqa: F401
except ImportError:
    sys.modules["flash_attn"] = types.SimpleNamespace(flash_attn_varlen_func=flash_attn_varlen_func)
"""
SPLIT_TAIL = """
import torch
batch, heads, groups, kv_seqlen, dim = 1, 32, 8, 127, 128
kernel = flashattn(batch, heads, groups, kv_seqlen, dim, block_N=128, block_H=64, num_split=8, num_stages=2, threads=128)
q = torch.randn(batch, heads, dim, device="cuda", dtype=torch.float16)
k = torch.randn(batch, kv_seqlen, groups, dim, device="cuda", dtype=torch.float16)
v = torch.randn(batch, kv_seqlen, groups, dim, device="cuda", dtype=torch.float16)
mask = torch.ones(batch, kv_seqlen, groups, device="cuda", dtype=torch.uint8)
o = kernel(q, k, v, mask)
o_ref = ref_program(q, k, v, mask)
assert torch.allclose(o, o_ref, rtol=1e-2, atol=1e-2), f"max error {(o - o_ref).abs().max().item()}"
"""


FA, SINK, DECODE = "flash_attention", "attention_sink", "flash_decoding"
SHAPES = (
    # 1. make_dq_layout tiles rows by 8: at seq_len % 8 != 0 the dQ accumulator is written past its end.
    _repro(P1, "88f987f98253", "mha_bwd_bhsd, seq_len 129", "OOB_WRITE"),
    _derived(P1, "88f987f98253", "mha_bwd_bshd, seq_len 127 (the BSHD face, 76892e9ec347)",
             family="tl_mha_bwd_bshd@outside", layout="bshd", seqlen_q=127, seqlen_k=127),
    _repro(P1, "a4ec1a709038", "gqa_bwd atomic, seq_len 185", "OOB_WRITE"),
    _repro(P1, "c13b01ba371c", "gqa_bwd split, seq_len 35", "OOB_WRITE"),
    _repro(P1, "973920782f7d", "mha_sink_bwd_bhsd, seq_len 187", "OOB_WRITE"),
    _repro(P1, "3031545982fb", "gqa_sink_bwd_bhsd, seq_len 355", "OOB_WRITE"),
    _main(P1, FA, "example_mha_bwd_bhsd", "BATCH=1, H=16, N_CTX=127, D_HEAD=64, causal=False"),
    _peer(P1, "tl_mha_bwd_bhsd"), _peer(P1, "tl_mha_bwd_bshd"), _peer(P1, "tl_gqa_bwd"),
    _peer(P1, "tl_gqa_bwd", variant="split"),
    _peer(P1, "tl_mha_sink_bwd_bhsd", 0), _peer(P1, "tl_mha_sink_bwd_bhsd", 1),
    _peer(P1, "tl_gqa_sink_bwd_bhsd", 0), _peer(P1, "tl_gqa_sink_bwd_bhsd", 1),
    _test(P1, FA, "test_example_flash_attention", "test_example_gqa_bwd"),
    _test(P1, FA, "test_example_flash_attention", "test_example_mha_bwd"),
    _test(P1, FA, "test_example_flash_attention", "test_example_mha_bwd_bhsd"),
    _test(P1, SINK, "test_example_attention_sink", "test_example_mha_sink_bwd_bhsd"),
    _test(P1, SINK, "test_example_attention_sink", "test_example_mha_sink_bwd_bhsd_sliding_window"),
    _test(P1, SINK, "test_example_attention_sink", "test_example_gqa_sink_bwd_bhsd"),
    _test(P1, SINK, "test_example_attention_sink", "test_example_gqa_sink_bwd_bhsd_sliding_window"),
    # 2. Rows with nothing to attend to, or padding rows, left NaN: the varlen forward of a sequence with no
    #    keys (0 / 0), and the sink varlen example's padded LSE/Delta rows, never written and read back. A key
    #    loop that runs zero times is left to the compiler: TileLang never waits for the load before it
    #    (54d466153e16), which lands in the dK/dV tile added to the next sequence's rows (913bfee4e161): INFO.
    #    The no-key shapes meet it too: with the patch their rows are 0 unless Q's late load lands there first
    #    (the gqa one: MISMATCH, O off by 3, on an H200; PASS on an H100), so they must lose their NaN without the
    #    patch and are shown (INFO) with it; the test-style shape below checks what fix 1 promises, no NaN.
    _repro(P2, "34f6e82d7917", "mha_fwd_varlen, a sequence with no keys", "NONFINITE", passes_with=False),
    Shape(P2, "gqa_fwd_varlen, a sequence with no keys", without="fail", passes_with=False,
          case={"repro": "34f6e82d7917", "set": {"family": "tl_gqa_fwd_varlen@outside", "kv_heads": 1}}),
    Shape(P2, "34f6e82d7917 mha_fwd_varlen, a sequence with no keys, causal", passes_with=False,
          case={"repro": "34f6e82d7917", "set": {"causal": True}}),
    _repro(P2, "dd324ba52052", "gqa_sink_bwd_varlen, padded LSE rows", "NONFINITE"),
    _repro(P2, "ade3366ee08f", "gqa_sink_bwd_varlen (0.1.10's hang; NaN dQ on 0.1.15)", "NONFINITE"),
    _repro(P2, "28507d7566c2", "gqa_sink_bwd_varlen (recorded on 0.1.12)", without="info", passes_with=False),
    _repro(P2, "913bfee4e161", "gqa_sink_bwd_varlen causal (recorded on 0.1.12)", without="info", passes_with=False),
    _peer(P2, "tl_mha_fwd_varlen", 0), _peer(P2, "tl_mha_fwd_varlen", 1),
    _peer(P2, "tl_gqa_fwd_varlen", 0), _peer(P2, "tl_gqa_fwd_varlen", 1),
    _peer(P2, "tl_gqa_sink_bwd_varlen"),
    _code(P2, FA, "example_mha_fwd_varlen", "a sequence with no keys gives no NaN, 50 cold launches (test-style)",
          NO_KEYS),
    _code(P2, FA, "example_mha_fwd_varlen", "where a no-key sequence's rows come from, 50 cold launches",
          NO_KEYS_SOURCE, without="info", with_patch=False),
    # Shown only: its padded rows are torch.empty (NaN or not) and its zero-trip key block meets 54d466153e16.
    _code(P2, SINK, "example_gqa_sink_bwd_varlen", "913bfee4e161's lengths through its autograd, 10 cold backwards "
          "(test-style)", SINK_SEQLENS, without="info", passes_with=False),
    _test(P2, FA, "test_example_flash_attention", "test_example_mha_fwd_varlen"),
    _test(P2, FA, "test_example_flash_attention", "test_example_gqa_fwd_varlen"),
    _code(P2, FA, "test_example_flash_attention", "test_example_mha_fwd_varlen() with the float64 reference "
          "for flash_attn where it is missing", FLASH_ATTN_REFERENCE + "test_example_mha_fwd_varlen()", without=None),
    _code(P2, FA, "test_example_flash_attention", "test_example_gqa_fwd_varlen() with the float64 reference "
          "for flash_attn where it is missing", FLASH_ATTN_REFERENCE + "test_example_gqa_fwd_varlen()", without=None),
    _test(P2, SINK, "test_example_attention_sink", "test_example_gqa_sink_varlen"),
    # 3. The split decode's splits: tail keys never seen, tiles running into the next split.
    _repro(P3, "2208845040f7", "gqa_decode split, seqlen_kv 127", "MISMATCH"),
    _derived(P3, "2208845040f7", "gqa_decode split, seqlen_kv 1500 (splits of 187.5 keys, 128-key tiles)",
             seqlen_k=1500),
    _code(P3, DECODE, "example_gqa_decode", "split, kv_seqlen 127 (test-style)", SPLIT_TAIL),
    _peer(P3, "tl_gqa_decode"),
    # Skipped by its decorator on sm_90 (compute version <= 8.9); called directly, its main() at 8 splits.
    _test(P3, DECODE, "test_example_flash_decoding", "test_example_example_gqa_decode"),
    # 4. The sink varlen backward's grid: key blocks up to max_seqlen_q only.
    _main(P4, SINK, "example_gqa_sink_bwd_varlen",
          "batch=1, heads=8, q_seqlen=64, k_seqlen=320, dim=64, groups=4, is_causal=True", without="fail"),
    _peer(P4, "tl_gqa_sink_bwd_varlen"),
    _test(P4, SINK, "test_example_attention_sink", "test_example_gqa_sink_varlen"),
    # 5. The tma_reduce varlen split backward's dK/dV tiles stored past the sequence's end.
    _repro(P5, "7d583673faa3", "gqa_bwd_tma_reduce_varlen split, seqlens (78, 21, 509)", "MISMATCH"),
    _repro(P5, "c0dc43b1cfa2", "gqa_bwd_tma_reduce_varlen split (0.1.10's hang; dK on 0.1.15)", "MISMATCH"),
    _repro(P5, "698bcc197126", "gqa_bwd_tma_reduce_varlen split (0.1.10's NaN; dK on 0.1.15)", "MISMATCH"),
    _main(P5, FA, "example_gqa_bwd_tma_reduce_varlen",
          "BATCH=2, H=8, N_CTX=256, D_HEAD_QK=64, D_HEAD_V=64, groups=2, use_atomic=False", without="info"),
    # Not fixed here, shown: the atomic variant's key block past a 64-token sequence (64 % block_N == 0) runs its
    # query loop zero times, so on TileLang 0.1.15 it may add the unwaited K/V loads into the next sequence's dK/dV.
    Shape(P5, "7d583673faa3 made atomic, TMA on, seqlens (64, 256): a key block with no query block",
          case={"repro": "7d583673faa3", "set": {"variant": "atomic", "knobs": (), "batch": 2,
                                                  "seqlens": ((64, 64), (256, 256)), "seqlen_q": 256, "seqlen_k": 256,
                                                  "block_m": 128, "block_n": 32, "num_stages": 2, "threads": 256}},
          without="info", with_patch=False),
    _peer(P5, "tl_gqa_bwd_tma_reduce_varlen"), _peer(P5, "tl_gqa_bwd_tma_reduce_varlen", variant="split"),
    _test(P5, FA, "test_example_flash_attention", "test_example_gqa_bwd_tma_reduce_varlen"),
)


@dataclass
class Outcome:
    ok: bool | None                 # None: no expectation (info)
    what: str                       # the verdict or the call's end, in a few words
    detail: str = ""
    skip: str = ""                  # why it could not run here (a package the example imports is missing)


@dataclass
class Plan:
    tree: str                       # "base" or a patch name
    shapes: list = field(default_factory=list)
    cases: dict = field(default_factory=dict)  # shape -> Case


def find_tree(given: str | None) -> Path:
    """The examples tree: --examples, $HARNESS_EXAMPLES, or the places `harness examples fetch` is used to."""
    candidates = [Path(given)] if given else [Path(p) for p in [os.environ.get("HARNESS_EXAMPLES")] if p] + list(TREES)
    for path in candidates:
        path = path.resolve()
        if path.name == "examples" and (path.parent / "VERSION").is_file():
            path = path.parent
        if (path / "examples").is_dir() and (path / "VERSION").is_file():
            return path
    raise SetupError(f"no examples tree (a directory with examples/ and VERSION) at {', '.join(map(str, candidates))}: "
                     "`harness examples fetch --version 0.1.14 --to .gpu/examples`")


def git_apply(patch: Path, tree: Path, check: bool) -> subprocess.CompletedProcess:
    """git apply in `tree`, never in a repository around it (which would take the paths as its own)."""
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tree.parent))
    argv = ["git", "apply", "-v"] + (["--check"] if check else []) + [str(patch)]
    return subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)


def patched_files(patch: Path) -> list[str]:
    return re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M)


def make_tree(source: Path, dest: Path, patch: Path | None) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "examples").mkdir(parents=True)
    shutil.copy(source / "VERSION", dest / "VERSION")
    for folder in FOLDERS:
        shutil.copytree(source / "examples" / folder, dest / "examples" / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    if patch is None:
        return
    for check in (True, False):
        p = git_apply(patch, dest, check)
        checked = re.findall(r"^Checking patch (\S+)\.\.\.$", p.stderr, flags=re.M)
        if p.returncode or sorted(checked) != sorted(patched_files(patch)):
            raise SetupError(f"{patch.name} does not apply to {source}:\n{p.stdout}{p.stderr}")


def build_case(spec: dict):
    from harness import reproducer_files, reproducer_loading, strategies

    if "repro" in spec:
        case = reproducer_loading.load(reproducer_files.find(spec["repro"], ROOT / "reproducers")).case
    else:
        case = strategies.peer(spec["family"] if "family" in spec else spec["peer"])[spec.get("index", 0)]
    return case.replace(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.get("set", {}).items()}).validate()


def plans(selected) -> dict[str, Plan]:
    """{tree: Plan}: "base" runs the shapes expected to fail (or shown) without a patch, each patch's tree all of its."""
    out = {"base": Plan("base")}
    for shape in selected:
        if shape.with_patch:
            out.setdefault(shape.patch, Plan(shape.patch)).shapes.append(shape)
        if shape.without:
            out["base"].shapes.append(shape)
    for plan in out.values():
        for shape in plan.shapes:
            if shape.case:
                plan.cases[shape] = build_case(shape.case)
    return {name: plan for name, plan in out.items() if plan.shapes}


def harness_argv(plan: Plan, tree: Path, out: Path, workers: int, compile_only: bool) -> list[str]:
    argv = [sys.executable, "-m", "harness.cli", "run", "--cases-from", str(out / "cases.jsonl"),
            "--examples", str(tree), "--out", str(out / "run"), "--reproducers", str(out / "reproducers"),
            "--workers", str(workers), "--run-timeout", "180", "--compile-timeout", "600"]
    return argv + (["--arch", "sm_90a"] if compile_only else [])


CALL = """
import importlib, sys, traceback
sys.path.insert(0, {folder!r})
if {quick!r}:  # the examples' main() times kernels after (or before) checking them: time each once, not 500 times
    import torch, tilelang.profiler as profiler

    def do_bench(fn=None, *args, **kwargs):
        if callable(fn):
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        return 1.0

    profiler.do_bench = do_bench
    profiler.Profiler.do_bench = lambda self, func=None, *args, **kwargs: do_bench(None)
try:
    module = importlib.import_module({module!r})
    exec({code!r}, vars(module))
except BaseException as e:
    traceback.print_exc()
    print("CALL FAILED:", type(e).__name__, str(e).splitlines()[0] if str(e) else "", flush=True)
    sys.exit(1)
print("CALL RETURNED", flush=True)
"""


def run_call(shape: Shape, tree: Path, logs: Path, env: dict, timeout: int, quick: bool = True) -> Outcome:
    folder, module, source = shape.call
    where = tree / "examples" / folder
    log = logs / (re.sub(r"[^A-Za-z0-9_.-]+", "_", shape.label)[:120] + ".log")
    code = CALL.format(folder=str(where), module=module, code=source, quick=quick)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        log.write_text(f"{e.stdout or ''}\n{e.stderr or ''}")
        return Outcome(False, f"no end within {timeout} s", str(log))
    log.write_text(p.stdout + "\n" + p.stderr)
    seconds = time.monotonic() - t0
    if p.returncode == 0 and "CALL RETURNED" in p.stdout:
        notes = [line.removeprefix("CALL NOTE:").strip() for line in p.stdout.splitlines() if line.startswith("CALL NOTE:")]
        return Outcome(True, f"returned ({seconds:.0f} s)" + "".join(f": {n}" for n in notes), str(log))
    last = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("CALL FAILED")]
    tail = last[-1].removeprefix("CALL FAILED: ") if last else (p.stderr.strip().splitlines() or ["exit"])[-1]
    missing = re.match(r"ModuleNotFoundError No module named '([\w.]+)'", tail)
    if missing and missing.group(1).split(".")[0] not in ("torch", "tilelang") and not any(
            (tree / "examples" / f / f"{missing.group(1)}.py").exists() for f in FOLDERS):
        return Outcome(False, f"raised {tail[:200]}", str(log), skip=f"{missing.group(1)} is not installed here")
    return Outcome(False, f"raised {tail[:200]}", str(log))


def results_of(run: Path) -> dict:
    found = {}
    path = run / "results.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                found.setdefault(r["case_id"], r)
    return found


def judge_case(shape: Shape, tree: str, result: dict | None, compile_only: bool) -> Outcome:
    if result is None:
        return Outcome(False, "no result (the run stopped before this case)")
    verdict, message = result["verdict"], (result.get("message") or "").strip()
    what = verdict + (f" ({message.splitlines()[0][:160]})" if message else "")
    if compile_only:
        return Outcome(verdict in ("COMPILED", "UNSUPPORTED"), what)
    if tree == "base" and shape.without == "info" or tree != "base" and not shape.passes_with:
        return Outcome(None, what)
    if tree == "base":
        return Outcome(verdict in (shape.verdicts or FAILS), what)
    return Outcome(verdict == "PASS", what)


def judge_call(shape: Shape, tree: str, outcome: Outcome) -> Outcome:
    if outcome.skip:
        return outcome
    if tree == "base" and shape.without == "info" or tree != "base" and not shape.passes_with:
        return Outcome(None, outcome.what, outcome.detail)
    if tree == "base":  # expected to fail: an exception (an assert of the example's own check) is the failure
        return Outcome(not outcome.ok and "no end within" not in outcome.what, outcome.what, outcome.detail)
    return outcome


def main(argv=None) -> int:
    try:
        return verify(argv)
    except SetupError as e:
        print(f"verify_example_patches: {e}", file=sys.stderr)
        return 2


def verify(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", help="TileLang 0.1.14's examples tree (a directory holding examples/ and VERSION); "
                                       "default: $HARNESS_EXAMPLES, .gpu/examples/tilelang-0.1.14, examples-src/...")
    ap.add_argument("--out", help="work directory: the trees, cases, runs and logs (default: a new temporary one)")
    ap.add_argument("--only", action="append", choices=ORDER, help="this patch only (repeatable)")
    ap.add_argument("--match", help="only the shapes whose label matches this regular expression")
    ap.add_argument("--no-calls", action="store_true", help="harness cases only, none of the examples' own calls")
    ap.add_argument("--workers", type=int, default=0, help="harness workers in all (default: CPU cores - call jobs, at "
                                                           "least 4)")
    ap.add_argument("--call-jobs", type=int, default=6, help="examples' own calls at a time (default: 6)")
    ap.add_argument("--call-timeout", type=int, default=420, help="seconds per call (default: 420)")
    ap.add_argument("--full-bench", action="store_true", help="let the examples' main() time their kernels as they "
                                                               "do (hundreds of runs each); by default each is timed once")
    ap.add_argument("--report", help="copy the summary, each tree's results.jsonl and logs here (e.g. $OUT; the work "
                                     "directory itself holds kernel caches, too large to carry back)")
    ap.add_argument("--dry-run", action="store_true", help="apply the patches to copies, write the cases, print the "
                                                           "plan; run nothing (no GPU needed)")
    ap.add_argument("--compile-only", action="store_true", help="no GPU: compile every case for sm_90a on the trees "
                                                                "(COMPILED or UNSUPPORTED passes); no calls")
    args = ap.parse_args(argv)

    source = find_tree(args.examples)
    selected = [s for s in SHAPES if (not args.only or s.patch in args.only)
                and (not args.match or re.search(args.match, s.label)) and not (args.no_calls and s.call)]
    if args.compile_only:
        selected = [s for s in selected if s.case]
    if not selected:
        raise SetupError("no shape selected")
    work = Path(args.out).resolve() if args.out else Path(tempfile.mkdtemp(prefix="verify-example-patches-"))
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from harness import campaign

    todo = plans(selected)
    print(f"examples: {source} (TileLang {(source / 'VERSION').read_text().strip()}'s); work: {work}", file=sys.stderr)
    for name, plan in todo.items():
        tree = work / name / "tree"
        make_tree(source, tree, None if name == "base" else PATCHES / f"{name}.patch")
        (work / name / "logs").mkdir(exist_ok=True)
        if plan.cases:
            campaign.write_cases(work / name / "cases.jsonl", list(dict.fromkeys(plan.cases.values())))
    total_cases = sum(len(set(p.cases.values())) for p in todo.values())
    workers = args.workers or max(4, (os.cpu_count() or 8) - args.call_jobs)
    share = {name: max(1, round(workers * len(set(p.cases.values())) / max(total_cases, 1)))
             for name, p in todo.items() if p.cases}

    def env_for(name: str, what: str) -> dict:
        return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                    TILELANG_CACHE_DIR=str(work / name / "cache" / what), PYTHONUNBUFFERED="1")

    # The examples' own tests first: their shapes are the largest, and the calls are the run's longest pole.
    calls = sorted(((name, s) for name, p in todo.items() for s in p.shapes if s.call),
                   key=lambda c: not c[1].call[1].startswith("test_"))
    for name, plan in todo.items():
        print(f"{name}: {len(set(plan.cases.values()))} harness cases ({share.get(name, 0)} workers), "
              f"{sum(1 for s in plan.shapes if s.call)} calls", file=sys.stderr)
        if plan.cases:
            print("  " + " ".join(harness_argv(plan, work / name / "tree", work / name, share[name], args.compile_only)),
                  file=sys.stderr)
        for shape in plan.shapes:
            where = f"case {plan.cases[shape].id}" if shape.case else "call"
            print(f"  {where}: {shape.label}", file=sys.stderr)
    if args.dry_run:
        print(f"dry run: {sum(1 for name in todo if name != 'base')} patches applied to copies under {work}; "
              f"{total_cases} harness cases and {len(calls)} calls planned", file=sys.stderr)
        return 0

    t0 = time.monotonic()
    runs = {}
    for name, plan in todo.items():
        if plan.cases:
            log = open(work / name / "logs" / "harness-run.log", "w")
            runs[name] = (subprocess.Popen(harness_argv(plan, work / name / "tree", work / name, share[name],
                                                       args.compile_only),
                                           cwd=ROOT, env=env_for(name, "harness"), stdout=log, stderr=subprocess.STDOUT),
                          log)
    called = {}
    with ThreadPoolExecutor(max_workers=max(1, args.call_jobs)) as pool:
        futures = {(name, s): pool.submit(run_call, s, work / name / "tree", work / name / "logs",
                                          env_for(name, re.sub(r"\W+", "_", s.label)[:60]), args.call_timeout,
                                          not args.full_bench)
                   for name, s in calls}
        for key, future in futures.items():
            called[key] = future.result()
            print(f"[{time.monotonic() - t0:5.0f} s] {key[0]}: {key[1].label}: {called[key].what}", file=sys.stderr)
    for name, (proc, log) in runs.items():
        proc.wait()
        log.close()
        print(f"[{time.monotonic() - t0:5.0f} s] {name}: harness run ended ({proc.returncode}); "
              f"log {work / name / 'logs' / 'harness-run.log'}", file=sys.stderr)

    lines, bad = [], 0
    for name, plan in todo.items():
        found = results_of(work / name / "run")
        for shape in plan.shapes:
            side = "without" if name == "base" else "with"
            if shape.case:
                outcome = judge_case(shape, name, found.get(plan.cases[shape].id), args.compile_only)
            else:
                outcome = judge_call(shape, name, called[(name, shape)])
            word = "SKIP" if outcome.skip else "INFO" if outcome.ok is None else "PASS" if outcome.ok else "FAIL"
            bad += word == "FAIL"
            expected = ("no expectation" if outcome.ok is None else "compiles" if args.compile_only
                        else "expected to fail" if side == "without" else "expected to pass")
            what = f"not run: {outcome.skip}" if outcome.skip else outcome.what
            lines.append((shape.patch, side, f"{word} {shape.patch} | {side} | {shape.label} | {expected}: {what}"))
    ordered = [line for _, _, line in sorted(lines, key=lambda x: (ORDER.index(x[0]), x[1] == "with"))]
    print("\n".join(ordered))
    summary = work / "summary.txt"
    summary.write_text("\n".join(ordered) + "\n")
    if args.report:
        report = Path(args.report)
        report.mkdir(parents=True, exist_ok=True)
        shutil.copy(summary, report / "summary.txt")
        for name in todo:
            shutil.copytree(work / name / "logs", report / name / "logs", dirs_exist_ok=True)
            if (work / name / "run" / "results.jsonl").exists():
                shutil.copy(work / name / "run" / "results.jsonl", report / name / "results.jsonl")
    count = {w: sum(1 for *_, line in lines if line.startswith(w)) for w in ("PASS", "FAIL", "SKIP", "INFO")}
    print(", ".join(f"{n} {w}" for w, n in count.items()) + f" in {time.monotonic() - t0:.0f} s; lines in {summary}",
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
