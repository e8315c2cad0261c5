"""Entry point of the sandboxed worker.

    python -I -B <worker folder>/main.py --limits '<Limits as JSON>' [--fd 3]

Run as a file, this folder is not a package, yet its modules use relative imports (so the
judge can import the same code as `grader.sandbox.worker`). The bootstrap below loads the
folder as a package under a neutral name, then drops the folder from sys.path so the
submission cannot import worker modules by their plain names.

Order matters: import torch, set one thread, apply the limits, and only then read the
submission (the judge sends it after the "ready" frame).
"""

import sys

if __package__:
    from .serve import main
else:
    import importlib.util
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _spec = importlib.util.spec_from_file_location(
        "gspo_worker", os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
    )
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["gspo_worker"] = _package
    _spec.loader.exec_module(_package)
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        del sys.path[0]
    from gspo_worker.serve import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
