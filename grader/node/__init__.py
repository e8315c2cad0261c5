"""The grading node: claims queued gradings from the database, grades them in the sandbox
with warm judges, writes their reports and draws their plots.

    from grader.node import start_node
    start_node(concurrency=2)     # `gspo-grader worker`: blocks until SIGTERM/SIGINT

The embedded service runs a GradingNode in its own process. Nothing here imports a web
framework, so a grading node loads none.
"""

from grader.node.drawing import DRAWING_LIMIT_S, Plotter, reference_preview
from grader.node.lanes import Lanes, lanes_of, pool_sizes
from grader.node.metrics import Metrics, outcome_label
from grader.node.metrics_server import MetricsServer
from grader.node.runner import MAX_ATTEMPTS, GradingNode, recover_lost, ungradable_report
from grader.node.start import (
    build_graders,
    check_database,
    check_exercises,
    configure_logging,
    node_name,
    start_node,
)
