"""The `bm` command line (installed as ``brandmind.cli``): it only translates to ``brandmind.Memory``."""
