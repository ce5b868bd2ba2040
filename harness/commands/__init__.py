"""One module per `harness` command, beside the parser (harness.cli) that lists them.

Each holds `add(sub)`, which adds its subcommand and options, and `cmd_<name>(args)`, which runs it
and returns the exit status; harness.commands.common holds what several share. A command parses,
calls the library and prints: the library never imports a command (import-linter, pyproject.toml).
"""
