"""harness programs: the vocabulary of generated programs: statement kinds, chains, twins."""
from __future__ import annotations

from harness.commands.common import DONE

EXITS = DONE


def add(sub) -> None:
    pg = sub.add_parser("programs", help="generated programs' vocabulary: statement kinds, the chains they start from, the twins")
    pg.set_defaults(func=cmd_programs)


def cmd_programs(args) -> int:
    """The vocabulary of generated programs: statement kinds, the attention chains they start from, the twins."""
    from harness import compat
    from harness.kernels import program_family
    from harness.programs import KINDS, generate, model

    def first(doc):
        return " ".join(doc.split()).split(". ")[0].rstrip(".")
    for name, module in KINDS.items():
        print(f"statement {name}: {first(module.__doc__).removeprefix(f'{name}: ')}")
    for name, write in generate.TEMPLATES.items():
        print(f"chain {name}: {first(write.__doc__)} [{model.fingerprint(generate.template(name))}]")
    for knob in program_family.TWINS:
        print(f"twin {knob} ({compat.KNOBS[knob]}): bit for bit the knob-free kernel's outputs where the arithmetic is exact")
    return 0
