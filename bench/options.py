"""Command-line option types the benchmarks share."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def names_among(known: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse `type`: a comma-separated list of names, each one of `known` (else argparse's usage
    error names the unknown ones and the choices)."""

    def parse(text: str) -> list[str]:
        names = text.split(",")
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {unknown}: choose among {', '.join(known)}")
        return names

    return parse
