"""Only what pyproject.toml cannot say: bm's one C extension, ``brandmind.storage.popcount``
(the first pass of a vector search: brandmind/storage/popcount.c).  It is optional: where no
C compiler is found the install still succeeds, and bm does the same work in numpy
(brandmind/storage/scan.py), slower."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("brandmind.storage.popcount", ["brandmind/storage/popcount.c"], optional=True,
                             extra_compile_args=["-O3"])])
