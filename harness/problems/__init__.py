"""Problems and candidates: loading, formats, unseen shapes, policy and library rules.

``problem.py`` loads a problem (``problemspec.py``: ``Problem`` and ``Tolerance``;
``importers/``: GPU MODE and KernelBench); ``snapshot.py`` copies its files where no
worker can write; ``candidate.py`` the ``Candidate``; ``unseen.py`` unseen shapes;
``policy.py``, ``library.py`` and ``library_share.py`` the forbidden ops and library use;
``precision.py`` the reference's fp32 precision; ``pysource.py`` parses Python source one
at a time (CPython 3.11's AST conversion is not thread-safe); ``receivers.py`` finds the
method receivers of a candidate's source that are Python containers, never tensors.
"""
