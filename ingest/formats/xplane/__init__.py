"""TensorFlow 2 / JAX profiler captures (XPlane protobuf).

:mod:`.trace` is the format: the file, the rules, and the order of the
steps, each a module of its own: the protobuf decoded without TensorFlow,
JAX or xprof (:mod:`.messages` declares the messages, :mod:`.decoders`
writes their decoders, :mod:`.wire` is the wire format); the planes read
into a :class:`.capture.Capture` (:mod:`.host`, :mod:`.device`); kernels
joined to their ops (:mod:`.launches`); dependencies from the HLO
(:mod:`.hlo`, :mod:`.dependencies`); the frames (:mod:`.frames`)."""
