"""Data-parallel training on torch.distributed (torchrun; gloo on CPU, NCCL on GPU): context, setup, aggregation."""
