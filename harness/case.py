"""The Case: one attention test, the unit that is generated, run, recorded and replayed.

A Case is a frozen dataclass; JSON is its only serialized form. Each field declares whether it is
static (a compiled kernel depends on it) or dynamic (one compiled kernel serves every value:
batch, lengths, seed); a field that can be switched off is a `Feature`, declared once in FEATURES
with its off value, how it is drawn, its covering-array values and how it shrinks. The kernel
cache key, the strategies, the covering array, the minimizer and a reproducer's default title all
derive from those declarations. `validate()` names the first reason a case is impossible; `from_json` rejects
unknown keys, wrong types and missing keys of fields without an "off" value (a missing one with
an off value is off: older files lack the fields added since). Family names are checked by `harness.kernels`.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.programs import generate, relations, templates
from harness.programs import model as programs

DTYPES = ("float16", "bfloat16")
LAYOUTS = ("bhsd", "bshd", "thd")  # thd: packed varlen tokens (harness.layout)
# Compile knobs: pass configurations that change code generation (harness.compat maps each to the
# release's own PassConfigKey; a release without one reports the case UNSUPPORTED).
# Masked families: the mask's contents are data drawn from a pattern and the seed (dynamic);
# its broadcast shape over (batch, heads) and the bias are compiled in (static).
MASKS = ("none", "random", "empty_rows", "empty_blocks", "causal", "band", "single")
BROADCASTS = ("bh", "b1", "1h", "11")  # mask/bias [batch or 1, heads or 1, seq_q, seq_k]
KNOBS = ("fast_math", "no_safe_memory", "no_smem_reuse", "no_tma", "no_vectorize_256", "no_warp_specialize", "no_wgmma")
# Program forms: equivalent ways to write a kernel block, drawn like shapes so that campaigns reach the
# lowering paths each takes (layout inference, the pipeliner, warp specialization, vectorization).
# block -> {form: how it is written}; the first form is the default, which a Case leaves unnamed. Each of
# these moves data or orders work differently and leaves the arithmetic alone, so a kernel written in any
# of them must give the default forms' outputs bit for bit (harness.worker's differential check).
FORMS = {
    "q_load": {"copy": "the Q tile by T.copy", "loop": "the Q tile by a guarded element loop (T.Parallel)"},
    "kv_load": {"copy": "K and V tiles by T.copy", "loop": "K and V tiles by guarded element loops"},
    "kv_loop": {"pipelined": "the key-block loop as T.Pipelined(num_stages)", "serial": "the key-block loop as T.serial"},
    "scores_mask": {"predicate": "masked scores set to -inf after the QK^T GEMM",
                    "init": "the mask as the GEMM's initial value (0 or -inf), accumulated onto"},
    "row_max": {"running": "the running max by reduce_max(clear=False)",
                "fresh": "the block's max by reduce_max(clear=True), then max with the previous"},
    "p_operand": {"registers": "P handed to the PV GEMM from registers", "shared": "P staged through shared memory"},
    "rescale": {"separate": "scale factor, denominator and O rescale in separate loops",
                "merged": "scale factor and denominator in one loop"},
}


def _static(default):
    return field(default=default, metadata={"static": True})


def _dynamic(default):
    return field(default=default, metadata={"static": False})


class CaseError(ValueError):
    """A case that cannot exist, or a JSON text that does not describe one."""


@dataclass(frozen=True)
class Case:
    family: str = _static("fwd")
    variant: str = _static("default")
    batch: int = _dynamic(1)
    heads: int = _static(1)
    kv_heads: int = _static(1)
    seqlen_q: int = _dynamic(1)
    seqlen_k: int = _dynamic(1)
    head_dim: int = _static(64)
    head_dim_v: int = _static(64)
    dtype: str = _static("float16")
    causal: bool = _static(False)
    window: tuple = _static((-1, -1))
    sinks: bool = _static(False)
    layout: str = _static("bhsd")
    block_m: int = _static(64)
    block_n: int = _static(64)
    num_stages: int = _static(1)
    threads: int = _static(128)
    knobs: tuple = _static(())
    # Blocks written in a form other than the default: (block, form) pairs sorted by block (FORMS); a file writes
    # each as "block=form".
    forms: tuple = _static(())
    seed: int = _dynamic(0)
    # Packed (varlen) families: per-sequence (q, k) lengths, zero allowed; batch is their count and
    # seqlen_q / seqlen_k bound them (the max lengths). Empty for dense families.
    seqlens: tuple = _dynamic(())
    # Masked families: the mask pattern ("none": every element true), its broadcast shape over
    # (batch, heads), and whether an additive bias of that shape is added to the scores.
    mask: str = _dynamic("none")
    mask_broadcast: str = _static("bh")
    bias: bool = _static(False)
    # Generated tile programs (harness.programs): the program (None for none).
    program: programs.Program | None = _static(None)

    @property
    def bounds(self) -> tuple[int, int]:
        """Effective (left, right) window: causal is (-1, 0) intersected with the window."""
        left, right = self.window
        if self.causal:
            right = 0 if right < 0 else min(right, 0)
        return left, right

    def form(self, block: str) -> str:
        """The form `block` is written in (its default unless the case names another)."""
        return dict(self.forms).get(block, next(iter(FORMS[block])))

    @property
    def tile(self) -> tuple[int, int, int, int]:
        return self.block_m, self.block_n, self.num_stages, self.threads

    @functools.cached_property
    def id(self) -> str:
        """A digest of the case's JSON: computed once per case (a run asks it of every case several times)."""
        return hashlib.sha1(to_json(self).encode()).hexdigest()[:12]

    def replace(self, **changes) -> Case:
        return dataclasses.replace(self, **changes)

    def validate(self) -> Case:
        """Return self, or raise CaseError with a one-line reason."""
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise CaseError(f"{name} must be in [{low}, {high}], got {value}")
        if self.dtype not in DTYPES:
            raise CaseError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise CaseError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.heads % self.kv_heads:
            raise CaseError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if len(self.window) != 2 or any(not -1 <= w <= MAX_LENGTH for w in self.window):
            raise CaseError(f"window must be (left, right) with each in [-1, {MAX_LENGTH}], got {self.window}")
        if any(k not in KNOBS for k in self.knobs) or list(self.knobs) != sorted(set(self.knobs)):
            raise CaseError(f"knobs must be distinct names from {KNOBS}, sorted, got {list(self.knobs)}")
        self._validate_forms()
        if self.mask not in MASKS:
            raise CaseError(f"mask must be one of {MASKS}, got {self.mask!r}")
        if self.mask_broadcast not in BROADCASTS:
            raise CaseError(f"mask_broadcast must be one of {BROADCASTS}, got {self.mask_broadcast!r}")
        if (self.layout == "thd") != bool(self.seqlens):
            raise CaseError("the packed layout 'thd' goes with seqlens, and seqlens with it")
        if self.seqlens:
            self._validate_seqlens()
        if self.program is not None:
            _checked(self.program)
        elements = self.batch * self.heads * max(self.seqlen_q, self.seqlen_k) * max(self.head_dim, self.head_dim_v)
        if elements > MAX_ELEMENTS:
            raise CaseError(f"a tensor of batch x heads x length x head_dim = {elements} elements "
                            f"exceeds {MAX_ELEMENTS}")
        return self

    def _validate_forms(self):
        for name, (block, form) in zip(form_names(self.forms), self.forms):
            if block not in FORMS or form not in list(FORMS[block])[1:]:
                raise CaseError(_not_a_form(name))
        if list(self.forms) != sorted(self.forms) or len(dict(self.forms)) != len(self.forms):
            raise CaseError(f"forms must be sorted, one per block, got {list(form_names(self.forms))}")

    def _validate_seqlens(self):
        if len(self.seqlens) != self.batch:
            raise CaseError(f"seqlens holds {len(self.seqlens)} sequences but batch is {self.batch}")
        for i, pair in enumerate(self.seqlens):
            if len(pair) != 2 or any(not 0 <= n <= MAX_LENGTH for n in pair):
                raise CaseError(f"seqlens[{i}] must be (q, k) with each in [0, {MAX_LENGTH}], got {pair}")
        for axis, name in ((0, "seqlen_q"), (1, "seqlen_k")):
            longest = max(pair[axis] for pair in self.seqlens)
            if longest > getattr(self, name):
                raise CaseError(f"{name} (the max length, {getattr(self, name)}) is smaller than a sequence "
                                f"of length {longest}")

    @property
    def total_q(self) -> int:
        return sum(q for q, _ in self.seqlens)

    @property
    def total_k(self) -> int:
        return sum(k for _, k in self.seqlens)


