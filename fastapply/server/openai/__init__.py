"""The OpenAI / Morph / Relace compatible HTTP front: request parsing (:mod:`.api`, with
the message's tags in :mod:`.tags`), response shapes (:mod:`.responses`), streamed events
(:mod:`.streaming`) and errors (:mod:`.errors`) as pure functions; the relay to Triton's
gRPC stream (:mod:`.upstream`) and the HTTP server around them (:mod:`.server`)."""
