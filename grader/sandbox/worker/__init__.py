"""The code that runs inside the sandboxed worker process.

This folder is bind-mounted read-only into the sandbox on its own, so every module here
imports only the standard library, torch and its siblings (relative imports). The judge side
imports the same files as `grader.sandbox.worker.*`, so both ends agree on frames.

    contract.py  what both sides agree on: limits, wire caps, request kinds, waits (stdlib)
    wire.py      the channel: frames over a socket with deadlines (both ends import it)
    codec.py     the frame format: value trees with tensors <-> JSON header + raw bytes
    main.py      entry point: `python -I -B <this folder>/main.py --limits JSON [--zygote]`
    serve.py     the request loop: ready, then load / call / backward / release / exit
    student.py   compiling and running the submission; student-only tracebacks
    calls.py     one call: in-place detection, autograd graphs kept under a call id
    rlimits.py   limits applied after `import torch` (address space, CPU, files, processes)
    zygote.py    the zygote: imports torch once, forks one confined worker per grading
    confine.py   the walls a forked worker gets (namespaces, uid, capabilities)
"""
