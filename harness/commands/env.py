"""harness env: what TileLang, torch, CUDA and GPU this machine has."""
from __future__ import annotations

from harness.commands.common import DONE
from harness.environment import environment

EXITS = DONE


def add(sub) -> None:
    e = sub.add_parser("env", help="what TileLang, torch, CUDA and GPU this machine has")
    e.set_defaults(func=cmd_env)


def cmd_env(args) -> int:
    for k, v in environment().items():
        print(f"{k:16} {v}")
    return 0
