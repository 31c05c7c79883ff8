"""Control of a run around its phases: the output folder's guards, progress and the run record
(:mod:`.status`), publication."""