# Bounds far beyond any kernel's, so that a case is rejected before it allocates absurd memory.
MAX_LENGTH = 1 << 20
MAX_ELEMENTS = 1 << 31
LIMITS = {"batch": (1, 4096), "heads": (1, 1024), "kv_heads": (1, 1024), "seqlen_q": (1, MAX_LENGTH),
          "seqlen_k": (1, MAX_LENGTH), "head_dim": (1, 1024), "head_dim_v": (1, 1024), "block_m": (1, 1024),
          "block_n": (1, 1024), "num_stages": (0, 16), "threads": (1, 1024), "seed": (0, 2**63 - 1)}

_FIELDS = {f.name: f for f in dataclasses.fields(Case)}
STATIC = tuple(name for name, f in _FIELDS.items() if f.metadata["static"])
DYNAMIC = tuple(name for name, f in _FIELDS.items() if not f.metadata["static"])


# Window bounds a campaign draws: 0, 1, odd, around a block, and larger than any sequence drawn.
WINDOW_BOUNDS = (-1, 0, 1, 3, 17, 63, 64, 65, 129, 4096)
# Not drawn for the attention families (a case may still set them by hand): no_warp_specialize breaks CUDA
# codegen of every 2-stage kernel on TileLang 0.1.14+ (reproducers 752120de86bc, c1cea3d90700), and that
# one bug would surface under a new signature in every family and variant; no_safe_memory drops the guards
# their ragged tiles rely on. Generated programs draw their own (Offer.knobs: the twins).
DRAWN_KNOBS = tuple(k for k in KNOBS if k not in ("no_warp_specialize", "no_safe_memory"))


