"""TensorFlow 1.x graphs and steps: the formats ``tf-stepstats``
(:mod:`.stepstats`, a RunMetadata / StepStats with its fast text reader
:mod:`.stepstats_text` and the loop runs of :mod:`.runs`), ``tf-oplist``
(:mod:`.oplist`, an op listing that adds shapes and control inputs to a
StepStats trace) and ``tf-opnames`` (:mod:`.opnames`, node names alone),
on the naming rules they share (:mod:`.names`)."""
