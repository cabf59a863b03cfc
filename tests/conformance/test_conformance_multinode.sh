#!/bin/sh
# Conformance of the multi-node plans (plans/multinode/): each plan runs as K nodes, every node
# a network namespace (root), else a forced node id per rank; every element of every rank is
# checked. The bounded tier by default (see test_conformance.c); MSCCLPP_CONFORMANCE_FULL=1
# runs every dtype x op x size.
top_build=${MSCCLPP_TOP_BUILDDIR:-.}
CONFORMANCE_SET=multinode
export CONFORMANCE_SET
exec "$top_build/tests/conformance/test_conformance"
