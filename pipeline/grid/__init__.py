"""Where the run's pixels are: the target grid every date is warped to (:mod:`.target`) and its
tiles, halos and feather weights (:mod:`.tiling`)."""
