"""A new reproducer, built from the Result of a failing case: its id, its title and description, what correct
behaviour is, what was observed; `write` records it unless its signature is already recorded."""
from __future__ import annotations

from pathlib import Path

from harness import case as case_mod
from harness import kernels, oracle
from harness.programs.model import fingerprint
from harness.reproducer_files import free_id, known_signatures, save, signature_id
from harness.reproducer_model import FOLDER_OF_KIND, TITLE_MAX, Links, Reproducer
from harness.result import Result


def expected_text(case) -> str:
    names = ", ".join(name for name, _ in kernels.family(case.family).judge.tensors(case))
    if case.program:
        return (f"the program compiles, runs without a CUDA error, writes nothing past a buffer, and {names} hold what "
                "the program means (its torch meaning in float64): bit for bit where the arithmetic is exact, else within "
                "the tolerance rule; compiled with its knobs, bit for bit what it gives without them")
    return (f"the {case.family} kernel compiles, runs without a CUDA error or hang, and {names} match the "
            f"float64 reference within the FlashAttention tolerance rule "
            f"max|t - ref| <= k * max|base - ref| + atol (k = {oracle.K_FORWARD} forward, "
            f"{oracle.K_GRADIENT} gradients)")


def _feature(name, value) -> str:
    if isinstance(value, bool):
        return name
    if name == "program":
        return f"program [{fingerprint(value)}]"
    if name == "forms":
        value = case_mod.form_names(value)
    return value if isinstance(value, str) else f"{name}={list(value) if isinstance(value, tuple) else value}"


def split_title(text: str) -> tuple[str, str]:
    """(title, rest): `text` on one line, cut at the last word boundary within TITLE_MAX characters."""
    words = " ".join(text.split())
    if len(words) <= TITLE_MAX:
        return words, ""
    cut = words.rfind(" ", 0, TITLE_MAX + 1)
    cut = cut if cut > 0 else TITLE_MAX  # one word longer than a title: cut inside it
    return words[:cut].rstrip(), words[cut:].strip()


def _made_title(result: Result) -> str:
    """The construct and the symptom: family/variant, verdict, where; the features and shape go to the description."""
    c = result.case
    what = " ".join(x for x in (result.verdict, result.tensor, result.region) if x)
    return f"{c.family}/{c.variant}: {what} at stage {result.stage}"


def default_title(result: Result) -> str:
    """The title build() makes when none is given."""
    return split_title(_made_title(result))[0]


def default_description(result: Result) -> str:
    """The case's static features and its shape, which a default title leaves out."""
    c = result.case
    feats = [_feature(name, value) for name, value in case_mod.features_on(c, static_only=True).items()]
    if c.program:  # its shape is the program's own
        p = c.program
        shape = f"n={c.seqlen_q} block={p.block} threads={p.threads}"
    else:
        shape = (f"b={c.batch} h={c.heads}/{c.kv_heads} sq={c.seqlen_q} sk={c.seqlen_k} "
                 f"d={c.head_dim}/{c.head_dim_v} tile={c.block_m}x{c.block_n}/{c.num_stages}/{c.threads}")
    return ", ".join(feats + [shape])


def observed(result: Result, flaky: dict | None = None) -> dict:
    """A reproducer's `observed` section (with the cause the code scan predicts, for a HANG it explains)."""
    return {"verdict": result.verdict.value, "stage": result.stage, "tensor": result.tensor, "region": result.region,
            "message": result.message, "kernel": result.kernel, "traceback": result.traceback,
            "signature": list(result.signature), "checks": result.checks if result.checks is not None else [],
            "flaky": flaky, **({"predicted": list(result.predicted)} if result.predicted else {})}


def build(result: Result, env: dict, title=None, flaky=None, minimized_from=None, id=None,
          description=None) -> Reproducer:
    """`description`: None for the case's features and shape (default_description); a title longer than TITLE_MAX
    is cut, its rest put before the description."""
    if not result.failed:  # a HARNESS_ERROR is ours, never the compiler's
        raise ValueError(f"only compiler failures {oracle.FAILURES} are recorded, not {result.verdict}")
    case = result.case
    title, rest = split_title(title or _made_title(result))
    about = default_description(result) if description is None else description
    return Reproducer(id or signature_id(result.signature), title, case, expected_text(case), observed(result, flaky),
                      {**env, **program_of(case)}, Links(), minimized_from,
                      description="; ".join(x for x in (rest, about) if x))


def program_of(case) -> dict:
    """For a kernel nobody here wrote: the TileLang examples' release, the file and its sha256,
    so that a reproducer names the program it ran (--examples must give the same file)."""
    module = kernels.family(case.family).runner.module
    if module is None:
        return {}
    from harness.outside import source
    return {"examples_release": source.version(source.root()) or "", "examples_module": module,
            "examples_sha256": source.digest(module)}


def recorded(root) -> dict:
    """{signature: path} of every reproducer under `root`, a candidate's too: what `write` will not record again."""
    return known_signatures(root, kinds=tuple(FOLDER_OF_KIND))


def write(result: Result, env: dict, root, title=None, flaky=None, minimized_from=None, on_disk: dict | None = None) -> Path:
    """Record a failure in the compiler's group under `root`, unless its signature is already recorded (in any
    group, a candidate's too): then return that file. A caller recording many passes `on_disk` (`recorded(root)`,
    kept current here), so that each call does not read every file under `root` again."""
    sig = result.signature
    on_disk = recorded(root) if on_disk is None else on_disk
    if sig not in on_disk:
        on_disk[sig] = save(build(result, env, title, flaky, minimized_from, id=free_id(sig, root)), root)
    return on_disk[sig]
