# python/: the pure-Python package (DSL, mscclpp.compile, plan checker); pip install ./python
EXTRA_DIST += python/pyproject.toml python/README.md python/mscclpp/__init__.py \
	python/mscclpp/__main__.py python/mscclpp/_binding.py python/mscclpp/_compiler.py \
	python/mscclpp/_paths.py \
	python/mscclpp/_version.py python/mscclpp/_native.py python/mscclpp/default_plans.py python/mscclpp/language/__init__.py \
	python/mscclpp/language/channel.py python/mscclpp/language/collectives.py \
	python/mscclpp/language/general.py python/mscclpp/language/internal/__init__.py \
	python/mscclpp/language/internal/ops.py python/mscclpp/language/internal/passes.py \
	python/mscclpp/language/internal/types.py python/mscclpp/language/loop.py \
	python/mscclpp/language/program.py python/mscclpp/language/rank.py \
	python/mscclpp/language/thread_block_group.py python/mscclpp/language/utils.py \
	python/mscclpp/simulator.py python/mscclpp/plan_check.py python/mscclpp/runtime.py \
	python/mscclpp/plan_view.py \
	python/mscclpp/ext/__init__.py python/mscclpp/ext/algorithm_collection_builder.py

# Python tests (pytest): make check-python
check-python:
	cd $(top_srcdir) && python3 -m pytest tests/python -q
.PHONY: check-python
