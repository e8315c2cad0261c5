"""Read a submission's function signatures from its source text, without running it.

Through the sandbox, the judge only holds proxies for the student's functions, so `inspect`
cannot see their parameters. Parsing the source with `ast` gives the same answer for ordinary
`def` statements and executes nothing; defaults are kept only when they are literals.
"""

from __future__ import annotations

import ast
import inspect

_EMPTY = inspect.Parameter.empty


def source_signature(source: str, name: str) -> inspect.Signature | None:
    """The signature of the last top-level `def name(...)` in `source`, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return _signature(found.args) if found is not None else None


def _signature(args: ast.arguments) -> inspect.Signature:
    kinds = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [_EMPTY] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parameters = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        only = index < len(args.posonlyargs)
        kind = kinds.POSITIONAL_ONLY if only else kinds.POSITIONAL_OR_KEYWORD
        parameters.append(kinds(arg.arg, kind, default=_literal(default)))
    if args.vararg is not None:
        parameters.append(kinds(args.vararg.arg, kinds.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parameters.append(kinds(arg.arg, kinds.KEYWORD_ONLY, default=_literal(default)))
    if args.kwarg is not None:
        parameters.append(kinds(args.kwarg.arg, kinds.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _literal(node: ast.expr | object) -> object:
    """A literal default as its value; anything else as its source text (never evaluated)."""
    if node is _EMPTY or node is None:
        return _EMPTY
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
