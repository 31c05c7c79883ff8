"""Where a run's data lives on disk: the layout, durable writes and the Zarr stores."""
