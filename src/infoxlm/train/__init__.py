"""The pre-training engine: configuration, the joint step, checkpoints, distribution."""
