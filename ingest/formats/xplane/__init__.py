"""TensorFlow 2 / JAX profiler captures (XPlane protobuf): the format
(:mod:`.trace`) and the protobuf readers it needs (:mod:`.wire`,
:mod:`.xspace`, :mod:`.hlo`), decoded without TensorFlow, JAX or xprof."""
