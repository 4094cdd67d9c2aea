"""The `pgkick` command: operators' commands, each a library call an app or a Lambda also makes.

`main` and `build_parser` live in pgkick.cli.main; the argument types in pgkick.cli.types.
"""

from pgkick.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
