"""The per-job stages of a tick, one module per stage: decide, plugins, slots, realize, record.

``autoscaler.daemon.Daemon.run_tick`` calls them in that order (after collect, load and evaluate); the
values that travel between them are in :mod:`autoscaler.tick.steps`.
"""
