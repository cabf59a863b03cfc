# tests/: unit (Check), mpi, conformance, gpu; python tests run through pytest from .ci/run
