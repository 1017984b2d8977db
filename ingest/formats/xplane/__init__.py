"""TensorFlow 2 / JAX profiler captures (XPlane protobuf): the format
(:mod:`.trace`) and the protobuf it reads, decoded without TensorFlow, JAX
or xprof: the messages (:mod:`.messages`), the decoders written from them
(:mod:`.decoders`) over the wire format (:mod:`.wire`), and an HLO module's
instructions keyed for the dependency walk (:mod:`.hlo`)."""
