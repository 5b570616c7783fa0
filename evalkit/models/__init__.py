"""Model helpers: tiny local checkpoints for tests and the CPU demo."""
