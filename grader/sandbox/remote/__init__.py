"""The judge's side of a call into the sandbox (needs torch; `grader.sandbox` does not).

    from grader.sandbox.remote import open_student

    proxy.py      StudentProxy, open_student: the student's functions, run in a worker
    pipeline.py   requests to one worker: numbered, pipelined, replies read in order
    autograd.py   a worker's result wired into the judge's autograd graph
    forecast.py   calls sent ahead from an earlier grading's calls, and the forecasts kept

The wire itself (frames, their codec) is the worker program's own, `grader.sandbox.worker`;
its judge-side names are offered here too.
"""

from grader.sandbox.remote.autograd import (
    DOUBLE_BACKWARD,
    ProtocolError,
    all_ones,
    attach,
    caller_device,
    check_grads,
    mirror_mutations,
)
from grader.sandbox.remote.forecast import (
    AHEAD_BYTES,
    AHEAD_CALLS,
    TOP_UP_BELOW,
    CallsAhead,
    Forecast,
    ForecastCall,
    Forecasts,
)
from grader.sandbox.remote.proxy import CRASHES_BEFORE_NOT_RUN, StudentProxy, open_student
from grader.sandbox.worker.calls import Graph, graph_of, prepare_inputs, run_call, tensor_bytes
from grader.sandbox.worker.codec import (
    DTYPES,
    Encoded,
    Frame,
    TensorSpec,
    encode,
    replace_tensors,
    tensors_in,
    with_fields,
)
from grader.sandbox.worker.contract import WireLimits
from grader.sandbox.worker.wire import Channel
