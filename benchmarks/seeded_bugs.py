"""Finding power: seeded kernel bugs, and how many of them a ci-sized campaign catches.

    python benchmarks/seeded_bugs.py --cases 50 --workers 15 [--parallel 4] [--families fwd,bwd] [--only NAME,...]

Each seeded bug (MUTANTS) is one textual change to a kernel module, applied to a temporary copy
of this tree, never to the package. First the unmutated copy runs a campaign per family
(`--cases`, `--seed`, pairwise kernels first, as `harness run` does); a case that fails there is
dropped, so that the mutants run only cases the real kernels pass. Then each mutant runs exactly
those cases (`--cases-from`) in its family and stops at its first failure; `--parallel N` runs N
campaigns at once, each with `--workers` split N ways (compiles are CPU-bound, so one campaign
that stops after a few cases leaves cores idle). Printed per mutant:
detected or not, the first failure (verdict, tensor, region), cases finished until then, and
seconds; then the score and the survivors with the condition their bug needs. Numbers need a GPU:
without one the campaigns are compile-only and only a mutant that breaks compilation can show.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import case as case_mod  # noqa: E402
from harness import oracle, reproducer_files, reproducer_loading  # noqa: E402
from harness.report import markdown  # noqa: E402
from harness.result import Result  # noqa: E402


@dataclass(frozen=True)
class Mutant:
    name: str
    family: str   # whose campaign should catch it
    file: str     # relative to the repository root
    find: str     # occurs exactly once in `file`
    replace: str
    why: str      # the bug it models, and when it can show
    # Why no oracle can see it (it changes no output on any input), or "": an equivalent mutant is run
    # and listed, but left out of the score, as mutation testing does; caught, it would prove the reason wrong.
    equivalent: str = ""


K = "harness/kernels/"
MUTANTS = [
    Mutant("fwd_no_rescale", "fwd", K + "blocks.py", "acc_o[i, j] *= row_scale[i]", "acc_o[i, j] *= 1",
           "dropped rescale of O when the running max grows: needs two or more key blocks"),
    Mutant("fwd_denominator_no_rescale", "fwd", K + "blocks.py", "denom[i] = denom[i] * row_scale[i] + row_sum[i]",
           "denom[i] = denom[i] + row_sum[i]", "row sum not rescaled: needs two or more key blocks"),
    Mutant("fwd_gqa_head_mapping", "fwd", K + "blocks.py", "    return by // (heads // kv_heads)\n",
           "    return by % kv_heads\n", "wrong KV head for a query head: needs kv_heads > 1 and a group > 1"),
    Mutant("fwd_row_max_cleared", "fwd", K + "blocks.py", "T.reduce_max(acc_s, row_max, dim=1, clear=False)",
           "T.reduce_max(acc_s, row_max, dim=1, clear=True)",
           "running max reset per key block (NaN once a row sees no key of a later block): needs causal or a window"),
    Mutant("fwd_sink_dropped", "fwd", K + "fwd.py", "            if sinks:\n", "            if False:\n",
           "the sink logit left out of the denominator: needs sinks"),
    Mutant("fwd_lse_scale", "fwd", K + "blocks.py", "T.log2(denom_i) + _log2_units(max_i, scale)) / LOG2E",
           "T.log2(denom_i) + _log2_units(max_i, scale)) * LOG2E", "LSE in the wrong log base"),
    Mutant("mask_left_off_by_one", "fwd", K + "masking.py", "kj >= qi + shift - left", "kj > qi + shift - left",
           "sliding window's left edge one key short: needs a left bound"),
    Mutant("mask_right_off_by_one", "fwd", K + "masking.py", "kj <= qi + shift + right", "kj < qi + shift + right",
           "causal diagonal excluded: needs causal or a right bound"),
    Mutant("mask_tail_key_block_skipped", "fwd", K + "masking.py", "end = T.ceildiv(seq_k, block_n)",
           "end = T.floordiv(seq_k, block_n)", "the partial last key block skipped: needs seq_k % block_n != 0"),
    Mutant("bwd_first_query_block_skipped", "bwd", K + "masking.py", "T.floordiv(k0 - shift - right, block_m)",
           "T.floordiv(k0 - shift - right, block_m) + 1",
           "a key block's first query block skipped: needs causal or a right bound"),
    Mutant("bwd_tail_query_block_skipped", "bwd", K + "masking.py", "end = T.ceildiv(seq_q, block_m)",
           "end = T.floordiv(seq_q, block_m)", "the partial last query block skipped: needs seq_q % block_m != 0"),
    Mutant("bwd_gqa_head_mapping", "bwd", K + "bwd.py", "            kvh = blocks.kv_head(by, heads, kv_heads)\n            gh =",
           "            kvh = by % kv_heads\n            gh =",
           "wrong KV head in the backward: needs kv_heads > 1 and a group > 1"),
    Mutant("bwd_delta_max_not_sum", "bwd", K + "bwd.py", "T.reduce_sum(prod, delta, dim=1)",
           "T.reduce_max(prod, delta, dim=1)", "Delta reduced with max instead of sum"),
    Mutant("bwd_dq_layout_reader_mismatch", "bwd", K + "bwd.py",
           "            if annotate:\n                T.annotate_layout({dQacc:",
           "            if not annotate:\n                T.annotate_layout({dQacc:",
           "dQ accumulator read in another layout than it was written"),
    Mutant("bwd_dkdv_wrong_head", "bwd", K + "bwd.py", "gh = by if split else kvh", "gh = by if split else 0",
           "atomic dK/dV all added into KV head 0: needs kv_heads > 1 and an atomic variant"),
    Mutant("bwd_lse_scale", "bwd", K + "blocks.py", "T.exp2(score * scale - lse * LOG2E)",
           "T.exp2(score * scale - lse * scale)", "P recomputed with LSE in the wrong scale"),
    Mutant("bwd_dq_shared_overwritten", "bwd", K + "bwd.py", "                T.atomic_add(dq_s, dq_f)\n",
           "                T.copy(dq_f, dq_s)\n",
           "the shared dQ tile keeps only the last key block's share: needs dq_shared and two key blocks"),
    Mutant("bwd_sink_grad_sign", "bwd", K + "bwd.py", "-T.exp(Sinks[bx] - Lse[bz, bx, qi]) * Delta[bz, bx, qi]",
           "T.exp(Sinks[bx] - Lse[bz, bx, qi]) * Delta[bz, bx, qi]", "dSinks with the wrong sign: needs sinks"),
    Mutant("varlen_k_offset_from_q", "varlen_fwd", K + "varlen.py",
           "k_start = CuK[bz]\n            seq_q = CuQ[bz + 1] - q_start\n            seq_k = CuK[bz + 1] - k_start\n"
           "            kvh = blocks.kv_head(by, heads, kv_heads)\n"
           "            shift = seq_k - seq_q\n            q0 = bx * block_m",
           "k_start = CuQ[bz]\n            seq_q = CuQ[bz + 1] - q_start\n            seq_k = CuK[bz + 1] - k_start\n"
           "            kvh = blocks.kv_head(by, heads, kv_heads)\n"
           "            shift = seq_k - seq_q\n            q0 = bx * block_m",
           "keys read from the query offsets: needs a sequence whose q and k starts differ"),
    Mutant("varlen_lse_without_offset", "varlen_fwd", K + "varlen.py", "Lse[by, q_start + q0 + i] = blocks.lse(",
           "Lse[by, q0 + i] = blocks.lse(", "LSE stored without the sequence's offset: needs two sequences with queries"),
    Mutant("varlen_top_left_alignment", "varlen_fwd", K + "varlen.py",
           "shift = seq_k - seq_q\n            q0 = bx * block_m", "shift = 0\n            q0 = bx * block_m",
           "mask aligned top-left, not bottom-right: needs causal or a window and a sequence with q != k length"),
    Mutant("varlen_bwd_gqa_head_mapping", "varlen_bwd", K + "varlen.py",
           "kvh = blocks.kv_head(by, heads, kv_heads)\n            gh = by if split else kvh",
           "kvh = by % kv_heads\n            gh = by if split else kvh",
           "wrong KV head in the varlen backward: needs kv_heads > 1 and a group > 1"),
    Mutant("varlen_bwd_lse_without_offset", "varlen_bwd", K + "varlen.py", "Lse[0, by, q_start + q0 + i]",
           "Lse[0, by, q0 + i]", "LSE read without the sequence's offset: needs a second sequence with queries"),
    # Tail guards removed. TileLang (0.1.15) bounds-checks global accesses against the tensor's shape, so
    # these write into the next sequence's rows, not outside the tensor: the dQ one adds exact zeros there
    # (its rows past a sequence have P = 0), an equivalent mutant no oracle can see; the dK one stores
    # values computed for keys past its sequence (MISMATCH).
    Mutant("varlen_bwd_dq_tail_unguarded", "varlen_bwd", K + "varlen.py",
           "                    if q0 + i < seq_q:\n                        T.atomic_add(dQ[0, q_start + q0 + i, by, d]",
           "                    if True:\n                        T.atomic_add(dQ[0, q_start + q0 + i, by, d]",
           "dQ atomics of a ragged query tile unguarded: adds zeros into the next sequence",
           equivalent="the unguarded rows' dS is 0 (P = 0 past a sequence), so the atomics add exact zeros, and "
                      "0.1.15 bounds-checks the last sequence's against the tensor's end"),
    Mutant("varlen_bwd_dk_tail_unguarded", "varlen_bwd", K + "varlen.py",
           "                if k0 + j < seq_k:\n                    if split:\n                        dK[",
           "                if True:\n                    if split:\n                        dK[",
           "dK stores/atomics of a ragged key tile unguarded: into the next sequence's keys (dK_acc / dK_heads)"),
    # Writes outside a buffer (guard bands: OOB_WRITE naming the buffer). The dQ accumulators' layout groups
    # rows by 8 and the compiler's bounds check works at that granularity: unpadded, the last group's
    # addresses (its later heads) run past the allocation's end.
    Mutant("varlen_bwd_dq_acc_unpadded", "varlen_bwd", K + "varlen_bwd_family.py",
           "    pad = -(-case.total_q // bwd_family.DQ_ROW_PAD) * bwd_family.DQ_ROW_PAD\n",
           "    pad = case.total_q\n",
           "the packed fp32 dQ accumulator (an intermediate) allocated without its row padding: needs total_q % 8 != 0"),
    Mutant("bwd_dq_acc_unpadded", "bwd", K + "bwd_family.py",
           "    pad = -(-case.seqlen_q // DQ_ROW_PAD) * DQ_ROW_PAD\n",
           "    pad = case.seqlen_q\n",
           "the fp32 dQ accumulator (an intermediate) allocated without the row padding its unguarded atomics "
           "rely on: needs seq_q % 8 != 0"),
    Mutant("varlen_bwd_dq_without_offset", "varlen_bwd", K + "varlen.py", "T.atomic_add(dQ[0, q_start + q0 + i, by, d]",
           "T.atomic_add(dQ[0, q0 + i, by, d]", "dQ added without the sequence's offset: needs a second sequence with queries"),
    Mutant("ws_consumer_stage_off_by_one", "ws", K + "ws.py", "blocks.window_scores(q_s, k_s[st, :, :]",
           "blocks.window_scores(q_s, k_s[(st + 1) % stages, :, :]",
           "the consumer multiplies Q with the next ring slot's keys: needs num_stages > 1 and two key blocks"),
    Mutant("ws_full_parity_flipped", "ws", K + "ws.py",
           "T.mbarrier_wait_parity(full[st], (it // stages) & 1)\n                    blocks.window_scores(",
           "T.mbarrier_wait_parity(full[st], ((it // stages) & 1) ^ 1)\n                    blocks.window_scores(",
           "the consumer's wait returns before the slot's TMA data landed: a race, needs a key block"),
    Mutant("ws_empty_arrive_dropped", "ws", K + "ws.py", "                    T.barrier_arrive(empty[st])\n", "",
           "slots are never handed back: the producer hangs once the trip count exceeds num_stages"),
    Mutant("ws_epilogue_wrong_block", "ws", K + "ws.py",
           "layout.rows(Out, lay, bz, by, q0, block_m), disable_tma=True",
           "layout.rows(Out, lay, bz, by, q0 + block_m, block_m), disable_tma=True",
           "the smem epilogue stores O into the next query block's rows: needs the smem variant"),
    Mutant("softcap_masked_scores_capped", "softcap_fwd", K + "blocks.py",
           "acc_s[i, j] = T.if_then_else(acc_s[i, j] == NEG_INF, NEG_INF,\n                                     T.tanh(",
           "acc_s[i, j] = T.if_then_else(False, NEG_INF,\n                                     T.tanh(",
           "masked scores capped too (tanh(-inf) = -1: keys the row must not see get weight): needs causal, a "
           "window or a ragged key tile"),
    Mutant("softcap_unscaled", "softcap_fwd", K + "blocks.py", "T.tanh(acc_s[i, j] * (sm_scale / softcap))",
           "T.tanh(acc_s[i, j] * (1.0 / softcap))", "scores capped before the 1/sqrt(d) scale: any case with two keys"),
    # Seeded in one form of a block (harness.case.FORMS): caught only by cases drawn in that form.
    Mutant("form_fresh_max_without_previous", "fwd", K + "blocks.py",
           "            row_max[i] = T.max(row_max[i], row_max_prev[i])\n", "            row_max[i] = row_max[i]\n",
           "row_max=fresh keeps the block's max, not the running one: the same softmax up to rounding where every "
           "block shows a row a key (the differential check against the default forms), NaN where one shows none"),
    Mutant("form_mask_init_tail", "fwd", K + "blocks.py",
           "acc_s[i, j] = masking.visible(0, NEG_INF, q0 + i, k0 + j, shift, seq_k, left, right)",
           "acc_s[i, j] = masking.visible(0, NEG_INF, q0 + i, k0 + j, shift, seq_k + 1, left, right)",
           "scores_mask=init lets the key just past the sequence in: needs seq_k % block_n != 0"),
    Mutant("form_kv_loop_last_key_zeroed", "fwd", K + "fwd.py",
           "k_s[j, d] = T.if_then_else(k0 + j < seq_k, layout.at(K,",
           "k_s[j, d] = T.if_then_else(k0 + j < seq_k - 1, layout.at(K,",
           "kv_load=loop loads the last key as zeros: needs that key visible"),
    Mutant("form_serial_first_block_skipped", "fwd", K + "blocks.py", "    return T.serial(lo, hi) if serial",
           "    return T.serial(lo + 1, hi) if serial", "kv_loop=serial starts one key block late: needs a visible first block"),
    Mutant("masked_chunk_off_by_one", "masked_fwd", K + "masked.py", "else buf[b, h, q, k0 // vec + c, e]",
           "else buf[b, h, q, k0 // vec + c + 1, e]",
           "a full tile's mask and bias read one 16-byte run too far: needs the pad variant and a full tile"),
    Mutant("masked_ragged_key_off_by_one", "masked_fwd", K + "masked.py", "return buf[b, h, q, k] if vec == 1 else",
           "return buf[b, h, q, k + 1] if vec == 1 else",
           "mask and bias read one key too far: needs the ragged variant and a mask that is not all true"),
    Mutant("masked_skip_partial_last_block", "masked_fwd", K + "masked.py", "k0 + j < keys", "k0 + block_n <= keys",
           "block activity counts whole key tiles only, so the partial last one is skipped: needs "
           "seq_k % block_n != 0 and a true element there"),
    Mutant("masked_dbias_head_not_reduced", "masked_bwd", K + "masked.py",
           "T.atomic_add(dBias[b, h, q0 + i, k0 + j], dp_t[j, i])", "T.atomic_add(dBias[b, by, q0 + i, k0 + j], dp_t[j, i])",
           "dBias indexed by the query head where the bias broadcasts over heads: needs a bias shared by "
           "two or more heads"),
]


def apply(mutant: Mutant, tree: Path) -> None:
    path = tree / mutant.file
    text = path.read_text()
    if text.count(mutant.find) != 1:
        raise SystemExit(f"{mutant.name}: its text occurs {text.count(mutant.find)} times in {mutant.file}, not once")
    path.write_text(text.replace(mutant.find, mutant.replace))


def copy_tree(dst: Path) -> Path:
    """The harness (package, benchmarks, reproducers) without environments, builds or reports."""
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", ".venv", ".gpu", ".scratch", "reports",
                                                             "__pycache__", "*.tar.xz", "*.egg-info"))
    return dst


def campaign(tree: Path, out: Path, args, family, *extra) -> tuple[list[dict], float]:
    """Run `harness run` inside `tree` (its own copy of the package first on the path)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    # The tree's own reproducers: a known compiler bug that a mutant happens to reach is no detection.
    workers = max(1, args.workers // args.parallel)
    cmd = [sys.executable, "-m", "harness.cli", "run", "--families", family, "--out", str(out), "--workers", str(workers),
           "--arch", args.arch, "--reproducers", str(tree / "reproducers"), *extra]
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - t0
    if done.returncode not in (0, 1):  # 2 bad input, 125 no TileLang: no evidence either way, so no score
        raise SystemExit(f"harness run in {tree.name} exited {done.returncode}:\n{done.stderr[-2000:]}")
    path = out / "results.jsonl"
    return ([Result.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
            if path.exists() else []), seconds


def known_here() -> set:
    """Signatures of the compiler bugs recorded on the TileLang release that runs here. A mutant
    that trips one of them is no detection; one that shows a bug recorded on another release (the
    fixed sink_grad bug of 0.1.12, say) is, since that bug cannot be what failed."""
    from harness.environment import tilelang
    version = tilelang()["tilelang"]
    return {sig for sig, path in reproducer_files.known_signatures(ROOT / "reproducers").items()
            if reproducer_loading.load(path).environment.get("tilelang") == version}


KNOWN: set = set()


def failed(r: Result) -> bool:
    """A failure that detects a mutant: any but a compiler bug recorded on this release."""
    return (r.verdict in oracle.FAILURES and r.signature not in KNOWN) or r.verdict == "HARNESS_ERROR"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=50, help="cases per family (a ci-sized campaign)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--parallel", type=int, default=1, help="campaigns at once (workers are split between them)")
    p.add_argument("--families", help="only the mutants of these families (comma-separated)")
    p.add_argument("--only", help="only these mutants (comma-separated names)")
    p.add_argument("--arch", default="sm_90a", help="compile target without a GPU")
    p.add_argument("--out", default="reports/seeded_bugs", help="the table (markdown and JSON) goes here")
    args = p.parse_args()
    chosen = [m for m in MUTANTS if (not args.only or m.name in args.only.split(","))
              and (not args.families or m.family in args.families.split(","))]
    if not chosen:
        raise SystemExit(f"no mutant chosen; names: {', '.join(m.name for m in MUTANTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    KNOWN.update(known_here())
    from harness.environment import gpu_count
    if not gpu_count():
        print(f"NO GPU: compile-only campaigns ({args.arch}); only mutants that break compilation can be "
              "detected, so this score says nothing about finding power", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ.setdefault("TILELANG_CACHE_DIR", str(tmp / "cache"))  # shared: unchanged kernels load, not compile
        base = copy_tree(tmp / "base")

        def baseline(family: str) -> Path:
            results, seconds = campaign(base, tmp / f"base-{family}", args, family, "--cases", str(args.cases),
                                        "--seed", str(args.seed))
            bad = {r.case_id for r in results if failed(r)}
            lines = (tmp / f"base-{family}" / "cases.jsonl").read_text().splitlines()
            keep = [line for line in lines if case_mod.from_json(line).id not in bad]
            if not keep:
                raise SystemExit(f"baseline {family}: every case failed unmutated; nothing to measure with")
            path = tmp / f"cases-{family}.jsonl"
            path.write_text("\n".join(keep) + "\n")
            print(f"baseline {family}: {len(results)} cases in {seconds:.0f} s, "
                  f"{len(bad)} failing unmutated (dropped), {len(keep)} kept", flush=True)
            return path

        families = sorted({m.family for m in chosen})
        with ThreadPoolExecutor(args.parallel) as pool:
            cases_of = dict(zip(families, pool.map(baseline, families)))

        def one(m: Mutant) -> dict:
            tree = copy_tree(tmp / m.name)
            apply(m, tree)
            results, seconds = campaign(tree, tmp / f"run-{m.name}", args, m.family, "--cases-from",
                                        str(cases_of[m.family]), "--stop-after-failures", "1")
            shutil.rmtree(tree)
            first = next((i for i, r in enumerate(results) if failed(r)), None)
            hit = results[first] if first is not None else None
            row = {"mutant": m.name, "family": m.family, "detected": "yes" if hit else "NO",
                   "first failure": (f"{hit.verdict} {hit.tensor} {hit.region}".strip()
                                     if hit else ""),
                   "cases run": len(results), "cases to detect": first + 1 if hit else "",
                   "seconds": round(seconds), "why": m.why, "equivalent": m.equivalent,
                   "message": hit.message.splitlines()[0][:300] if hit and hit.message else ""}
            print(f"{m.name}: {row['detected']} {row['first failure']} after "
                  f"{row['cases to detect'] or len(results)} cases, {seconds:.0f} s {row['message'][:120]}", flush=True)
            return row

        with ThreadPoolExecutor(args.parallel) as pool:  # threads only wait on `harness run` subprocesses
            rows = list(pool.map(one, chosen))
    import pandas as pd
    table = pd.DataFrame(rows)
    scored = table[table.equivalent == ""]
    caught = int((scored.detected == "yes").sum())
    text = (markdown(table.drop(columns=["why", "message", "equivalent"])) +
            f"\nscore: {caught} / {len(scored)} seeded bugs detected ({100 * caught / max(len(scored), 1):.0f}%), "
            f"{args.cases} cases per family, seed {args.seed}; equivalent mutants not scored: {len(table) - len(scored)}\n")
    survivors = scored[scored.detected == "NO"]
    if not survivors.empty:
        text += "\nsurvivors:\n" + "".join(f"- {r.mutant}: {r.why}\n" for r in survivors.itertuples())
    for r in table[table.equivalent != ""].itertuples():
        text += f"\nequivalent: {r.mutant} ({'CAUGHT: not equivalent after all' if r.detected == 'yes' else 'not caught'}): " \
                f"{r.equivalent}\n"
    print(text)
    (out / "seeded_bugs.md").write_text(text)
    table.to_json(out / "seeded_bugs.json", orient="records", indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
