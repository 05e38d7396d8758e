"""The storage layer's repositories: one module per aggregate, the only code besides
``sqlstore`` that issues SQL.  Each is a set of small functions taking the ``SQLStore``
first; the schema (CREATE TABLE text) of an aggregate lives in its module and
``sqlstore`` applies it.  The op log (LMDB) is ``brandmind/oplog.py``, the only module
that knows LMDB keys."""
