// @name step-breakdown
// @summary Per step: its host time, its device window, and the window broken down into computation, communication, copies and idle time.
// @requires steps
// @param trace TRACE: the trace (one rank, or several ranks' files ingested as one)
// @column rank: the step's rank (0 for a trace of one rank)
// @column step: the step's number (`ProfilerStep#6`: 6; the `step` its ops and kernels carry)
// @column name: its marker op's name
// @column host_us: the host step time: its marker's duration (us)
// @column ops: ops that belong to the step
// @column kernels: kernels, copies and memsets that belong to it
// @column window_us: its device window: the earliest start to the latest end of its kernels (us; null: no kernels)
// @column busy_us: in the window, time any kernel, copy or memset of the rank ran (us)
// @column computation_us: in the window, time compute kernels or memsets ran (us)
// @column communication_us: in the window, time communication kernels ran (us)
// @column memcpy_us: in the window, time copies ran (us)
// @column exposed_communication_us: communication with no computation at the same time (us)
// @column exposed_memcpy_us: copies with neither computation nor communication at the same time (us)
// @column idle_us: window_us - busy_us: time the rank's devices ran nothing (us)
//
// Definition. Made at ingest (`ingest/steps.py`, `ingest/device_time.py`).
// A step is an executed op that marks one: PyTorch's `ProfilerStep#N`,
// PaddlePaddle's `ProfileStep#N`, JAX's and TensorFlow's
// StepTraceAnnotation (an annotation with a `step_num` arg: XPlane and
// Chrome traces), or the ops the
// pattern given at ingest names (`--step-marker REGEX`, its number the first
// group of digits it captures). Its host range is its marker's; an op
// belongs to the step whose host range holds its start, on any thread of
// its rank; a kernel to the step of the runtime call that issued it (else
// of the op that launched it, else the one whose range holds its start).
// Each figure is the length of a union of intervals (kernels on several
// streams or devices of the rank at once count once), clipped to the
// window, over every kernel of the rank (one of the step before still
// running counts, as it did on the device). The categories are TraceLens's
// `gpu_timeline`'s, taken per step: memsets count as computation, and
// computation_us + exposed_communication_us + exposed_memcpy_us + idle_us =
// window_us. TraceLens measures the whole trace's device span instead of a
// step's window: `device-time-breakdown` gives that. Order: rank, then the
// steps' start.
//
// Neo4j Browser:
//   :param trace => 'step'
MATCH (s:Step {trace: $trace})
RETURN s.rank AS rank, s.number AS step, s.name AS name, s.host_us AS host_us, s.ops AS ops, s.kernels AS kernels,
       s.window_us AS window_us, s.busy_us AS busy_us, s.computation_us AS computation_us,
       s.communication_us AS communication_us, s.memcpy_us AS memcpy_us,
       s.exposed_communication_us AS exposed_communication_us, s.exposed_memcpy_us AS exposed_memcpy_us,
       s.idle_us AS idle_us
ORDER BY rank, s.start_us, s.uid
