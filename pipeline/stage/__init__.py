"""Stage: every date of a tile warped onto the target grid into ``work/input.zarr``
(:mod:`.staging`: the tasks and their builder; :mod:`.warp`: one window of one date read onto
the grid, with :mod:`.source` for the region of the file it needs, :mod:`.rpc_lattice` and
:mod:`._resample` for the fast RPC warp, and :mod:`.values` for DN to values)."""
