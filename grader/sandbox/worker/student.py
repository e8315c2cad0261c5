"""Loading the submission, and describing its failures in the student's own terms.

Everything the student sees refers to their file only: a syntax error's caret excerpt, a
traceback cut down to the frames of their file (line numbers in their file), never a frame
of the worker or the grader.
"""

from __future__ import annotations

import linecache
import sys
import traceback
import types

MODULE_NAME = "submission"
MAX_TEXT_CHARS = 16_000  # a message or traceback longer than this is cut in the middle


def cap_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Keep the head and the tail: the exception line sits at the end of a traceback."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"


def safe_str(obj: object) -> str:
    """str() of a student object, which may itself raise."""
    try:
        return str(obj)
    except BaseException:  # a hostile __str__ must not take the worker down
        return f"<unprintable {type(obj).__name__}>"


def describe_exception(exc: BaseException, filename: str) -> dict:
    """type name, message, last student line and the student-only traceback of `exc`."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    type_name = type(exc).__name__
    message = cap_text(safe_str(exc))
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines.append(f"{type_name}: {message}\n" if message else f"{type_name}\n")
    return {
        "type_name": type_name,
        "message": message,
        "line": frames[-1].lineno if frames else None,
        "traceback": cap_text("".join(lines if frames else lines[-1:])),
    }


def headline(info: dict, filename: str) -> str:
    """'ZeroDivisionError: division by zero (submission.py, line 12)'."""
    where = f"{filename}, line {info['line']}" if info["line"] else filename
    return f"{info['type_name']}: {info['message']} ({where})"


def _syntax_error(exc: SyntaxError, filename: str) -> dict:
    detail = "".join(traceback.format_exception_only(type(exc), exc))
    where = f"{filename}, line {exc.lineno}" if exc.lineno else filename
    return {
        "kind": "syntax_error",
        "message": f"{type(exc).__name__}: {exc.msg} ({where})",
        "line": exc.lineno,
        "detail": cap_text(detail),
    }


def _compile(source: str, filename: str) -> tuple[types.CodeType | None, dict | None]:
    try:
        return compile(source, filename, "exec", dont_inherit=True), None
    except SyntaxError as exc:
        return None, _syntax_error(exc, filename)
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        message = f"{type(exc).__name__}: {safe_str(exc)} ({filename})"
        return None, {"kind": "syntax_error", "message": message, "line": None, "detail": ""}


def _remember_source(filename: str, source: str) -> None:
    """Let tracebacks show the student's lines: the file does not exist in the sandbox."""
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)


def _missing(module: types.ModuleType, functions: list[str]) -> dict | None:
    missing = [name for name in functions if not callable(getattr(module, name, None))]
    if not missing:
        return None
    names = ", ".join(missing)
    noun = "function" if len(missing) == 1 else "functions"
    return {
        "kind": "missing_function",
        "message": f"The submission does not define the {noun} {names}.",
        "line": None,
        "detail": f"Expected callable top-level {noun}: {names}",
    }


def load(
    source: str, filename: str, functions: list[str]
) -> tuple[types.ModuleType | None, dict | None]:
    """Compile and run the submission in a fresh module: (module, None) or (None, load error).

    The load error dict has the fields of the judge's LoadError: kind, message, line, detail.
    """
    code, error = _compile(source, filename)
    if error is not None:
        return None, error
    _remember_source(filename, source)
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = filename
    sys.modules[MODULE_NAME] = module  # dataclasses, pickling helpers look modules up here
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are the student's too
        info = describe_exception(exc, filename)
        message = cap_text(headline(info, filename), 2000)
        return None, {
            "kind": "import_error",
            "message": message,
            "line": info["line"],
            "detail": info["traceback"],
        }
    error = _missing(module, functions)
    return (None, error) if error else (module, None)
