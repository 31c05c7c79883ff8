"""Outputs: the mask and provenance layers (:mod:`.mask_layer`), the products read from the cube
(:mod:`.products`: COGs, quicklooks, the diagnostics table) and the builder of their tasks
(:mod:`.tasks`)."""
