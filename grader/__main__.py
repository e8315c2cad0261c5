"""`python -m grader` is the `gspo-grader` command."""

from grader.cli import main

raise SystemExit(main())
