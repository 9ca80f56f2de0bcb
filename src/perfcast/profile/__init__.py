"""``perfcast profile``: measure kernels on the local GPU into a kernel table (torch, lazily)."""
