import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The library reads no build or source path of its own: the tests name the source tree's plans
# explicitly, as make check does (Makefile.am, AM_TESTS_ENVIRONMENT).
os.environ.setdefault("MSCCLPP_PLAN_DIR", os.path.join(ROOT, "plans"))
