"""A generated program's finding as one file a maintainer runs alone: the TileLang program, its meaning in torch
(`expected`, what the language says the kernel computes), the inputs, and the check the finding needs. It
imports tilelang and torch only, prints REPRODUCED or NOT REPRODUCED, and exits 1 or 0 (as `git bisect run`
reads it; 125 where it cannot test: no GPU for a finding that runs).
"""
from __future__ import annotations

from harness.programs import emit
from harness.programs.model import INPUT_RANGE, Program

# What each verdict checks. A compile error and a frontend refusal only compile; the others run.
COMPILES = ("COMPILE_ERROR", "REJECTED")

_RUN = '''
def run(configs):
    """The kernel on copies of the inputs: the outputs, and the buffers it wrote past (each has BAND rows of 7s after it)."""
    kernel = tilelang.compile(program, pass_configs=configs)
    padded = {k: torch.cat([v, torch.full((BAND, v.shape[1]), 7, dtype=v.dtype)]).cuda() for k, v in init.items()}
    kernel(*(padded[k][:len(v)] for k, v in init.items()))
    past = [k for k in padded if (padded[k][len(init[k]):] != 7).any()]
    return {k: padded[k][:len(init[k])].cpu().double() for k in OUTPUTS}, past
'''


def text(p: Program, n: int, seed: int, configs: list[str], verdict: str, header: str, tolerance: float = 0.0,
         control: bool = False, error: str = "") -> str:
    """The file's text. `configs`: the PassConfigKey names the finding compiles with; `control`: the finding is a
    twin's, so the file also compiles without them and compares bit for bit; `tolerance`: max |kernel - expected|
    allowed (0: the arithmetic is exact); `error`: what a compile error says (its words, numbers aside), so that
    another error is no reproduction. Without a GPU a compile targets sm_90a."""
    lines = ['"""' + header.strip() + "\n\n    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)\n" + '"""',
             "import sys", "import tilelang", "import tilelang.language as T", "import torch",
             'n = T.symbolic("n")', "", "", emit.tilelang_source(p).rstrip(), "", ""]
    configs_text = "{" + ", ".join(f"tilelang.PassConfigKey.{c}: True" for c in configs) + "}"
    if verdict in COMPILES:
        lines += ["", "if __name__ == \"__main__\":",
                  '    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})',
                  '    target = "auto" if torch.cuda.is_available() else sm90',
                  "    try:",
                  f"        tilelang.compile(program, target=target, pass_configs={configs_text})",
                  "    except Exception as e:",
                  f"        said = {error!r}",
                  "        print('REPRODUCED:' if said in str(e) else 'NOT REPRODUCED, another error:', type(e).__name__, said)",
                  "        sys.exit(1 if said in str(e) else 0)", "    print('NOT REPRODUCED: it compiles')"]
        return "\n".join(lines) + "\n"
    reference = emit.torch_source(p)
    used = [name for name in emit.HELPER_NAMES if f"{name}(" in reference]
    lines += [emit.helpers(used, compact=True).rstrip(), reference.rstrip()]
    shapes = ", ".join(f'"{b.name}": (({("N" if b.rows == "n" else b.rows)}, {b.shape[1]}), torch.{b.dtype})' for b in p.globals)
    lines += [f"N, SEED, BAND, OUTPUTS = {n}, {seed}, 64, {p.written()!r}",
              "gen = torch.Generator().manual_seed(SEED)",
              f"init = {{k: torch.randint(-{INPUT_RANGE}, {INPUT_RANGE + 1}, s, generator=gen).to(d) "
              f"for k, (s, d) in {{{shapes}}}.items()}}",
              _RUN.strip(), "", "",
              'if __name__ == "__main__":',
              "    if not torch.cuda.is_available():",
              "        sys.exit(125)",
              "    want = expected(N, *init.values())"]
    if verdict == "CRASH":
        lines += ["    try:", f"        run({configs_text})", "    except Exception as e:",
                  "        print('REPRODUCED:', str(e).strip().splitlines()[0])", "        sys.exit(1)",
                  "    print('NOT REPRODUCED: it ran')", "    sys.exit(0)"]
        return "\n".join(lines) + "\n"
    lines += [f"    got, past = run({configs_text})",
              f"    wrong = {{k: g for k in OUTPUTS if not (g := (got[k] - want[k]).abs().max().item()) <= {tolerance!r}}}"]
    if control:
        lines += ["    control, _ = run({})",
                  "    twin = [k for k in OUTPUTS if not torch.equal(got[k], control[k])]",
                  f"    print('{', '.join(configs)} on: wrong', wrong, 'past the end', past, '| off: differs in', twin)",
                  "    sys.exit(print('REPRODUCED') or 1 if wrong or past or twin else print('NOT REPRODUCED') or 0)"]
    else:
        lines += ["    print('max |kernel - expected| by output:', wrong, '| written past the end:', past)",
                  "    sys.exit(print('REPRODUCED') or 1 if wrong or past else print('NOT REPRODUCED') or 0)"]
    return "\n".join(lines) + "\n"
