"""The merge rules of bm sync moved to the library: brandmind/merge.py (the prose, and each
rule as a pure function with a table test in tests/test_merge_rules.py)."""
