"""The benchmark's measurements, below every library package that reads them.

``schema`` is the result file's format (``python -m gemmaserve.measurements.schema`` rewrites
docs/bench-schema.md); ``stats`` the statistics over its records (decode by differencing, bootstrap
intervals, McNemar, the detectable gap); ``questions`` the quality question sets and their scoring;
``speeds`` the measured speeds that ``plan --from-bench`` reads from a folder of result files. ``bench``
writes and analyses result files, ``plan`` reads their speeds and ``sagemaker update``'s gate judges with
their statistics and questions; none of these modules imports a library package or an I/O adapter
(the ``core-below-library`` contract in pyproject.toml).
"""
