"""Chrome Trace Event Format from any producer: reading the file
(:mod:`.load`), who wrote it (:mod:`.producers`), and the frames
(:mod:`.trace`)."""
