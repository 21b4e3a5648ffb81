"""Writes web/src/metrics.gen.ts from the vocabulary: `python -m runwatch.metrics.typescript`.

The web app's chart specs name roles; this module gives it the names that play each role
and the alias rules, so the browser finds the same key as `runwatch.metrics.find_key`.
A test fails when the file differs from `render()`.
"""

from __future__ import annotations

import json
import sys

from runwatch.metrics.aliases import EXACT, PATTERNS, PREFIXES
from runwatch.metrics.catalogue import Role
from runwatch.metrics.docs import write_generated
from runwatch.metrics.lookup import names

HEADER = """// Generated from src/runwatch/metrics by `python -m runwatch.metrics.typescript`.
// Do not edit: change the vocabulary and run it again. The metric vocabulary the web
// app reads (docs/metrics.md): roles, the names that play each role, and the rules that
// map other frameworks' names to canonical ones.
"""


def _js(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def render() -> str:
    out = [HEADER]
    out.append("export type Role =\n" + "\n".join(f"  | {_js(r.value)}" for r in Role) + ";\n")
    out.append("/** The names that play each role, best first: the canonical name, then its "
               "listed aliases. */")
    out.append("export const ROLE_NAMES: Readonly<Record<Role, readonly string[]>> = {")
    out += [f"  {r.value}: {_js(list(names(r)))}," for r in Role]
    out.append("};\n")
    out.append("/** Exact aliases: logged name -> [canonical name, transform its values need "
               "or null]. */")
    out.append("export const ALIASES: ReadonlyMap<string, readonly [string, string | null]> = "
               "new Map([")
    out += [f"  [{_js(k)}, [{_js(a.canonical)}, {_js(a.transform)}]]," for k, a in EXACT.items()]
    out.append("]);\n")
    out.append("/** A name that starts with a prefix is looked up with it replaced: "
               "[prefix, replacement]. */")
    out.append("export const PREFIXES: readonly (readonly [string, string])[] = [")
    out += [f"  [{_js(p)}, {_js(r)}]," for p, r, _ in PREFIXES]
    out.append("];\n")
    out.append("/** Name patterns, tried when no exact alias matches: [pattern, canonical "
               "name]. */")
    out.append("export const PATTERNS: readonly (readonly [RegExp, string])[] = [")
    out += [f"  [new RegExp({_js(p.pattern)}), {_js(a.canonical)}]," for p, a in PATTERNS]
    out.append("];\n")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return write_generated(render, "web/src/metrics.gen.ts", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