@dataclass(frozen=True)
class Feature:
    """A Case field that can be switched off, declared once for every module that walks features: how
    a campaign draws it (harness.strategies), its values in the covering array (harness.pairwise),
    and how the minimizer shrinks it (harness.minimize).

    `draw(st, offer)` is given Hypothesis's strategies module (nothing at this layer imports
    Hypothesis) and the family's offer (harness.kernels.Offer); None when the family's lengths strategy draws it
    (dynamic fields). `levels(offer)` -> {factor: values} for pairwise coverage; `of(case, offer)` -> {factor: value};
    `sets(row)` -> the Case fields a covering-array row of factor values sets. By default a
    feature is one factor named after its field, and shrinks to its off value (a pair also one half at
    a time, a set of names one name at a time, so a minimized case names the one knob that matters).
    `optional`: a family takes it only if it names it in Offer.takes. `holds(value)` -> the named properties a
    drawn value holds that a campaign covers as it covers pairs (a program's hazard relations): it steers its draws
    toward those its run has not covered yet (harness.strategies.steered).
    """
    name: str
    off: object
    draw: Callable | None = None
    values: Callable = lambda offer: ()         # the covering array's values of the field, per family
    optional: bool = False
    factors: Callable | None = None             # overrides: several factors for one field (forms)
    level: Callable | None = None
    sets: Callable | None = None
    steps: Callable | None = None               # overrides: shrink steps of its own (a program's statements)
    holds: Callable | None = None               # a covering goal: what a drawn value holds (see above)
    shown: Callable = repr                      # a value as a shrink step writes it

    def levels(self, offer) -> dict:
        if self.factors:
            return self.factors(offer)
        values = tuple(self.values(offer))
        return {self.name: values} if values else {}

    def of(self, case, offer) -> dict:
        return self.level(case, offer) if self.level else {self.name: getattr(case, self.name)}

    def fields(self, row: dict) -> dict:
        return self.sets(row) if self.sets else {self.name: row[self.name]}

    def shrink(self, case) -> list:
        """(step, smaller case) candidates, the feature switched off first."""
        now, off, name = getattr(case, self.name), self.off, self.name
        if now == off:
            return []
        if self.steps:
            return self.steps(case)
        shown = self.shown
        out = [(f"{name} {shown(now)} -> {shown(off)}", case.replace(**{name: off}))]
        if isinstance(off, tuple) and off:
            halves = [now[:i] + off[i:i + 1] + now[i + 1:] for i in range(len(off))]
            out += [(f"{name} {shown(now)} -> {shown(h)}", case.replace(**{name: h})) for h in halves if h not in (now, off)]
        elif isinstance(off, tuple) and len(now) > 1:
            out += [(f"{name} {shown(now)} -> {shown(now[:i] + now[i + 1:])}", case.replace(**{name: now[:i] + now[i + 1:]}))
                    for i in range(len(now))]
        return out


