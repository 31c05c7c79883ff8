"""Solve: the tiles' decompositions written into the cube.

:mod:`.scopes` holds the two solve scopes (tile, scene) a run asks for its tasks, markers and
progress units; :mod:`.tile` solves one tile, :mod:`.rows` a tile row and the seams between rows
(:mod:`.rowblend` and :mod:`._feather` their arithmetic), :mod:`.scene_scope` one band as one
matrix; :mod:`.warmup` compiles the kernels in the workers.
"""
