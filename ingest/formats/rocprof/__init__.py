"""rocprofiler-sdk captures (rocprofv3): see :mod:`.trace`."""