# Kinds of window -> the one a covering-array row takes: (left, right), -1 unbounded, causal a factor apart.
WINDOW_KINDS = {"none": (-1, -1), "left": (17, -1), "right": (-1, 65), "band": (63, 1), "up_to_diagonal": (129, 0)}


def window_kind(window: tuple) -> str:
    left, right = window
    if (left, right) == (-1, -1):
        return "none"
    if right == -1:
        return "left"
    if left == -1:
        return "right"
    return "up_to_diagonal" if right == 0 else "band"


@functools.lru_cache(maxsize=1024)
def _checked(program: programs.Program) -> None:
    """CaseError if `program` breaks a rule: once per program, though a draw validates it at each of its lengths."""
    try:
        programs.check(program)
    except programs.ProgramError as e:
        raise CaseError(f"program: {e}") from None


def _windows(st):
    return st.one_of(st.just((-1, -1)), st.tuples(st.sampled_from(WINDOW_BOUNDS), st.sampled_from(WINDOW_BOUNDS)))


def _knobs(st, offered):
    """Half the kernels with the release's default passes, the rest with one or two switched."""
    some = st.lists(st.sampled_from(offered), min_size=1, max_size=2, unique=True).map(lambda k: tuple(sorted(k)))
    return st.one_of(st.just(()), some)


def form_names(forms) -> tuple[str, ...]:
    """(block, form) pairs as a case's file and messages write them: "block=form"."""
    return tuple(f"{block}={form}" for block, form in forms)


def _form_pair(name: str) -> tuple[str, str]:
    block, equals, form = name.partition("=")
    if not equals:
        raise CaseError(_not_a_form(name))
    return block, form


def _not_a_form(name: str) -> str:
    return (f"form {name!r} is not 'block=form' with a block of {tuple(FORMS)} and one of its forms other than the "
            "default")


def _forms(st, offer):
    """Half the kernels in the default forms, the rest with one to three blocks in another form."""
    if not offer.forms:
        return st.just(())
    pairs = [(b, f) for b in offer.forms for f in list(FORMS[b])[1:]]
    some = st.lists(st.sampled_from(pairs), min_size=1, max_size=3, unique_by=lambda pair: pair[0])
    return st.one_of(st.just(()), some.map(lambda f: tuple(sorted(f))))


FORM_FACTORS = {f"form:{b}": b for b in FORMS}   # covering-array factor -> the block whose forms are its values


def _form_rows(row: dict) -> dict:
    chosen = ((block, row[factor]) for factor, block in FORM_FACTORS.items() if factor in row)
    return {"forms": tuple(sorted((block, form) for block, form in chosen if form != next(iter(FORMS[block]))))}


# The features, in the order a campaign draws them (a family's static fields after its tile and variant).
FEATURES = (
    Feature("dtype", "float16", draw=lambda st, offer: st.sampled_from(offer.dtypes), values=lambda offer: offer.dtypes),
    Feature("causal", False, optional=True, draw=lambda st, offer: st.booleans(), values=lambda offer: (False, True)),
    # Covered by kind (WINDOW_KINDS), so that a drawn window counts for the kind it is.
    Feature("window", (-1, -1), optional=True, draw=lambda st, offer: _windows(st), values=lambda offer: tuple(WINDOW_KINDS),
            level=lambda c, offer: {"window": window_kind(c.window)}, sets=lambda row: {"window": WINDOW_KINDS[row["window"]]}),
    Feature("sinks", False, optional=True, draw=lambda st, offer: st.booleans(), values=lambda offer: (False, True)),
    Feature("mask_broadcast", "bh", optional=True, draw=lambda st, offer: st.sampled_from(BROADCASTS),
            values=lambda offer: BROADCASTS),
    Feature("bias", False, optional=True, draw=lambda st, offer: st.booleans(), values=lambda offer: (False, True)),
    Feature("layout", "bhsd", draw=lambda st, offer: st.sampled_from(offer.layouts), values=lambda offer: offer.layouts),
    # One knob at a time in the covering array: a pair of knobs is a pair of factor values only through other factors.
    Feature("knobs", (), draw=lambda st, offer: _knobs(st, offer.knobs),
            values=lambda offer: ((),) + tuple((k,) for k in offer.knobs)),
    # Each block the family writes in several forms is a factor ("form:<block>"), its forms the values.
    Feature("forms", (), draw=_forms, factors=lambda offer: {f"form:{b}": tuple(FORMS[b]) for b in offer.forms},
            level=lambda c, offer: {f"form:{b}": c.form(b) for b in offer.forms}, sets=_form_rows,
            shown=lambda forms: repr(form_names(forms))),
    # A generated program: the covering array's values are the attention chains it starts from.
    # Mapped through check (which returns the program) because Hypothesis draws a map in a span of its own: without it a
    # seed would draw other cases than it drew when programs were mapped to their text. Hypothesis drops an identity map.
    Feature("program", None, optional=True, draw=lambda st, offer: generate.programs(st).map(programs.check),
            values=lambda offer: tuple(templates.TEMPLATES),
            level=lambda c, offer: {"program": templates.construct(c.program)},
            sets=lambda row: {"program": generate.template(row["program"])},
            steps=lambda c: [(step, c.replace(program=q)) for step, q in generate.shrink(c.program)],
            holds=lambda p: set(relations.held(p))),
    Feature("seed", 0),                                    # dynamic: the lengths strategy draws these
    Feature("mask", "none", optional=True),
)
OFF = {f.name: f.off for f in FEATURES}                   # name -> the value that switches it off
# The features a family takes only if it declares them (harness.kernels.Offer.takes): off otherwise.
OPTIONAL = tuple(f.name for f in FEATURES if f.optional)


