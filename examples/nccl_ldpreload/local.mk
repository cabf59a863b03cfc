# examples/nccl_ldpreload
