"""loopctl-fleet: many loopctl loops at once, on Temporal (``loopctl fleet …``)."""
