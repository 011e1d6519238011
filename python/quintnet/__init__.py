"""QuintNet from Python: plans, pipeline schedules, SimGrid simulation and traces.

    import quintnet
    s = quintnet.schedule("1f1b", pp=4, microbatches=8)
    s.bubble_fraction                      # 3/11
    quintnet.simulate("experiments/configs/vit_3d.yaml", platform="dgx-a100")["step_time_s"]
    t = quintnet.read_trace("runs/quickstart/train_trace.json")
    quintnet.trace_arrays(t)["dur_us"]     # numpy columns of the events

The C++ core does the work (_quintnet, pybind11); errors are quintnet.Error (a
ValueError) with the message the `quintnet` command line prints.  docs/PYTHON.md.
"""
from ._quintnet import (  # noqa: F401
    HAVE_PNG,
    HAVE_SIMULATOR,
    Error,
    Plan,
    Schedule,
    Trace,
    __version__,
    load_plan,
    read_trace,
    schedule,
)

if HAVE_SIMULATOR:
    from ._quintnet import plan_layouts, simulate, simulate_uniform  # noqa: F401

_NUMERIC_FIELDS = ("rank", "ts_us", "dur_us", "step", "mb", "chunk", "bytes", "peer")


def trace_arrays(trace):
    """The events of `trace` as columns: numpy arrays for the numeric fields, lists for
    name, kind and lane.  Without numpy, every column is a list."""
    events = trace.events
    columns = {key: [e[key] for e in events] for key in ("name", "kind", "lane") + _NUMERIC_FIELDS}
    try:
        import numpy
    except ImportError:
        return columns
    for key in _NUMERIC_FIELDS:
        columns[key] = numpy.asarray(columns[key], dtype=numpy.float64 if key.endswith("_us") else numpy.int64)
    return columns
