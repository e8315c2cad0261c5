"""The code that runs inside the sandboxed worker process.

This folder is bind-mounted read-only into the sandbox on its own, so every module here
imports only the standard library, torch and its siblings (relative imports). The judge side
imports the same wire code as `grader.sandbox.worker.wire`, so both ends agree on frames.

    wire.py      the channel: frames over a socket with deadlines (both ends import it)
    codec.py     the frame format: value trees with tensors <-> JSON header + raw bytes
    main.py      entry point: `python -I -X faulthandler <this folder>/main.py --limits JSON`
    serve.py     the request loop: hello, then load / call / backward / release / exit
    student.py   compiling and running the submission; student-only tracebacks
    calls.py     one call: in-place detection, autograd graphs kept under a call id
    rlimits.py   limits applied after `import torch` (address space, CPU, files, processes)
"""

from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parent  # what the launcher bind-mounts
MAIN_PATH = WORKER_DIR / "main.py"  # what the launcher runs inside the sandbox
