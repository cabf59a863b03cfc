# executor/: plan loading + validation (plan_load.c), the public plan API (plan_api.c) and the
# plan registry (registry.c); their tests and the plan corpora they read.
libmscclpp_la_SOURCES += executor/plan_load.c executor/plan_api.c executor/plan_verify.c \
	executor/registry.c
noinst_HEADERS += executor/registry.h

if HAVE_CHECK
check_PROGRAMS += tests/unit/test_plan tests/unit/test_registry
TESTS += tests/unit/test_plan tests/unit/test_registry
tests_unit_test_plan_SOURCES = tests/unit/test_plan.c
tests_unit_test_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_plan_LDADD = libmscclpp.la $(CHECK_LIBS)
# The registry is internal (hidden symbols): link the library objects (see Makefile.am).
tests_unit_test_registry_SOURCES = tests/unit/test_registry.c
tests_unit_test_registry_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_registry_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif

EXTRA_DIST += \
	tests/plans-bad/EXPECTED \
	tests/plans-bad/README.md \
	tests/plans-bad/alignment_not_power_of_two.json \
	tests/plans-bad/bad_protocol.json \
	tests/plans-bad/barrier_without_id.json \
	tests/plans-bad/block_id_mismatch.json \
	tests/plans-bad/collective_allgather_chunks.json \
	tests/plans-bad/collective_allreduce_chunks.json \
	tests/plans-bad/collective_reducescatter_chunks.json \
	tests/plans-bad/copy_channel_ids.json \
	tests/plans-bad/copy_remote_descriptor.json \
	tests/plans-bad/empty_name.json \
	tests/plans-bad/flush_on_memory.json \
	tests/plans-bad/gpu_channel_type_none.json \
	tests/plans-bad/gpu_id_mismatch.json \
	tests/plans-bad/huge_chunk_count.json \
	tests/plans-bad/huge_message_size.json \
	tests/plans-bad/make_corpus.py \
	tests/plans-bad/min_above_max.json \
	tests/plans-bad/missing_collective.json \
	tests/plans-bad/missing_desc_index.json \
	tests/plans-bad/missing_gpu_id.json \
	tests/plans-bad/missing_gpus.json \
	tests/plans-bad/missing_inplace.json \
	tests/plans-bad/missing_input_chunks.json \
	tests/plans-bad/missing_name.json \
	tests/plans-bad/missing_op_name.json \
	tests/plans-bad/missing_ops.json \
	tests/plans-bad/missing_protocol.json \
	tests/plans-bad/missing_remote_buffers.json \
	tests/plans-bad/missing_threadblocks.json \
	tests/plans-bad/nested_pipeline.json \
	tests/plans-bad/nop_with_descriptors.json \
	tests/plans-bad/old_format_camelcase.json \
	tests/plans-bad/pipeline_unit_size_zero.json \
	tests/plans-bad/port_put_without_channel.json \
	tests/plans-bad/put_local_destination.json \
	tests/plans-bad/put_unpaired_descriptors.json \
	tests/plans-bad/put_without_dst.json \
	tests/plans-bad/range_barrier_id.json \
	tests/plans-bad/range_barrier_nblocks.json \
	tests/plans-bad/range_block_channel_id.json \
	tests/plans-bad/range_block_switch_id.json \
	tests/plans-bad/range_chunk_index.json \
	tests/plans-bad/range_chunk_size.json \
	tests/plans-bad/range_op_channel_id.json \
	tests/plans-bad/range_peer_rank.json \
	tests/plans-bad/range_remote_buffer_id.json \
	tests/plans-bad/range_remote_chunk.json \
	tests/plans-bad/range_remote_owner_chunks.json \
	tests/plans-bad/range_semaphore_id.json \
	tests/plans-bad/range_switch_channel_id.json \
	tests/plans-bad/rank_subset.json \
	tests/plans-bad/remote_buffer_owner_range.json \
	tests/plans-bad/remote_buffer_self.json \
	tests/plans-bad/remote_ref_access.json \
	tests/plans-bad/remote_ref_range.json \
	tests/plans-bad/scratch_absurd.json \
	tests/plans-bad/self_channel.json \
	tests/plans-bad/sem_acquire_without_ids.json \
	tests/plans-bad/semaphore_unbalanced.json \
	tests/plans-bad/signal_missing.json \
	tests/plans-bad/signal_without_channels.json \
	tests/plans-bad/signal_wrong_channel.json \
	tests/plans-bad/switch_not_member.json \
	tests/plans-bad/syntax_comment.json \
	tests/plans-bad/syntax_empty.json \
	tests/plans-bad/syntax_not_object.json \
	tests/plans-bad/syntax_trailing_garbage.json \
	tests/plans-bad/syntax_truncated.json \
	tests/plans-bad/tbg_id_range.json \
	tests/plans-bad/threads_out_of_range.json \
	tests/plans-bad/too_many_block_channels.json \
	tests/plans-bad/too_many_channels_per_op.json \
	tests/plans-bad/too_many_descriptors.json \
	tests/plans-bad/too_many_semaphore_ids.json \
	tests/plans-bad/type_desc_not_object.json \
	tests/plans-bad/type_gpus_object.json \
	tests/plans-bad/type_index_negative.json \
	tests/plans-bad/type_index_real.json \
	tests/plans-bad/type_inplace_string.json \
	tests/plans-bad/type_input_chunks_string.json \
	tests/plans-bad/type_name_number.json \
	tests/plans-bad/type_op_not_object.json \
	tests/plans-bad/unknown_buffer_type.json \
	tests/plans-bad/unknown_channel_type.json \
	tests/plans-bad/unknown_format.json \
	tests/plans-bad/unknown_op.json \
	tests/plans-bad/unknown_op_channel_type.json \
	tests/plans-bad/unknown_reduce_op.json \
	tests/plans-bad/wait_missing.json \
	tests/plans-bad/wait_on_switch.json \
	tests/plans-bad/wait_unpaired_channel.json \
	tests/plans-bad/zero_chunks_used.json \
	tests/plans-bad/zero_gpus.json \
	tests/plans-reference/README.md \
	tests/plans-reference/allgather_nvls_zero_copy_4.json \
	tests/plans-reference/allgather_pkt_rppkt_4.json \
	tests/plans-reference/allreduce_4.json \
	tests/plans-reference/allreduce_pkt_4.json \
	tests/plans-reference/alltoall_4.json

# Plans only this executor runs (glre, lifted MSCCL++ limits) on the host interpreter.
if HAVE_CHECK
check_PROGRAMS += tests/unit/test_plan_exec
TESTS += tests/unit/test_plan_exec
tests_unit_test_plan_exec_SOURCES = tests/unit/test_plan_exec.c tests/unit/kern_harness.c
tests_unit_test_plan_exec_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_plan_exec_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(CHECK_LIBS)
endif
