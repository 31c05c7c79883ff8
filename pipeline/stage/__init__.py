"""Stage: every date of a tile warped onto the target grid into ``work/input.zarr``
(:mod:`.staging`: the tasks and their builder; :mod:`.warp` and :mod:`._resample`: the warp)."""
