"""The HTTP service: grading API, submissions, metrics, plots and the web page.

from grader.service import create_app, serve
serve(host="127.0.0.1", port=8000, data_dir="./data")   # blocks; what `gspo-grader serve` runs
"""

from grader.service.app import create_app
from grader.service.class_report import class_stats, stats_csv, stats_text
from grader.service.intake import Intake, accept, regrade
from grader.service.regrading import apply_preview, preview, rollback, start_preview
from grader.service.server import serve
from grader.settings import Settings, SettingsError, load_settings
