"""PyTorch traces: the profiler's Kineto JSON (:mod:`.trace`, with its
reader :mod:`.read`, the checks and numbering of a job's rank files
:mod:`.run`, a rank's assembly :mod:`.rank`, nesting :mod:`.nesting` and
training phases :mod:`.phase`) and the Execution Trace joined to it
(:mod:`.et`)."""
