"""The metric window: which of a job's samples count, kept in the driver between ticks; no Spark here.

``job_window`` holds the rules for one job's window (stabilization, epochs, the slide, when it is full),
``load_change`` tells a change of the offered load from noise (the window then restarts), and
``book.WindowBook`` keeps every job's window across ticks and turns each collected sample into the
inputs those rules take. Both evaluators share it, so a sample counts, ages out or starts a new epoch
alike in each: ``evaluate.spark`` keeps the rows in Spark, ``evaluate.oracle`` as lists in the driver.
"""
