"""``python -m autoscaler`` = the ``flink-autoscaler`` command."""

import sys

from autoscaler.cli import main

sys.exit(main())
