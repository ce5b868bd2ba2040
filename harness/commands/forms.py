"""harness forms: each kernel block's equivalent forms, and the families that write them."""
from __future__ import annotations

from harness import case as case_mod
from harness import kernels
from harness.commands.common import DONE

EXITS = DONE


def add(sub) -> None:
    fo = sub.add_parser("forms", help="each kernel block's equivalent forms, and the families that write them")
    fo.set_defaults(func=cmd_forms)


def cmd_forms(args) -> int:
    """One `block form` pair per line (the default first), with the families that write it."""
    users = {b: [n for n in kernels.FAMILIES if b in kernels.family(n).offer.forms] for b in case_mod.FORMS}
    for block, forms in case_mod.FORMS.items():
        for i, (form, how) in enumerate(forms.items()):
            print(f"{block} {form}{' (default)' if i == 0 else ''}: {how} [{', '.join(users[block]) or 'no family'}]")
    return 0
