"""harness programs: the vocabulary of generated programs (statement kinds, chains, twins), or programs drawn without
a compile and the hazard relations they hold."""
from __future__ import annotations

import sys

from harness.commands.common import DONE, nonnegative_int, positive

EXITS = DONE
MAX_DRAWN = 100_000


def add(sub) -> None:
    pg = sub.add_parser("programs", help="generated programs' vocabulary: statement kinds, the chains they start from, the "
                        "twins; or programs drawn without a compile and the hazard relations they hold")
    pg.add_argument("--draw", type=positive(int, MAX_DRAWN), metavar="N",
                    help=f"draw N programs (at most {MAX_DRAWN}) as a campaign does, without compiling: one JSON a line")
    pg.add_argument("--seed", type=nonnegative_int, default=0, help="Hypothesis seed the programs are drawn from")
    pg.add_argument("--coverage", action="store_true",
                    help="with --draw: the hazard relations instead, each with the programs holding it and one example")
    pg.add_argument("--steer", action="store_true",
                    help="with --draw: steered toward relations the programs before do not hold, as a campaign's are "
                         "(picked from several times as many drawn)")
    pg.set_defaults(func=cmd_programs)


def cmd_programs(args) -> int:
    if args.draw is None:
        if args.coverage or args.steer:
            print("harness programs: --coverage and --steer go with --draw N", file=sys.stderr)
            return 2
        return vocabulary()
    from harness import strategies
    from harness.programs import model, relations

    drawn = strategies.programs(args.draw, args.seed, steer=args.steer)
    if not args.coverage:
        for p in drawn:
            print(model.to_json(p))
        return 0
    rows, covered = relations.coverage([(f"#{i}", p) for i, p in enumerate(drawn)])
    width = max(len(r["relation"]) for r in rows)
    print(f"{'relation':{width}}  programs  example")
    for r in rows:
        print(f"{r['relation']:{width}}  {r['programs']:8}  {r['example']}")
    print(covered)
    return 0


def vocabulary() -> int:
    """The vocabulary of generated programs: statement kinds, the attention chains they start from, the twins."""
    from harness import compat
    from harness.kernels import program_family
    from harness.programs import STATEMENT_KINDS, generate, model, templates

    def first(doc):
        return " ".join(doc.split()).split(". ")[0].rstrip(".")
    for name, module in STATEMENT_KINDS.items():
        print(f"statement {name}: {first(module.__doc__).removeprefix(f'{name}: ')}")
    for name, write in templates.TEMPLATES.items():
        print(f"chain {name}: {first(write.__doc__)} [{model.fingerprint(generate.template(name))}]")
    for knob in program_family.TWINS:
        print(f"twin {knob} ({compat.KNOBS[knob]}): bit for bit the knob-free kernel's outputs where the arithmetic is exact")
    return 0