def static_key(case: Case) -> tuple:
    """What a compiled kernel depends on: the static fields, in declaration order."""
    return tuple(getattr(case, name) for name in STATIC)


def features_on(case: Case, static_only=False) -> dict:
    """{name: value} of the features that are not off."""
    return {name: getattr(case, name) for name, off in OFF.items()
            if getattr(case, name) != off and (not static_only or name in STATIC)}


def to_dict(case: Case) -> dict:
    # Not dataclasses.asdict: it deep-copies every tuple element by element, and a run writes each case
    # four times (cases.jsonl, the id, the worker's line, results.jsonl). The tuples are made lists below.
    d = {name: getattr(case, name) for name in _FIELDS}
    d["window"] = list(case.window)
    d["seqlens"] = [list(pair) for pair in case.seqlens]
    d["knobs"] = list(case.knobs)
    d["forms"] = list(form_names(case.forms))
    if not case.forms:
        del d["forms"]  # off: the JSON (and so the id) of every case without forms stays as it was
    if case.program is not None:
        d["program"] = programs.to_dict(case.program)  # an object in the file, read by people
    else:
        del d["program"]
    return d


def to_json(case: Case) -> str:
    return json.dumps(to_dict(case), sort_keys=True)


def _check_type(name, value):
    default = _FIELDS[name].default
    if name == "window":
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and all(type(v) is int for v in value)):
            raise CaseError(f"field 'window' must be a pair of integers, got {value!r}")
        return tuple(value)
    if name in ("knobs", "forms"):
        if not (isinstance(value, (list, tuple)) and all(isinstance(k, str) for k in value)):
            raise CaseError(f"field {name!r} must be a list of strings, got {value!r}")
        return tuple(value) if name == "knobs" else tuple(_form_pair(f) for f in value)
    if name == "program":
        if not isinstance(value, dict):
            raise CaseError(f"field 'program' must be an object, got {type(value).__name__}")
        try:
            return programs.from_dict(value)
        except programs.ProgramError as e:
            raise CaseError(f"program: {e}") from None
    if name == "seqlens":
        if not (isinstance(value, (list, tuple)) and all(
                isinstance(p, (list, tuple)) and len(p) == 2 and all(type(n) is int for n in p) for p in value)):
            raise CaseError(f"field 'seqlens' must be a list of [q, k] integer pairs, got {value!r}")
        return tuple(tuple(p) for p in value)
    if type(value) is not type(default):
        raise CaseError(f"field {name!r} must be {type(default).__name__}, got {type(value).__name__} {value!r}")
    return value


def from_dict(d: dict) -> Case:
    if not isinstance(d, dict):
        raise CaseError(f"a case must be a JSON object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise CaseError(f"unknown case field(s): {', '.join(unknown)}")
    # A field with an "off" value may be missing (files written before it existed): it is off.
    missing = [name for name in _FIELDS if name not in d and name not in OFF]
    if missing:
        raise CaseError(f"missing case field(s): {', '.join(missing)}")
    return Case(**{k: _check_type(k, v) for k, v in d.items()}).validate()


def from_json(text: str) -> Case:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"case is not valid JSON: {e}") from None
    return from_dict(d)
