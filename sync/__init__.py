"""bm sync: replicate the op log between stores (remotes, planner, merge rules, daemon).

Installed as ``brandmind.sync``. It imports the library (``brandmind``); the library never
imports it. The merge rules, and where each is implemented: ``brandmind/merge.py``.
"""
